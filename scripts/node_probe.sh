#!/usr/bin/env bash
# The all-reduce probes of scripts/node_probe.py on a lent node (no network), in one go:
#   bash scripts/node_probe.sh WHEELS OUT [RANKS...]
# WHEELS: a folder with new/ (this checkout's wheel), old/ (the wheel of the commit to compare
# start-up with) and deps/ (mpich, cffi, pycparser, setuptools wheels: the C loop compiles with cffi); OUT: where probe.jsonl and probe.log go.
# PROBE_SET=step: the training step over us, binding on and off, and over gloo.
# PROBE_SET=bind: the step and the psum loop with MPI_COLLECTIVES_BIND_CPUS 2, 1 and 0.
# PROBE_SET=compare: only the gradient psum, old wheel against new, two interleaved rounds, and the floor.
# PROBE_SET=targets: what issue 45 still needs judged on a node, in about 7 minutes: `tune` at the
#   first rank count with its defaults (how long; what it keeps; tune.log), MPICH's device
#   collectives on and off with the ranks bound and unbound (the built-in default), and the step
#   with each binding and over gloo at the other counts.
# PROBE_SET=lease: issue 45's open items inside one call (PROBE_DEADLINE seconds): the step at the
#   second count under each binding and over gloo, the bench there, tune at the first count (timed),
#   the bench at the third count if time is left.
# PROBE_SET=node-path: issue 55's targets (the node's own data path), about 4 minutes a rank count:
#   scripts/node_path_ab.sh at each count (two interleaved rounds of JAX's five collectives at 64 KiB,
#   1 and 16 MiB with the path on for the four it takes and off, the C loop, the memory floor and
#   gloo: node-path-N.txt), then the gradient psum with the path at its defaults and off, the C
#   floor, and the training step with the path, without it and over gloo (probe.jsonl).
# jax, jaxlib and numpy come from the node's Python (--system-site-packages). Every launch has a timeout.
set -uo pipefail
wheels=$1; out=$2; shift 2
ranks=${*:-16 8 2}
py=${PYTHON:-python3}
export JAX_PLATFORMS=cpu  # a GPU node: the probes are of the CPU collectives
mkdir -p "$out"
log=$out/probe.log; json=$out/probe.jsonl
case ${PROBE_SET:-full} in step|bind|targets|lease|node-path) venvs=new ;; *) venvs="new old" ;; esac  # only new: no start-up comparison
for v in $venvs; do
  [ -z "${PROBE_KEEP_VENVS:-}" ] || continue  # (a try elsewhere: /tmp/probe-new and -old made by hand)
  "$py" -m venv --system-site-packages "/tmp/probe-$v" &&
    # jax from another environment's site-packages (the lent node's is in a venv of its own)
    { [ -z "${PROBE_EXTRA_SITE:-}" ] || echo "$PROBE_EXTRA_SITE" > "$(echo /tmp/probe-$v/lib/python3*/site-packages)/probe-extra.pth"; } &&
    "/tmp/probe-$v/bin/pip" install -q --no-index --find-links "$wheels/deps" --find-links "$wheels/$v" \
      mpich cffi pycparser setuptools mpi-collectives >> "$log" 2>&1 || { echo "venv $v failed" >&2; tail -20 "$log" >&2; exit 1; }
done
nproc >> "$log"; "/tmp/probe-new/bin/python" -c "import jax; print('jax', jax.__version__)" >> "$log" 2>&1
probe() {  # probe VENV RANKS MODE [VAR=VALUE...]
  local venv=$1 n=$2 mode=$3; shift 3
  echo "== $venv $n $mode $*" >> "$log"
  env "$@" PROBE_T0="$(date +%s.%N)" timeout 120 "/tmp/probe-$venv/bin/mpiexec" -n "$n" \
    "/tmp/probe-$venv/bin/python" scripts/node_probe.py "$mode" 2>> "$log" |
    tee -a "$log" | grep '^{' | sed "s/^{/{\"wheel\": \"$venv\", /" >> "$json"
}
if [ "${PROBE_SET:-full}" = step ]; then  # the training step over us (binding on and off) and over gloo
  for n in $ranks; do
    port=$("/tmp/probe-new/bin/python" -c "from mpi_collectives.tools import launching; print(launching.free_port())")
    probe new "$n" step
    probe new "$n" step MPI_COLLECTIVES_BIND_CPUS=0
    probe new "$n" step PROBE_BACKEND=gloo PROBE_COORDINATOR=127.0.0.1:$port
  done
  echo "probe done" >> "$log"; exit 0
fi
if [ "${PROBE_SET:-full}" = node-path ]; then
  for n in $ranks; do
    echo "== node_path_ab.sh at $n ranks" >> "$log"
    VENV=/tmp/probe-new NRANKS=$n LAUNCH_TIMEOUT=150 WITH_C=1 WITH_GLOO=1 SIZES=65536,1048576,16777216 \
      OPS=all-reduce,all-gather,reduce-scatter,all-to-all,ppermute bash scripts/node_path_ab.sh mpich 2 \
      > "$out/node-path-$n.txt" 2>&1
    echo "node_path_ab.sh exit $?" >> "$log"
    port=$("/tmp/probe-new/bin/python" -c "from mpi_collectives.tools import launching; print(launching.free_port())")
    probe new "$n" grad
    probe new "$n" grad MPI_COLLECTIVES_NODE_PATH=0
    probe new "$n" floor
    probe new "$n" step PROBE_ITERS=10
    probe new "$n" step PROBE_ITERS=10 MPI_COLLECTIVES_NODE_PATH=0
    probe new "$n" step PROBE_ITERS=10 PROBE_BACKEND=gloo PROBE_COORDINATOR=127.0.0.1:$port
  done
  echo "probe done" >> "$log"; exit 0
fi
if [ "${PROBE_SET:-full}" = targets ]; then
  first=${ranks%% *}
  echo "== tune --ranks $first" >> "$log"
  start=$(date +%s)
  (cd /tmp && timeout 420 /tmp/probe-new/bin/python -m mpi_collectives tune --ranks "$first" --dry-run) \
    > "$out/tune.log" 2>&1
  echo "tune exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/tune.log" >> "$log"
  for n in $ranks; do
    for b in 1 0; do
      for d in all none; do probe new "$n" floor MPI_COLLECTIVES_BIND_CPUS=$b MPIR_CVAR_DEVICE_COLLECTIVES=$d; done
    done
  done
  for n in ${ranks#"$first"}; do
    port=$("/tmp/probe-new/bin/python" -c "from mpi_collectives.tools import launching; print(launching.free_port())")
    for b in 2 1 0; do probe new "$n" step MPI_COLLECTIVES_BIND_CPUS=$b; done
    probe new "$n" step PROBE_BACKEND=gloo PROBE_COORDINATOR=127.0.0.1:$port
  done
  echo "probe done" >> "$log"; exit 0
fi
if [ "${PROBE_SET:-full}" = lease ]; then
  # One call of a lease (PROBE_DEADLINE seconds, default 570, from here), issue 45's open items in
  # the order they matter, each stage bounded by what is left: item 2, the step at the second
  # count under each binding (the built-in twice: the noise) and over gloo, and once after three
  # 256 MiB psums (item 5); items 5 and 6, the bench at that count (bench-N.json/.log); item 3,
  # `tune --ranks FIRST --dry-run` with its defaults, cut at 330 s (the target is 300 s); last the
  # bench at the third count where time is left.
  deadline=$(( $(date +%s) + ${PROBE_DEADLINE:-570} ))
  left() { echo $(( deadline - $(date +%s) )); }
  set -- $ranks; first=$1; second=${2:-$1}; third=${3:-}
  port=$("/tmp/probe-new/bin/python" -c "from mpi_collectives.tools import launching; print(launching.free_port())")
  for b in 1 2 0 1; do probe new "$second" step MPI_COLLECTIVES_BIND_CPUS=$b PROBE_ITERS=10; done
  probe new "$second" step PROBE_BACKEND=gloo PROBE_COORDINATOR=127.0.0.1:$port PROBE_ITERS=10
  probe new "$second" step PROBE_BEFORE_MIB=256 PROBE_ITERS=10
  bench() {  # bench N MAX_SECONDS
    local t=$(( $(left) - 10 )); [ "$t" -le "$2" ] || t=$2
    [ "$t" -ge 60 ] || { echo "== bench $1 skipped: $t s left" >> "$log"; return; }
    echo "== bench --ranks $1 (cut at $t s)" >> "$log"
    (cd /tmp && PYTHONUNBUFFERED=1 timeout "$t" /tmp/probe-new/bin/python -m mpi_collectives bench --ranks "$1" \
      --max-bytes 16777216 --scale 0.3 --out "$out/bench-$1.json" --plot "/tmp/bench-$1.png") > "$out/bench-$1.log" 2>&1
    echo "bench $1 exit $?" >> "$log"
  }
  bench "$second" 200
  t=$(( $(left) - 10 )); [ "$t" -le 330 ] || t=330
  echo "== tune --ranks $first (cut at $t s)" >> "$log"
  start=$(date +%s)
  (cd /tmp && PYTHONUNBUFFERED=1 timeout "$t" /tmp/probe-new/bin/python -m mpi_collectives tune --ranks "$first" --dry-run) \
    > "$out/tune.log" 2>&1
  echo "tune exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/tune.log" >> "$log"
  [ -z "$third" ] || bench "$third" 120
  echo "probe done, $(left) s before the deadline" >> "$log"; exit 0
fi
if [ "${PROBE_SET:-full}" = bind ]; then  # binding: the process (1), the callers of MPI only (2), none (0)
  for n in $ranks; do
    for b in 2 1 0; do probe new "$n" step MPI_COLLECTIVES_BIND_CPUS=$b; probe new "$n" loop MPI_COLLECTIVES_BIND_CPUS=$b; done
  done
  echo "probe done" >> "$log"; exit 0
fi
if [ "${PROBE_SET:-full}" = compare ]; then  # the gradient psum, old wheel against new, interleaved
  for n in $ranks; do
    for round in 1 2; do probe old "$n" grad; probe new "$n" grad; done
    probe new "$n" floor
  done
  echo "probe done" >> "$log"; exit 0
fi
algorithms="recursive_doubling reduce_scatter_allgather ring tree recexch k_reduce_scatter_allgather smp"
for n in $ranks; do
  for round in 1 2 3; do probe old "$n" start; probe new "$n" start; done
  probe new "$n" floor
  probe new "$n" floor MPIR_CVAR_DEVICE_COLLECTIVES=all
  if [ "$n" -ge 8 ]; then
    for a in $algorithms; do
      probe new "$n" floor MPIR_CVAR_DEVICE_COLLECTIVES=none MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=$a
    done
  fi
  probe new "$n" grad
  probe new "$n" grad MPI_COLLECTIVES_CHECK_COLLECTIVES=0
  probe new "$n" grad MPI_COLLECTIVES_BIND_CPUS=0
  [ "$n" -lt 8 ] || probe new "$n" grad MPIR_CVAR_DEVICE_COLLECTIVES=none MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring
done
echo "probe done" >> "$log"

#!/usr/bin/env bash
# Ranks per node on a lent node (no network), in one call: what docs/layout.md shows.
#   bash scripts/node_layout.sh WHEELS OUT
# WHEELS: new/ (this checkout's wheel: scripts/build_wheels.sh x86_64) and deps/ (the mpich, cffi,
# pycparser and setuptools wheels for the node's Python). OUT: where the logs and JSON go.
# In order, each stage bounded by the time left (NODE_DEADLINE seconds from the start, default 480):
#   node.log      the node as the package reads it (lscpu, base.topology), info --init and doctor's
#                 layout lines at 2 ranks and at the node's CPUs;
#   layouts.log   `mpi-collectives layouts` of examples/train_data_parallel.py (a 3-layer MLP of
#                 width 2048, global batch 512) at 1, 2, 4, ... ranks on the node (layouts.json);
#   bench.log     the bench at BENCH_RANKS (default 8) ranks, sizes up to BENCH_MAX_BYTES (default 8)
#                 at BENCH_SCALE (default 0.1) of its iterations (bench-<N>ranks.json): its training
#                 step beside the same step as one rank with every CPU.
# NODE_STAGES: which of node, layouts and bench to run (default all three).
# jax, jaxlib and numpy come from the node's Python (its site-packages, put on the venv's path).
set -uo pipefail
wheels=$(cd "$1" && pwd); out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"; out=$(cd "$out" && pwd)
export JAX_PLATFORMS=cpu PYTHONUNBUFFERED=1  # a GPU node: the layouts are of the CPU
deadline=$(( $(date +%s) + ${NODE_DEADLINE:-480} ))
left() { echo $(( deadline - $(date +%s) )); }
py=${PYTHON:-python3}
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
venv=/tmp/node-layout
"$py" -m venv --system-site-packages "$venv" &&
  echo "$site" > "$(echo $venv/lib/python3*/site-packages)/node-site.pth" &&
  "$venv/bin/pip" install -q --no-index --find-links "$wheels/deps" cffi pycparser setuptools > "$out/setup.log" 2>&1 &&
  # into this venv whatever the node's Python holds: their commands (mpiexec, mpi-collectives) too
  "$venv/bin/pip" install -q --no-index --no-deps --ignore-installed --find-links "$wheels/deps" \
    --find-links "$wheels/new" mpich mpi-collectives >> "$out/setup.log" 2>&1 ||
  { echo "node_layout.sh: the venv failed" >&2; tail -20 "$out/setup.log" >&2; exit 1; }
V=$venv/bin
cpus=$(nproc)
stages=${NODE_STAGES:-node layouts bench}
cd /tmp
[[ " $stages " != *" node "* ]] || {
  echo "== $(date -u +%FT%TZ); $("$V/python" -c 'import jax, numpy; print("jax", jax.__version__, "numpy", numpy.__version__)')"
  lscpu | grep -E '^(Model name|Socket|Core|Thread|NUMA|CPU\(s\))'
  "$V/python" -c 'from mpi_collectives.base.topology import Topology; print("topology:", Topology.read().summary())'
  for n in 2 "$cpus"; do
    echo "== info --init, $n ranks"
    timeout 120 "$V/mpiexec" -n "$n" "$V/python" -m mpi_collectives info --init | grep -E '^(layout|tunings)'
    echo "== doctor, $n ranks"
    timeout 120 "$V/mpiexec" -n "$n" "$V/python" -m mpi_collectives doctor | grep -E 'layout|note|all good'
  done
} > "$out/node.log" 2>&1
[[ " $stages " != *" layouts "* ]] || {
echo "== layouts ($(left) s left)" >> "$out/node.log"
t=$(( $(left) - 200 )); [ "$t" -ge 60 ] || t=60
timeout "$t" "$V/mpi-collectives" layouts --repeat "${LAYOUT_REPEAT:-2}" --time 'median step ([0-9.]+) ms' \
  --out "$out/layouts.json" -- "$V/python" "$root/examples/train_data_parallel.py" \
  --global-batch 512 --hidden 2048 --layers 3 --steps 30 > "$out/layouts.log" 2>&1
echo "layouts exit $?" >> "$out/node.log"
}
ranks=${BENCH_RANKS:-8}
t=$(( $(left) - 5 ))
if [[ " $stages " != *" bench "* ]]; then
  :
elif [ "$t" -ge 60 ]; then
  echo "== bench --ranks $ranks (cut at $t s)" >> "$out/node.log"
  timeout "$t" "$V/python" -m mpi_collectives bench --ranks "$ranks" --max-bytes "${BENCH_MAX_BYTES:-8}" --scale "${BENCH_SCALE:-0.1}" \
    --out "$out/bench-${ranks}ranks.json" --plot /tmp/bench.png > "$out/bench.log" 2>&1
  echo "bench exit $?" >> "$out/node.log"
else
  echo "== bench skipped: $t s left" >> "$out/node.log"
fi
echo "done, $(left) s before the deadline" >> "$out/node.log"
# The results leave the node: its paths become <venv> and the checkout's ./ (the files name the MPI by
# name and version, the node by its cores).
for f in "$out"/*.log "$out"/*.json; do
  [ -f "$f" ] && sed -i -e "s|$venv|<venv>|g" -e "s|$root/|./|g" "$f"
done

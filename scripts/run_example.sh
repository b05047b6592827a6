#!/usr/bin/env bash
# The main job: a 4-rank JAX run whose collectives go over the bundled MPICH.
#   bash scripts/run_example.sh [ranks]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ranks=${1:-4}
venv=$(bash "$root/scripts/setup_env.sh" mpich)
export MPITRAMPOLINE_LIB=$(cd "$venv" && "$venv/bin/python" -m mpi_collectives libpath)
export JAX_PLATFORMS=cpu
export JAX_CPU_COLLECTIVES_IMPLEMENTATION=mpi
# The example's own variable (it calls jax.distributed.initialize itself): a free port for its coordinator.
export HELLO_COORDINATOR_PORT=$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
exec timeout 600 "$venv/bin/mpiexec" -n "$ranks" "$venv/bin/python" "$root/examples/hello_collectives.py"

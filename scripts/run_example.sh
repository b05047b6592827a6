#!/usr/bin/env bash
# The main job: a 4-rank JAX run whose collectives go over the bundled MPICH.
#   bash scripts/run_example.sh [ranks]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ranks=${1:-4}
# Only what the job runs: jax, jaxlib, the mpich wheel, cffi, numpy and this package (the test tools
# are scripts/test.sh's).
venv=$(MPI_COLLECTIVES_SETUP=run bash "$root/scripts/setup_env.sh" mpich)
export JAX_PLATFORMS=cpu
# The example calls mpi_collectives.initialize(): MPI gives it rank, size and the coordinator.
exec timeout 600 "$venv/bin/mpiexec" -n "$ranks" "$venv/bin/python" "$root/examples/hello_collectives.py"

#!/usr/bin/env bash
# Launch a JAX program over your cluster's MPI with plain mpirun/mpiexec.
#   bash examples/mpirun.sh [ranks] [program.py args...]
# Use the mpiexec of the same MPI that the package loads
# (`python -m mpi_collectives info` says which library that is).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ranks=${1:-2}
shift || true
program=("${@:-$here/train_data_parallel.py}")
python=${PYTHON:-python}
mpiexec=${MPIEXEC:-$(dirname "$(command -v "$python")")/mpiexec}
[ -x "$mpiexec" ] || mpiexec=mpiexec

# Programs that call mpi_collectives.initialize() need nothing more; these two
# lines also let programs that import jax first (or call jax.distributed
# themselves) use MPI for their collectives.
MPITRAMPOLINE_LIB=$(cd / && "$python" -m mpi_collectives libpath)
export MPITRAMPOLINE_LIB
export JAX_CPU_COLLECTIVES_IMPLEMENTATION=mpi

exec "$mpiexec" -n "$ranks" "$python" "${program[@]}"

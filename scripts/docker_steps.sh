#!/usr/bin/env bash
# The steps of the Docker image (Dockerfile), as a script that also runs on a
# plain host, so that CI checks them without a Docker engine:
#   bash scripts/docker_steps.sh VENV SOURCE
# makes VENV with JAX, the MPICH wheel, mpi4py and the package from SOURCE.
set -euo pipefail
venv=${1:?usage: docker_steps.sh VENV SOURCE}
source_dir=${2:?usage: docker_steps.sh VENV SOURCE}
python=${PYTHON:-python3}

# The native layer is compiled when the package is installed: a C compiler, no MPI.
if ! command -v cc > /dev/null 2>&1 && ! command -v gcc > /dev/null 2>&1; then
  apt-get update
  apt-get install -y --no-install-recommends gcc libc6-dev
  rm -rf /var/lib/apt/lists/*
fi

"$python" -m venv "$venv"
"$venv/bin/pip" install --disable-pip-version-check -q \
  "jax==0.10.2" "jaxlib==0.10.2" mpich mpi4py numpy
"$venv/bin/pip" install --disable-pip-version-check -q "$source_dir"
# The check the image's users rely on: the native layer finds the wheel's MPI.
(cd / && "$venv/bin/python" -m mpi_collectives info | grep -E '^(family|library) ')

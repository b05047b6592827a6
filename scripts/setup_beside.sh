#!/usr/bin/env bash
# Orbax, Flax, Optax, mpi4jax and NetKet beside the package in one venv, for
# tests/jax_over_mpi/test_beside.py, test_flax.py, test_netket.py and the bench's mpi4jax path: what a
# JAX user on an MPI cluster meets first.
# The versions, in this one place: flax 0.12.8 needs jax >= 0.10.0 (the mpich configuration's 0.10.2;
# the older jax configurations do not install them), optax 0.2.8 jax >= 0.5.3, orbax-checkpoint 0.12.8,
# netket 3.23.0 (pure Python; it brings numba 0.68 and llvmlite 0.50, equinox, plum-dispatch, sparse,
# igraph: all wheels, about 250 MB, 21 s with pip's cache warm on 2 cores, 2026-11-28).
#   bash scripts/setup_beside.sh VENV
# orbax-checkpoint comes as wheels (about 10 s); mpi4jax builds from source against the venv's MPI
# (the mpich wheel's mpicc, through mpi4py; about 50 s of CPU on 2 cores). CUDA_ROOT points at an
# empty folder, or mpi4jax's build looks for CUDA and builds its GPU part. jax and jaxlib are held
# at the venv's versions, so that neither install moves them. wheel: `pip download` of mpi4jax's
# sdist without build isolation (its own tests: tests/jax_over_mpi/test_peer_suites.py) needs it.
set -euo pipefail
venv=$(cd "$1" && pwd)  # absolute: the builds run in folders of their own
jax=$("$venv/bin/python" -c "import jax; print(jax.__version__)")
jaxlib=$("$venv/bin/python" -c "import jaxlib; print(jaxlib.__version__)")
empty=$(mktemp -d)
trap 'rm -rf "$empty"' EXIT
log=$(mktemp)
if ! PATH="$venv/bin:$PATH" CUDA_ROOT=$empty MPICC="$venv/bin/mpicc" "$venv/bin/python" -m pip \
    --disable-pip-version-check -q install "orbax-checkpoint==0.12.8" "mpi4jax==0.9.1.post2" wheel \
    "flax==0.12.8" "optax==0.2.8" "netket==3.23.0" \
    "jax==$jax" "jaxlib==$jaxlib" > "$log" 2>&1; then
  grep -v '^WARNING: Location' "$log" >&2; rm -f "$log"
  echo "setup_beside.sh: installing orbax-checkpoint, mpi4jax, flax, optax or netket failed (their tests skip them)" >&2
  exit 1
fi
rm -f "$log"

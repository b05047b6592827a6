"""End to end: JAX's CPU collectives over MPI through our wrapper.

Runs tests/programs/collectives.py under `mpiexec -n N`; that program
checks psum/pmax/pmin/all_gather/psum_scatter/ppermute/all_to_all (inside
jax.shard_map) and plain jax.jit over sharded arrays, for several dtypes and
sizes, exactly against NumPy.
"""
import os
import sys

import pytest

from helpers import PROGRAMS, explain, mpirun

# Its answers can differ between jax versions: scripts/test.sh runs it on each jax it tests.
pytestmark = pytest.mark.version_dependent

PROGRAM = os.path.join(PROGRAMS, "collectives.py")

# Messages that mean MPI was used wrongly even if the results came out right. (Not JAX's false
# alarm about Intel MPI's HYDRA_BSTRAP_PROXY_ID: this program calls jax.distributed.initialize()
# with its own arguments, and JAX checks before any of the package's code runs; through
# initialize() it is gone, tests/package/test_initialize.py.)
FORBIDDEN_STDERR = (
    "Attempting to use an MPI routine",
    "Communicator requested from a thread",
)


@pytest.mark.jax
@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_jax_collectives_exact(nranks, jax_env):
    proc = mpirun(nranks, [sys.executable, PROGRAM], env=jax_env, timeout=600)
    assert proc.returncode == 0, explain(proc)
    assert "ALL OK" in proc.stdout, explain(proc)
    for msg in FORBIDDEN_STDERR:
        assert msg not in proc.stderr, f"stderr contains {msg!r}\n" + explain(proc)

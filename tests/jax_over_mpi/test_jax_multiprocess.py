"""JAX's own multi-process tests with two CPU devices per process, over MPI
(through initialize(), and as a plain program that never imports the
package) and over gloo, outcome by outcome (scripts/jax_multiprocess_tests.py).

JAX's tests/multiprocess files are not in the jax wheel, and this repository
does not copy them, so CI runs the runner on our own cases written the same
way (tests/programs/collectives_test.py: JAX's MultiProcessTest, its
loader, a (process, device) mesh); with MPI_COLLECTIVES_JAX_TESTS set to
tests/multiprocess of a JAX checkout at the installed jax's tag, JAX's own
files run too. The outcomes must be the same over MPI as over gloo.
"""
import os
import sys

import pytest

from helpers import PROGRAMS, ROOT, explain, run

from mpi_collectives.integration.jax_compat import LOCAL_DEVICES_JAX, installed_jax, version_tuple  # noqa: E402

RUNNER = os.path.join(ROOT, "scripts", "jax_multiprocess_tests.py")
JAX_TESTS = os.environ.get("MPI_COLLECTIVES_JAX_TESTS")
# Programs over the devices of some processes only, which MPI cannot run (README: Limitations).
SUB_MESH = "no_local_devices_named_sharding_collective|shard_map_no_local_devices"

needs_jax = pytest.mark.skipif(version_tuple(installed_jax()) < LOCAL_DEVICES_JAX,
                               reason="several devices per process need jax 0.6 or newer")


@pytest.mark.jax
@needs_jax
def test_the_runner_on_cases_written_as_jax_writes_them():
    proc = run([sys.executable, RUNNER, PROGRAMS, "collectives_test.py", "--devices", "2",
                "--backends", "mpi,plain", "--timeout", "240"], timeout=900)
    assert proc.returncode == 0, explain(proc)
    assert ("| collectives_test.py | 5 | 5 / 0 / 0 | 5 / 0 / 0 | 5 / 0 / 0 | mpi 0, plain 0 |"
            in proc.stdout), explain(proc)


@pytest.mark.jax
@needs_jax
@pytest.mark.skipif(not JAX_TESTS, reason="MPI_COLLECTIVES_JAX_TESTS is not set (JAX's tests/multiprocess of a "
                    "checkout at the installed jax's tag; the jax wheel has none)")
def test_jax_own_multiprocess_tests_as_over_gloo():
    proc = run([sys.executable, RUNNER, JAX_TESTS, "--devices", "2", "--backends", "mpi,plain", "--exclude",
                SUB_MESH, "--timeout", "600"], timeout=7200)
    assert proc.returncode == 0, explain(proc)

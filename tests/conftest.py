"""Fixtures and collection for the test suite; what the test files share
as code is in helpers.py."""
import os

import pytest

from helpers import free_port, package_with_wrapper, wrapper_built, wrapper_path
from mpi_collectives.tools import launching

# For every launch of the suite, Open MPI's included.
launching.allow_open_mpi_anywhere(os.environ)
# Every multi-rank launch here shares one 2-core VM, where initialize()'s layout note (one line on
# rank 0's stderr: docs/layout.md) would speak in every test; tests/package/test_layout.py turns it
# on where it is what is tested.
os.environ.setdefault("MPI_COLLECTIVES_LAYOUT_NOTE", "0")


@pytest.fixture
def jax_env():
    """Environment for a JAX program whose collectives go through our wrapper."""
    return {
        "MPITRAMPOLINE_LIB": wrapper_path(),
        "JAX_PLATFORMS": "cpu",
        "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "mpi",
        "MPI_COLLECTIVES_TEST_PORT": str(free_port()),
    }


@pytest.fixture(scope="session")
def checked_package(tmp_path_factory):
    """PYTHONPATH for a copy of the installed package whose wrapper is built with UndefinedBehaviorSanitizer
    and the test hooks (native/src/base/test_hooks.h): one build (about a minute on 2 cores) for the
    sanitizer's JAX test (native/test_sanitizers.py) and the given-up calls' suite
    (jax_over_mpi/test_pytest_plugin.py). A UBSan report fails the test that reads it."""
    wrapper = wrapper_built(tmp_path_factory.mktemp("checked_build"), MPI_COLLECTIVES_SANITIZE="undefined",
                            MPI_COLLECTIVES_TEST_HOOKS="1")
    return package_with_wrapper(wrapper, tmp_path_factory.mktemp("checked_site"))


collect_ignore = [
    # What the tests launch, not tests of this process (collectives_test.py
    # is JAX's kind of test, run on every rank by scripts/jax_multiprocess_tests.py).
    "programs",
]
# The suites under jax_over_mpi/mpi_suites/ run inside mpiexec
# (jax_over_mpi/test_mpi_suites.py and cluster/test_cluster.py launch them), not in this process.
if not os.environ.get("MPI_COLLECTIVES_IN_SUITE"):
    collect_ignore.append(os.path.join("jax_over_mpi", "mpi_suites"))

"""Fixtures for the suites that run inside `mpiexec -n N python -m pytest --with-mpi`
(reading the results: values.py).

Every rank runs the same tests in the same order (pytest collects
deterministically), which is what JAX's collectives need: each test's
collectives are matched across ranks by order. Each test compares what the
ranks compute together with what one process computes alone from the same
global inputs.
"""
import json
import os

import numpy as np
import pytest


def pytest_configure(config):
    # The standard-ABI run has no mpi4py (and so no pytest-mpi): the marker still has to exist.
    config.addinivalue_line("markers", "mpi(min_size): run under mpiexec")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """MPI starts through initialize() before pytest-mpi's own pytest_runtest_setup imports mpi4py,
    whose MPI_Init would start it first: the package's start-up (its MPI_Init watchdog, its
    zero-filled MPI_Init under srun, native init_memory.c) is what a user's program runs. Under srun
    on the simulated cluster, mpi4py's MPI_Init had slurmstepd cut MPICH's PMI put in 3 launches of
    11 (docs/troubleshooting.md), initialize()'s in none of 8. Later calls return the first's Info."""
    import mpi_collectives

    mpi_collectives.initialize()


def pytest_sessionfinish(session, exitstatus):
    """One file per rank with its counts: the ranks' stdout interleaves
    under mpiexec, so the launching test reads these instead."""
    folder = os.environ.get("MPI_COLLECTIVES_SUITE_REPORTS")
    if not folder:
        return
    from mpi_collectives.base.launchers import launcher_rank_size
    rank = launcher_rank_size()[0]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    counts = {kind: len(reporter.stats.get(kind, [])) for kind in ("passed", "failed", "error", "skipped")}
    with open(os.path.join(folder, f"rank-{rank}.json"), "w") as f:
        json.dump(dict(counts, exitstatus=int(exitstatus)), f)


@pytest.fixture(scope="session")
def world():
    import mpi_collectives

    info = mpi_collectives.initialize()
    import jax

    jax.config.update("jax_enable_x64", True)  # the training test runs in float64; every test names its dtype
    return info


@pytest.fixture(scope="session")
def mesh(world):
    import jax
    from jax.sharding import Mesh

    return Mesh(np.array(jax.devices()), ("x",))

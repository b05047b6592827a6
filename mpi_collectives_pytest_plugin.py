"""mpi-collectives' pytest plugin: a test suite under mpiexec or srun runs as one job.

Registered under pytest's `pytest11` entry-point group (pyproject.toml), so
pytest loads it in every run; it does nothing unless pytest was started by
a launcher with more than one rank (`mpiexec -n 4 python -m pytest`,
`srun -n 4 python -m pytest`). Then it starts MPI before any conftest or
test module is imported (JAX at the suite's first `import jax`), and runs
mpi_collectives.testing.pytest_plugin: every test has one
outcome on every rank, a collective of one test never meets one of another,
rank 0 prints the report. `-p no:mpi_collectives` turns it off.

A module of its own, outside the package, so that a pytest run without a
launcher pays for a few environment lookups, not for importing
mpi_collectives (which sets MPITRAMPOLINE_LIB for the whole process).
"""
import os

import pytest

# What a launcher of several ranks sets in each rank (mpi_collectives/base/launchers.py has the
# table; tests/package/test_pytest_entry.py checks these are in it): Open MPI's mpirun, a Hydra
# mpiexec (MPICH, Intel MPI) or srun --mpi=pmi2, a PMIx launcher, and srun whatever its --mpi.
# Not SLURM_NTASKS: a batch script has it on the one process that runs pytest directly.
SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS")


def launched_size() -> int:
    for name in SIZE_VARIABLES:
        try:
            size = int(os.environ.get(name) or 0)
        except ValueError:
            continue
        if size:
            return size
    return 1


# Plugins that launch a job of their own for each test and run pytest inside it mark those runs; there
# the job and its report are theirs, and this plugin steps back (issue 80: pytest-isolate-mpi's own
# suite gave 42 passed, 5 failed with the package installed, 45 and 2 without): pytest-isolate-mpi's
# children (its _plugin.py), mpi-pytest's forking mode's (its plugin.py; it passes the variable with
# -genv under MPICH, to the first section of its command elsewhere).
LAUNCHED_BY_ANOTHER_PLUGIN = ("PYTEST_ISOLATE_MPI_IS_FORKED", "_PYTEST_MPI_CHILD_PROCESS")


def launched_by_another_plugin() -> bool:
    return any(os.environ.get(name) for name in LAUNCHED_BY_ANOTHER_PLUGIN)


_ACTIVE = launched_size() > 1 and not launched_by_another_plugin()
_PLUGIN = None
if _ACTIVE:
    # Before pytest captures descriptor 2 (it does in pytest_load_initial_conftests): the package's
    # sentences go to the terminal, not into a capture file that is lost when a job ends.
    from mpi_collectives.base import terminal as _terminal  # noqa: E402  (imports the package: only when launched)

    _terminal.keep()


def pytest_addoption(parser):
    group = parser.getgroup("mpi-collectives", "multi-process JAX tests over MPI (mpi-collectives)")
    group.addoption("--mpi-timeout", type=float, default=0, metavar="SECONDS",
                    help="fail a test (its setup, call or teardown) on every rank when it runs longer than "
                         "SECONDS on any rank, with where each rank was; 0: no limit (default)")
    group.addoption("--mpi-hold", type=float, default=10.0, metavar="SECONDS",
                    help="a rank whose every peer has ended the test, waiting SECONDS in a call into MPI (six "
                         "times as long in other C code), is stuck: the job ends with a line and the report "
                         "(default 10)")
    group.addoption("--mpi-report-all", action="store_true", default=False,
                    help="every rank prints its report (default: rank 0 alone, with every rank's failures)")


def _asked_on_the_command_line(args) -> bool:
    """Did the command line itself (not an ini's addopts, not PYTEST_ADDOPTS) ask for xdist's workers?"""
    return any(a in ("-n", "--numprocesses", "--tx") or a.startswith(("--numprocesses=", "--tx=")) or
               (a.startswith("-n") and not a.startswith("--")) for a in args)


def _refuse_xdist(early_config, args) -> None:
    """pytest-xdist's -n (or --tx) under a launcher: each rank would start worker processes that are not
    ranks of the job, and every worker inherits its rank's launcher variables: MPICH's workers died
    with "PMI_Init failed" (issue 72). Asked on the command line: one sentence on every rank, before MPI
    starts. From a suite's own settings (NetKet's ini holds `addopts = -n auto`): turned off, `-n 0`
    added to the arguments pytest parses next, and rank 0 says so in one line; under a launcher every
    rank is already a process, and the suite's authors meant -n for a run without one."""
    options = early_config.known_args_namespace
    workers = getattr(options, "numprocesses", None)
    if workers in (None, 0, "0") and not getattr(options, "tx", None):
        return
    asked = f"-n {workers}" if workers not in (None, 0, "0") else "--tx"
    if not _asked_on_the_command_line(early_config.invocation_params.args):
        args.extend(["-n", "0"])  # argparse keeps the last value
        options.numprocesses = 0
        from mpi_collectives.base import launchers, log

        if launchers.launcher_rank_size()[0] == 0:
            log.line(f"mpi-collectives: note: the suite's settings ask pytest-xdist for {asked} (addopts); under the "
                     f"launcher every rank is already a process of the job, so it runs as -n 0")
        return
    raise pytest.UsageError(
        f"mpi-collectives: pytest-xdist's {asked} "
        "starts worker processes that are not ranks of this MPI job (they inherit its launcher's variables "
        "and fail). "
        f"Under the launcher every rank is already a process ({launched_size()} of them). Fix: add -n 0 (or "
        "-p no:xdist) under the launcher, or use -n without a launcher")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """MPI starts here, before any conftest.py or test module imports mpi4py.MPI or jax (JAX's part
    follows at the suite's first `import jax`: mpi_collectives.testing.pytest_plugin.start)."""
    if _ACTIVE:
        _refuse_xdist(early_config, args)
        from mpi_collectives.testing import pytest_plugin

        pytest_plugin.start(early_config)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    global _PLUGIN
    if _ACTIVE:
        from mpi_collectives.testing import fixtures, pytest_plugin

        _PLUGIN = pytest_plugin.Plugin(config)
        config.pluginmanager.register(_PLUGIN, "mpi_collectives_ranks")
        config.pluginmanager.register(fixtures, "mpi_collectives_fixtures")
    else:
        config.addinivalue_line("markers", "mpi(min_size=N): a test for N or more MPI ranks")

"""A failure injected on one rank, from outside a suite (issue 80): `-p pytest_inject_failure` (this
folder on PYTHONPATH), INJECT_TEST (the end of a test's node id) and INJECT_RANK (default 1). On that
rank the test's body raises before it runs, after its setup (unittest's setUp included): the other
ranks meet the body's first MPI call alone, the case the pytest plugin must end with one line. Used
on mpi4py's own test suite (tests/jax_over_mpi/test_peer_suites.py), whose files are not ours to edit."""
import os

import pytest


def _failing(*args, **kwargs):
    raise AssertionError(f"a failure injected on rank {os.environ.get('INJECT_RANK', '1')} before the test's body")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    test = os.environ.get("INJECT_TEST")
    if not test or not item.nodeid.endswith(test):
        return
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() != int(os.environ.get("INJECT_RANK", "1")):
        return
    item.obj = _failing  # (a unittest.TestCase's test, mpi4py's, calls item.obj as its method from pytest 8 on)

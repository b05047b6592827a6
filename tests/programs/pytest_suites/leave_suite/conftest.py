"""LEAVE_HOW=internal: an exception in a hook on LEAVE_RANK after test_b's call was voted, which pytest
reports as an INTERNALERROR and ends that rank's loop with (test_leave_suite.py)."""
import os

import pytest


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    if (os.environ.get("LEAVE_HOW") == "internal" and report.when == "call" and
            report.nodeid.endswith("test_b_one_rank_leaves")):
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() == int(os.environ.get("LEAVE_RANK", "1")):
            raise RuntimeError("a hook's own error on this rank")

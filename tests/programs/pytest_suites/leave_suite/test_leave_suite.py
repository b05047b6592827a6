"""Issue 80 (the fourth read's B2): a rank leaves pytest's loop without voting its stage. How it leaves
comes from the environment (LEAVE_HOW, on LEAVE_RANK): `exit` (pytest.exit() in test_b), `sigint`
(KeyboardInterrupt inside test_b, as SIGINT to that rank raises it), `internal` (an exception in a hook
after test_b's call, conftest.py: an INTERNALERROR). The others go on to test_b's vote and wait for that
rank: before, for ever and silent (the leaving rank voted on the next phase's tag). Now the job ends
within seconds, with one line naming the rank, the test and the reason, and rank 0's report of test_a."""
import os

import pytest

HOW = os.environ.get("LEAVE_HOW", "exit")
WHO = int(os.environ.get("LEAVE_RANK", "1"))


def test_a_passes():
    pass


def test_b_one_rank_leaves(mpi_rank):
    if mpi_rank == WHO:
        if HOW == "exit":
            pytest.exit("this rank is done", returncode=3)
        if HOW == "sigint":
            raise KeyboardInterrupt


def test_c_never_reached():
    pass

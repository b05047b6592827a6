"""Clean ends: a program that ends with collectives still in flight (JAX's asynchronous dispatch)
ends 0 on every family. Before the package waited for the live arrays at the end of the main
thread, 5 of 5 such runs on 2 ranks of the mpich wheel ended with exit status 11 (a segfault) or 5
(MPICH's "Fatal error in internal_Comm_split: Invalid communicator") after the program's last line."""
import os
import sys

import pytest

from helpers import ONCE, PROGRAMS, explain, mpirun


@pytest.mark.jax
def test_a_program_that_ends_with_collectives_in_flight_ends_0():
    for _ in range(3):
        proc = mpirun(2, [sys.executable, os.path.join(PROGRAMS, "inflight_exit.py")])
        assert proc.returncode == 0 and proc.stdout.count("leaving with a collective in flight") == 2, explain(proc)
        assert "Segmentation" not in proc.stdout + proc.stderr and "Fatal error" not in proc.stderr, explain(proc)


@pytest.mark.jax
@pytest.mark.skipif(not ONCE, reason="Python's fork and JAX's exit handlers, the same on every family: once (mpich)")
def test_a_child_forked_by_multiprocessing_ends_without_ending_the_job():
    """Issue 81: the child's end ran rank 0's exit handlers; the job ended 30 s later, or at once."""
    proc = mpirun(2, [sys.executable, os.path.join(PROGRAMS, "forked_child.py")], timeout=120)
    assert proc.returncode == 0 and "CHILD ran" in proc.stdout and "CHILD exit 0" in proc.stdout, explain(proc)
    assert sorted(proc.stdout.count(f"SUMS rank {r}: 2.0 4.0") for r in (0, 1)) == [1, 1], explain(proc)

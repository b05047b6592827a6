"""The other side of issue 72's mpi4py hang: a rank that is only slow while its peers wait in the
vote (rank 0 runs a subprocess past the 10 s hold, one line waiting in C) is not stuck;
its test passes on every rank. One process would report: 2 passed."""
import subprocess
import sys

from mpi4py import MPI


def test_a_rank0_runs_a_subprocess_past_the_hold():
    if MPI.COMM_WORLD.Get_rank() == 0:
        subprocess.run([sys.executable, "-c", "import time; time.sleep(11)"], check=True)


def test_b_allreduce_after():
    assert MPI.COMM_WORLD.allreduce(1) == MPI.COMM_WORLD.Get_size()

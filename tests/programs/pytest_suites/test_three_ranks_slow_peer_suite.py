"""Issue 80 (the fourth read's B6): at 3 ranks rank 0 waits in comm.recv from rank 2, which computes for
7 s first (longer than the hold the test gives, --mpi-hold 3); rank 1, not involved, votes at once. A
correct suite: rank 0 is not stuck while a peer that may still send to it has not voted. One process: 2
passed."""
import time

from mpi4py import MPI


def test_a_rank0_waits_for_a_slow_rank2():
    comm = MPI.COMM_WORLD
    if comm.Get_rank() == 0:
        assert comm.recv(source=2, tag=7) == "late"
    elif comm.Get_rank() == 2:
        deadline = time.monotonic() + 7
        while time.monotonic() < deadline:  # computing in Python: line to line
            sum(range(1000))
        comm.send("late", dest=0, tag=7)


def test_b_after():
    assert MPI.COMM_WORLD.allreduce(1) == MPI.COMM_WORLD.Get_size()

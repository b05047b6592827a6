"""Issue 80 (item 8): SIGTERM to the launcher while rank 0 waits in an mpi4py call (a recv from rank 1,
which computes): rank 0's Python handler cannot run until the call returns, and the report of the
tests already run was lost (the native handler ended the rank after its 5 s). Now the plugin's
watcher writes it: the summary and --junitxml of the five tests before."""
import time

import pytest
from mpi4py import MPI


@pytest.mark.parametrize("i", range(5))
def test_passes(i):
    assert MPI.COMM_WORLD.allreduce(i) == i * MPI.COMM_WORLD.Get_size()


def test_rank0_waits_in_recv_until_stopped():
    comm = MPI.COMM_WORLD
    print("waiting until stopped", flush=True)
    if comm.Get_rank() == 0:
        comm.recv(source=1, tag=9)
    else:
        for _ in range(1200):
            time.sleep(0.1)
        comm.send(None, dest=0, tag=9)

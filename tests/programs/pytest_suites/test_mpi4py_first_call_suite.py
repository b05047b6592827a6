"""Issue 80 (the fourth read's B4, B5): rank 1 fails before the suite's very first mpi4py collective,
so rank 0 waits in mpi4py's first lowercase allreduce on the communicator, which holds Python's lock
(it duplicates the communicator): the Python watcher cannot run; the native watchdog ends the job.
With FIRST_CALL_CASE=attribute, test_a passes and test_c's receiver is an attribute (`self.comm.bcast`,
as mpi4py's own suite writes its calls), the Python watcher's to see.
Before, both hung silently. One line naming the test and rank 0's wait, within the hold."""
import os

from mpi4py import MPI


def test_a_rank1_fails_before_the_first_allreduce():
    comm = MPI.COMM_WORLD
    if os.environ.get("FIRST_CALL_CASE", "first") != "first":
        return
    if comm.Get_rank() == 1:
        raise AssertionError("rank 1 fails before its first allreduce")
    comm.allreduce(1)


class TestAttribute:
    comm = MPI.COMM_WORLD

    def test_b_warm(self):  # the communicator's first lowercase call: the next releases Python's lock
        assert self.comm.allreduce(1) == self.comm.Get_size()

    def test_c_rank1_fails_before_bcast(self):
        if self.comm.Get_rank() == 1:
            raise AssertionError("rank 1 fails before its bcast")
        self.comm.bcast(1, root=1)

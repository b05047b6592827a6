"""Issue 72's second finding: a suite of mpi4py collectives whose rank 1 fails before comm.allreduce.
Rank 0 waits in MPI (mpi4py's call, which the package never sees), rank 1 in the plugin's vote:
nothing was printed, for ever, and --mpi-timeout never fired. The job must end by itself with one
line naming the test and where rank 0 waits, after rank 0 printed the report of the tests before."""
from mpi4py import MPI


def test_a_allreduce():
    assert MPI.COMM_WORLD.allreduce(1) == MPI.COMM_WORLD.Get_size()


def test_b_rank1_fails_before_its_allreduce():
    comm = MPI.COMM_WORLD
    if comm.Get_rank() == 1:
        raise AssertionError("rank 1 fails before its allreduce")
    comm.allreduce(1)


def test_c_never_reached():
    pass

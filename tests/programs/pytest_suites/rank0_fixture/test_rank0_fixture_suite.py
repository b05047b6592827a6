"""One process would report 2 passed; plain mpiexec (no plugin): rank 0 2 passed, rank 1 1 passed and 1
skipped. Under the plugin the job was ended as stuck: rank 0 set the fixture up alone."""
import os

import pytest
from mpi4py import MPI

RANK = MPI.COMM_WORLD.Get_rank()


@pytest.mark.skipif(RANK > 0, reason="rank 0 writes the summary")
def test_a_rank0_writes_a_summary(shared_dir):
    path, pids = shared_dir
    with open(os.path.join(path, "summary.txt"), "w") as f:
        f.write(str(pids))


def test_b_every_rank(shared_dir):
    path, pids = shared_dir
    assert len(pids) == MPI.COMM_WORLD.Get_size() and os.path.isdir(path)

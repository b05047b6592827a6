"""Issue 80 (the fourth read's B5, a regression of issue 72): a session fixture that makes an mpi4py
collective, first used by a test for rank 0 alone (`skipif(rank > 0)`)."""
import os
import tempfile

import pytest
from mpi4py import MPI


@pytest.fixture(scope="session")
def shared_dir():
    comm = MPI.COMM_WORLD
    path = tempfile.mkdtemp() if comm.Get_rank() == 0 else None
    return comm.bcast(path, root=0), comm.allgather(os.getpid())

"""The pytest plugin's fixtures (registered with the plugin, under a launcher of several ranks)."""
import pathlib

import pytest


@pytest.fixture(scope="session")
def mpi_rank():
    """This process's rank in the job (MPI's; JAX need not be started)."""
    from .pytest_plugin import rank_size

    return rank_size()[0]


@pytest.fixture(scope="session")
def mpi_size():
    """How many ranks the job has."""
    from .pytest_plugin import rank_size

    return rank_size()[1]


@pytest.fixture(scope="session")
def mpi_mesh():
    """A one-axis mesh ("devices") over every device of the job, in jax.devices() order."""
    import jax
    import numpy as np

    return jax.sharding.Mesh(np.array(jax.devices()), ("devices",))


@pytest.fixture
def mpi_shared_path(tmp_path_factory, mpi_rank):
    """A new directory for the test, the same path on every rank (made by rank 0 and named to the
    others; shared when the ranks share a filesystem, as one node's ranks do)."""
    import numpy as np

    from ..base import mpi

    name = str(tmp_path_factory.mktemp("mpi-shared")) if mpi_rank == 0 else ""
    data = np.zeros(4096, np.uint8)
    encoded = name.encode()
    data[:len(encoded)] = np.frombuffer(encoded, np.uint8)
    return pathlib.Path(bytes(mpi.bcast(data, 0)).rstrip(b"\0").decode())

"""A pytest suite of multi-process JAX code, to copy (docs/testing.md).

    mpiexec -n 2 python -m pytest -q examples/test_multiprocess_suite.py
    srun -n 8 python -m pytest -q --mpi-timeout 300 --junitxml=report.xml examples/test_multiprocess_suite.py

With mpi-collectives installed, pytest under a launcher runs the suite as one job: MPI and JAX
start once, before this module is imported, and a test that fails on one rank fails on every rank,
with that rank's traceback in rank 0's report. Each test computes the global result with NumPy from
the same global inputs on every rank, and compares exactly.
"""
import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

try:
    from jax import shard_map  # jax 0.7 and newer
except ImportError:
    from jax.experimental.shard_map import shard_map


def global_input(mpi_mesh, columns=3):
    """Row i holds i * 10 + column: every rank can compute the whole of it; each device holds its row."""
    rows = mpi_mesh.devices.size
    whole = np.arange(rows * columns, dtype=np.float32).reshape(rows, columns) * 10
    sharding = NamedSharding(mpi_mesh, P("devices"))
    return whole, jax.make_array_from_callback(whole.shape, sharding, lambda index: whole[index])


def replicated(array):
    return np.asarray(array.addressable_data(0))


def test_psum(mpi_mesh):
    whole, x = global_input(mpi_mesh)
    f = jax.jit(shard_map(lambda a: jax.lax.psum(a, "devices"), mesh=mpi_mesh, in_specs=P("devices"),
                          out_specs=P()))
    np.testing.assert_array_equal(replicated(f(x)), whole.sum(0, keepdims=True))


def test_all_gather(mpi_mesh):
    whole, x = global_input(mpi_mesh)
    # Every device gathers every row: its block of the result is the whole input.
    f = jax.jit(shard_map(lambda a: jax.lax.all_gather(a, "devices", tiled=True), mesh=mpi_mesh,
                          in_specs=P("devices"), out_specs=P("devices")))
    for block in f(x).addressable_shards:
        np.testing.assert_array_equal(np.asarray(block.data), whole)


def test_ppermute_shifts_each_row_to_the_next_device(mpi_mesh):
    whole, x = global_input(mpi_mesh)
    n = mpi_mesh.devices.size
    f = jax.jit(shard_map(lambda a: jax.lax.ppermute(a, "devices", [(i, (i + 1) % n) for i in range(n)]),
                          mesh=mpi_mesh, in_specs=P("devices"), out_specs=P("devices")))
    gathered = jax.jit(lambda a: a, out_shardings=NamedSharding(mpi_mesh, P()))(f(x))
    np.testing.assert_array_equal(replicated(gathered), np.roll(whole, 1, axis=0))


def test_jit_over_the_global_mesh(mpi_mesh):
    whole, x = global_input(mpi_mesh)
    total = jax.jit(lambda a: (a * a).sum(), out_shardings=NamedSharding(mpi_mesh, P()))(x)
    assert float(replicated(total)) == float((whole * whole).sum())


@pytest.mark.mpi(min_size=2)
def test_every_rank_sees_the_same_files(mpi_rank, mpi_size, mpi_shared_path):
    (mpi_shared_path / f"rank-{mpi_rank}.txt").write_text(str(mpi_rank))
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices("files written")
    assert sorted(p.name for p in mpi_shared_path.iterdir()) == [f"rank-{r}.txt" for r in range(mpi_size)]

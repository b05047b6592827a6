"""jax.experimental.multihost_utils over MPI (these run JAX collectives,
so they go through the wrapper too), each against the value one process
computes from every rank's known input."""
import numpy as np
import pytest


def rank_tree(rank):
    return {"a": np.arange(5, dtype=np.float32) + rank, "b": (np.int32(rank * 10), np.ones((2, 3), np.int64) * rank)}


@pytest.mark.mpi(min_size=2)
def test_broadcast_one_to_all(world):
    from jax.experimental import multihost_utils

    got = multihost_utils.broadcast_one_to_all(rank_tree(world.rank))
    want = rank_tree(0)
    np.testing.assert_array_equal(np.asarray(got["a"]), want["a"])
    assert int(got["b"][0]) == 0
    np.testing.assert_array_equal(np.asarray(got["b"][1]), want["b"][1])


@pytest.mark.mpi(min_size=2)
def test_process_allgather(world):
    from jax.experimental import multihost_utils

    got = multihost_utils.process_allgather(rank_tree(world.rank))
    ranks = range(world.size)
    np.testing.assert_array_equal(np.asarray(got["a"]), np.stack([rank_tree(r)["a"] for r in ranks]))
    np.testing.assert_array_equal(np.asarray(got["b"][0]), np.array([r * 10 for r in ranks]))
    tiled = multihost_utils.process_allgather(np.arange(3) + 3 * world.rank, tiled=True)
    np.testing.assert_array_equal(np.asarray(tiled), np.arange(3 * world.size))


@pytest.mark.mpi(min_size=2)
def test_sync_global_devices_and_assert_equal(world):
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices("mpi-collectives suite")
    multihost_utils.assert_equal(np.arange(4), "same everywhere")
    with pytest.raises(AssertionError, match="differs on purpose"):
        multihost_utils.assert_equal(np.arange(4) + (world.rank == 1), "differs on purpose")


@pytest.mark.mpi(min_size=2)
def test_host_local_and_global_arrays_round_trip(world, mesh):
    from jax.experimental import multihost_utils
    from jax.sharding import PartitionSpec as P

    local = np.arange(12, dtype=np.float32).reshape(2, 6) + 100 * world.rank
    global_array = multihost_utils.host_local_array_to_global_array(local, mesh, P("x"))
    assert global_array.shape == (2 * world.size, 6)
    # The global value, seen through a collective: a sum over rows gathers every rank's block.
    import jax

    column_sums = jax.jit(lambda a: a.sum(0), out_shardings=jax.sharding.NamedSharding(mesh, P()))(global_array)
    expected = sum(np.arange(12, dtype=np.float32).reshape(2, 6) + 100 * r for r in range(world.size)).sum(0)
    np.testing.assert_array_equal(np.asarray(column_sums.addressable_data(0)), expected)
    back = multihost_utils.global_array_to_host_local_array(global_array, mesh, P("x"))
    np.testing.assert_array_equal(np.asarray(back), local)

"""`jit` with NamedSharding on a 2-D (data x model) mesh: a two-layer
network whose hidden layer is split by the model axis, so XLA inserts the
all-reduce, reduce-scatter and all-gather itself. Small integers in float32:
every sum is exact, so the result must equal NumPy's bit for bit."""
import numpy as np
import pytest

from values import on_one_device, replicated_value

B, D, H = 24, 12, 24  # divisible by every mesh side at 2, 3 and 4 ranks


def inputs():
    rng = np.random.default_rng(7)
    x = rng.integers(-3, 4, (B, D)).astype(np.float32)
    w1 = rng.integers(-3, 4, (D, H)).astype(np.float32)
    w2 = rng.integers(-3, 4, (H, D)).astype(np.float32)
    return x, w1, w2


def network(x, w1, w2):
    import jax.numpy as jnp

    y = jnp.maximum(x @ w1, 0) @ w2
    return y, jnp.sum(y * y, axis=0)


def global_from_full(sharding, full):
    """The global array with value `full`, each process giving its own block."""
    import jax

    index = sharding.addressable_devices_indices_map(full.shape)
    (block,) = index.values()
    return jax.make_array_from_process_local_data(sharding, full[block], full.shape)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("shape", [(1, 0), (0, 1), (2, 2)], ids=["1xN", "Nx1", "2x2"])
def test_two_layer_network_on_2d_mesh(world, shape):
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    dims = {(1, 0): (1, world.size), (0, 1): (world.size, 1), (2, 2): (2, 2)}[shape]
    if dims[0] * dims[1] != world.size:
        pytest.skip("a 2x2 mesh needs 4 ranks")
    mesh = Mesh(np.array(jax.devices()).reshape(dims), ("data", "model"))
    x, w1, w2 = inputs()
    s = lambda *spec: NamedSharding(mesh, P(*spec))
    gx, gw1, gw2 = (global_from_full(s("data", None), x), global_from_full(s(None, "model"), w1),
                    global_from_full(s("model", None), w2))
    f = jax.jit(network, out_shardings=(s("data", "model"), s()))
    compiled = f.lower(gx, gw1, gw2).compile().as_text()
    if dims[1] > 1:  # the model axis splits the contraction: partial sums must be combined
        assert "reduce-scatter" in compiled or "all-reduce" in compiled, compiled[:2000]
    y, col = f(gx, gw1, gw2)

    ref_y, ref_col = (np.asarray(a) for a in jax.jit(network)(*on_one_device(x, w1, w2)))
    np.testing.assert_array_equal(ref_y, np.maximum(x @ w1, 0) @ w2)  # the reference itself is exact
    np.testing.assert_array_equal(replicated_value(col), ref_col)
    for shard in y.addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), ref_y[shard.index])

    # Gathering the output onto every process: an all-gather XLA inserts.
    gather = jax.jit(lambda a: a, out_shardings=s())
    np.testing.assert_array_equal(replicated_value(gather(y)), ref_y)

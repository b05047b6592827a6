"""Large buffers (256 MiB per rank) and odd sizes (1 element, primes),
exact against NumPy."""
import numpy as np
import pytest

from values import local_value

LARGE = 64 * 1024 * 1024  # float32 elements: 256 MiB per rank
ODD = [1, 3, 7, 127, 8191, 131071]  # 1 and primes, up to 2^17 - 1


def one_d(mesh, fn, out_spec="x"):
    import jax
    from jax.sharding import PartitionSpec as P

    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=P("x"), out_specs=P(out_spec) if out_spec else P()))


def rank_block(world, mesh, values):
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    return jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), values[None])


def pattern(n, rank, dtype=np.float32):
    return (np.arange(n, dtype=np.int64) % 1021 + 3 * rank).astype(dtype)  # small integers: sums are exact


@pytest.mark.mpi(min_size=2)
def test_psum_and_ppermute_of_256_mib_per_rank(world, mesh):
    import jax

    n, r = world.size, world.rank
    x = rank_block(world, mesh, pattern(LARGE, r))
    total = local_value(one_d(mesh, lambda v: jax.lax.psum(v, "x"), out_spec=None)(x))[0]
    np.testing.assert_array_equal(total, pattern(LARGE, 0) * n + 3 * sum(range(n)))
    del total
    moved = local_value(one_d(mesh, lambda v: jax.lax.ppermute(v, "x", [(i, (i + 1) % n) for i in range(n)]))(x))[0]
    np.testing.assert_array_equal(moved, pattern(LARGE, (r - 1) % n))


@pytest.mark.mpi(min_size=2)
def test_all_gather_and_psum_scatter_of_64_mib_per_rank(world, mesh):
    import jax

    n, r = world.size, world.rank
    m = LARGE // 4 // n * n
    x = rank_block(world, mesh, pattern(m, r))
    gathered = local_value(one_d(mesh, lambda v: jax.lax.all_gather(v[0], "x")[None])(x))[0]
    for q in range(n):
        np.testing.assert_array_equal(gathered[q], pattern(m, q))
    del gathered
    scattered = local_value(one_d(mesh, lambda v: jax.lax.psum_scatter(v[0], "x", tiled=True)[None])(x))[0]
    chunk = slice(r * (m // n), (r + 1) * (m // n))
    np.testing.assert_array_equal(scattered, (pattern(m, 0) * n + 3 * sum(range(n)))[chunk])


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("size", ODD)
def test_odd_sizes(world, mesh, size):
    import jax

    n, r = world.size, world.rank
    x = rank_block(world, mesh, pattern(size, r))
    total = local_value(one_d(mesh, lambda v: jax.lax.psum(v, "x"), out_spec=None)(x))[0]
    np.testing.assert_array_equal(total, pattern(size, 0) * n + 3 * sum(range(n)))
    gathered = local_value(one_d(mesh, lambda v: jax.lax.all_gather(v[0], "x")[None])(x))[0]
    np.testing.assert_array_equal(gathered, np.stack([pattern(size, q) for q in range(n)]))
    moved = local_value(one_d(mesh, lambda v: jax.lax.ppermute(v, "x", [(i, (i + 1) % n) for i in range(n)]))(x))[0]
    np.testing.assert_array_equal(moved, pattern(size, (r - 1) % n))
    # Scatter and all-to-all need a multiple of the rank count: a prime number of elements per rank's part.
    y = rank_block(world, mesh, pattern(size * n, r))
    scattered = local_value(one_d(mesh, lambda v: jax.lax.psum_scatter(v[0], "x", tiled=True)[None])(y))[0]
    np.testing.assert_array_equal(scattered, (pattern(size * n, 0) * n + 3 * sum(range(n)))[r * size:(r + 1) * size])
    swapped = local_value(one_d(mesh, lambda v: jax.lax.all_to_all(v[0].reshape(n, size), "x", 0, 0, tiled=True)
                                .reshape(1, -1))(y))[0]
    np.testing.assert_array_equal(swapped, np.concatenate([pattern(size * n, q)[r * size:(r + 1) * size]
                                                           for q in range(n)]))

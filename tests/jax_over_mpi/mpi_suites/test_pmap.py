"""Multi-process `jax.pmap`: each process passes its local shard (one CPU
device, so a leading axis of 1) and the collectives span every process's
device, as in JAX's multi-host pmap. Integer-valued inputs: exact."""
from functools import partial

import numpy as np
import pytest


def local_input(world, n=6):
    # Global input: row r belongs to rank r.
    full = np.arange(world.size * n, dtype=np.float32).reshape(world.size, n) + 1
    return full, full[world.rank:world.rank + 1]


@pytest.mark.mpi(min_size=2)
def test_pmap_psum_pmax_mean(world):
    import jax

    full, mine = local_input(world)

    @partial(jax.pmap, axis_name="i")
    def f(x):
        return jax.lax.psum(x, "i"), jax.lax.pmax(x, "i"), jax.lax.pmean(x, "i")

    s, m, mean = f(mine)
    np.testing.assert_array_equal(np.asarray(s)[0], full.sum(0))
    np.testing.assert_array_equal(np.asarray(m)[0], full.max(0))
    np.testing.assert_allclose(np.asarray(mean)[0], full.mean(0), rtol=1e-6)


@pytest.mark.mpi(min_size=2)
def test_pmap_all_gather_ppermute_axis_index(world):
    import jax

    full, mine = local_input(world)
    n = world.size
    shift = [(i, (i + 1) % n) for i in range(n)]

    @partial(jax.pmap, axis_name="i")
    def f(x):
        return (jax.lax.all_gather(x, "i"), jax.lax.ppermute(x, "i", shift),
                jax.lax.axis_index("i"), jax.lax.psum(1, "i"))

    gathered, permuted, index, count = f(mine)
    np.testing.assert_array_equal(np.asarray(gathered)[0], full)
    np.testing.assert_array_equal(np.asarray(permuted)[0], full[(world.rank - 1) % n])
    assert int(np.asarray(index)[0]) == world.rank
    assert int(np.asarray(count)[0]) == n


@pytest.mark.mpi(min_size=2)
def test_pmap_all_to_all_and_psum_scatter(world):
    import jax

    n = world.size
    # Rank r holds a (n, 3) block: row j is what it sends to rank j.
    full = np.arange(n * n * 3, dtype=np.int32).reshape(n, n, 3)
    mine = full[world.rank:world.rank + 1]

    @partial(jax.pmap, axis_name="i")
    def f(x):
        return (jax.lax.all_to_all(x, "i", split_axis=0, concat_axis=0),
                jax.lax.psum_scatter(x, "i", scatter_dimension=0, tiled=True))

    exchanged, scattered = f(mine)
    np.testing.assert_array_equal(np.asarray(exchanged)[0], full[:, world.rank])
    np.testing.assert_array_equal(np.asarray(scattered)[0], full.sum(0)[world.rank:world.rank + 1])


@pytest.mark.mpi(min_size=2)
def test_pmap_axis_index_groups(world):
    """psum within groups of ranks: the even-sized pairs {0,1},{2,3} at 4 ranks,
    singletons at 2 and 3 ranks (XLA wants groups of one size)."""
    import jax

    n = world.size
    groups = [[0, 1], [2, 3]] if n == 4 else [[r] for r in range(n)]
    full, mine = local_input(world)

    @partial(jax.pmap, axis_name="i")
    def f(x):
        return jax.lax.psum(x, "i", axis_index_groups=groups)

    got = np.asarray(f(mine))[0]
    group = next(g for g in groups if world.rank in g)
    np.testing.assert_array_equal(got, full[group].sum(0))

"""`shard_map` with every collective JAX has, alone, composed in one
program, and inside `lax.scan` and `lax.while_loop`. Integer-valued inputs,
so every result is exact and compared with NumPy's."""
import numpy as np
import pytest

from values import local_value

N = 12  # elements per rank: divisible by 2, 3 and 4 ranks


def shard_fn(mesh, fn, out_specs=None):
    import jax
    from jax.sharding import PartitionSpec as P

    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=P("x"), out_specs=P("x") if out_specs is None else out_specs))


def global_input(world, mesh, dtype=np.float32, n=N):
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    full = (np.arange(world.size * n) % 97 - 40).astype(dtype).reshape(world.size, n)
    return full, jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), full[world.rank:world.rank + 1])


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64, np.int64])
def test_every_collective(world, mesh, dtype):
    import jax

    full, x = global_input(world, mesh, dtype)
    n, r = world.size, world.rank
    shift = [(i, (i + 2) % n) for i in range(n)]
    cases = {
        "psum": (lambda v: jax.lax.psum(v, "x"), full.sum(0, keepdims=True)),
        "pmax": (lambda v: jax.lax.pmax(v, "x"), full.max(0, keepdims=True)),
        "pmin": (lambda v: jax.lax.pmin(v, "x"), full.min(0, keepdims=True)),
        "all_gather": (lambda v: jax.lax.all_gather(v, "x", tiled=True)[None], full[None]),
        "all_gather_axis1": (lambda v: jax.lax.all_gather(v[0], "x", axis=0)[None], full[None]),
        "psum_scatter": (lambda v: jax.lax.psum_scatter(v.reshape(n, -1), "x", scatter_dimension=0, tiled=True),
                         full.reshape(n, n, -1).sum(0)[r:r + 1]),
        "ppermute": (lambda v: jax.lax.ppermute(v, "x", shift), full[(r - 2) % n][None]),
        "all_to_all": (lambda v: jax.lax.all_to_all(v.reshape(n, -1), "x", 0, 0, tiled=True).reshape(1, -1),
                       full.reshape(n, n, -1)[:, r].reshape(1, -1)),
        "axis_index": (lambda v: v * 0 + jax.lax.axis_index("x").astype(v.dtype), np.full((1, N), r, dtype)),
    }
    for name, (fn, expected) in cases.items():
        got = local_value(shard_fn(mesh, fn)(x))
        np.testing.assert_array_equal(got, expected, err_msg=name)
        assert got.dtype == dtype, name


@pytest.mark.mpi(min_size=2)
def test_collectives_composed_in_one_program(world, mesh):
    import jax

    full, x = global_input(world, mesh, np.float32)
    n, r = world.size, world.rank

    def program(v):
        total = jax.lax.psum(v, "x")
        gathered = jax.lax.all_gather(v[0], "x")
        left = jax.lax.ppermute(v, "x", [(i, (i + 1) % n) for i in range(n)])
        return total + left * 2 + jax.lax.pmax(gathered.sum(0), "x")[None]

    got = local_value(shard_fn(mesh, program)(x))
    expected = full.sum(0) + full[(r - 1) % n] * 2 + full.sum(0)
    np.testing.assert_array_equal(got[0], expected)


@pytest.mark.mpi(min_size=2)
def test_collectives_inside_scan(world, mesh):
    import jax

    full, x = global_input(world, mesh, np.float32)
    n, r, steps = world.size, world.rank, 12

    def program(v):
        def body(carry, _):
            carry = jax.lax.psum(carry, "x") / n + 1  # the mean over ranks, plus one
            carry = jax.lax.ppermute(carry, "x", [(i, (i + 1) % n) for i in range(n)])
            return carry, jax.lax.pmax(carry, "x")

        final, maxima = jax.lax.scan(body, v, None, length=steps)
        return final, maxima.reshape(1, steps, -1)

    from jax.sharding import PartitionSpec as P

    final, maxima = shard_fn(mesh, program, out_specs=(P("x"), P("x")))(x)
    # After the first step every rank holds the same values; in NumPy:
    carry, expected_max = full.astype(np.float32), []
    for _ in range(steps):
        carry = np.repeat(carry.sum(0, keepdims=True) / n + 1, n, axis=0)
        carry = np.roll(carry, 1, axis=0)
        expected_max.append(carry.max(0))
    np.testing.assert_allclose(local_value(final)[0], carry[r], rtol=1e-6)
    np.testing.assert_allclose(local_value(maxima)[0], np.stack(expected_max), rtol=1e-6)


@pytest.mark.mpi(min_size=2)
def test_collectives_inside_while_loop(world, mesh):
    """The trip count depends on a psum: every rank must agree to stop in the same iteration."""
    import jax
    import jax.numpy as jnp

    full, x = global_input(world, mesh, np.int32)
    n, r = world.size, world.rank

    def program(v):
        def cond(state):
            i, total = state
            return jax.lax.psum(total[0, 0], "x") < 1000

        def body(state):
            i, total = state
            step = jnp.abs(jax.lax.all_gather(v[0, :1], "x").sum()) + jax.lax.axis_index("x") + 1
            return i + 1, total + step.astype(total.dtype)

        i, total = jax.lax.while_loop(cond, body, (jnp.int32(0), v * 0))
        return jnp.full(v.shape, i), total

    from jax.sharding import PartitionSpec as P

    iters, total = shard_fn(mesh, program, out_specs=(P("x"), P("x")))(x)
    increment = abs(full[:, 0].sum()) + np.arange(n) + 1  # per rank
    expected_iters = 0
    while (expected_iters * increment).sum() < 1000:
        expected_iters += 1
    assert int(local_value(iters)[0, 0]) == expected_iters
    np.testing.assert_array_equal(local_value(total)[0], np.full(N, expected_iters * increment[r]))

"""Issue 72's first finding (NetKet's distributed tests ended at test 20-22 of 48 with "the ranks are in
different phases"): a test dispatches many jitted psums and returns without waiting for them, then a
test skips, then a test runs one more psum. JAX dispatches asynchronously, so XLA may run the first
test's collectives after the test returned, on one rank while the other is already in the next test.
They are still that test's collectives. One process would report: 2 passed, 1 skipped."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from common import shard_map


def mesh():
    return jax.sharding.Mesh(np.array(jax.devices()), ("i",))


def psum_fn():
    return jax.jit(shard_map(lambda a: jax.lax.psum(a, "i"), mesh(), P("i"), P("i")))


def array(value):
    local = np.full((jax.local_device_count() * 65536,), value, np.float32)
    return jax.make_array_from_process_local_data(NamedSharding(mesh(), P("i")), local)


def test_a_dispatches_and_returns_without_waiting():
    f, x = psum_fn(), array(1.0)
    for _ in range(300):
        x = f(x) / jax.device_count()  # dispatched; nothing waits for it here
    assert x is not None


def test_b_skipped():
    pytest.skip("a skipped test between")


def test_c_one_more_psum():
    y = psum_fn()(array(2.0))
    assert float(np.asarray(y.addressable_data(0))[0]) == 2.0 * jax.device_count()
    assert float(jnp.sum(y)) > 0

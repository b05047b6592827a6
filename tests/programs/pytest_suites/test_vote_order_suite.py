"""Issue 71's finding 8: 4 ranks, a 2x2 mesh, psums over one axis (communicators {0, 1} and {2, 3}).
Rank 1 fails test_b before its psum, a second after ranks 2 and 3 finished theirs, so their votes
reach rank 0 before its own group's: rank 0 must still find rank 1's vote behind them and give its
wait up (a wait that looked at the oldest vote alone hung here for ever). One process would report:
test_a passed, test_b failed, test_c passed."""
import time

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from common import shard_map


def grid():
    return jax.sharding.Mesh(np.array(jax.devices()).reshape(2, -1), ("x", "y"))


def psum_over(axes, value):
    mesh = grid()
    f = jax.jit(shard_map(lambda a: jax.lax.psum(a, axes), mesh, P("x", "y"), P("x", "y")))
    local = np.full((1, jax.local_device_count() * 4), value, np.float32)
    arr = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x", "y")), local)
    return float(np.asarray(f(arr).addressable_data(0))[0, 0])


def test_a_psum_over_rows():
    assert psum_over("y", 1.0) == 1.0 * mesh_width()


def mesh_width():
    return jax.device_count() // 2


def test_b_rank1_fails_after_the_other_row_voted():
    if jax.process_index() == 1:
        time.sleep(1.0)
        raise AssertionError("rank 1 fails before its psum, after the other row's ranks finished the test")
    assert psum_over("y", 2.0) == 2.0 * mesh_width()


def test_c_psum_over_both():
    assert psum_over(("x", "y"), 3.0) == 3.0 * jax.device_count()

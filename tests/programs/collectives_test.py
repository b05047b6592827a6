"""Collectives as JAX's own tests/multiprocess files write them (a
MultiProcessTest per case, run by scripts/jax_multiprocess_tests.py on every
rank, over MPI and over gloo), so that the runner is tested where JAX's own
files are not available (the jax wheel does not carry them). Our own cases:
over a (process, device) mesh, so with several devices per process they mix
local and remote devices."""
import jax
from jax._src import test_multiprocess as jt_multiprocess
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import numpy as np


def shard_map():
    return jax.shard_map  # jax 0.6 and newer, which the runner's tests need


def grid():
    devices = np.array(sorted(jax.devices(), key=lambda d: (d.process_index, d.id)))
    return Mesh(devices.reshape(jax.process_count(), jax.local_device_count()), ("p", "d"))


def global_input(mesh, width=6):
    full = np.arange(mesh.devices.size * width, dtype=np.float32).reshape(mesh.devices.shape + (width,)) % 11
    sharding = NamedSharding(mesh, P("p", "d"))
    return full, jax.make_array_from_callback(full.shape, sharding, lambda index: full[index])


class CollectivesTest(jt_multiprocess.MultiProcessTest):

    def check(self, body, expected):
        mesh = grid()
        full, x = global_input(mesh)
        out = jax.jit(shard_map()(body, mesh=mesh, in_specs=P("p", "d"), out_specs=P("p", "d")))(x)
        want = expected(full)
        for shard in out.addressable_shards:
            np.testing.assert_array_equal(np.asarray(shard.data), want[shard.index])

    def test_psum_over_both_axes(self):
        self.check(lambda v: jax.lax.psum(v, ("p", "d")),
                   lambda f: np.broadcast_to(f.sum((0, 1), keepdims=True), f.shape))

    def test_psum_over_processes(self):
        self.check(lambda v: jax.lax.psum(v, "p"), lambda f: np.broadcast_to(f.sum(0, keepdims=True), f.shape))

    def test_pmax_over_local_devices(self):
        self.check(lambda v: jax.lax.pmax(v, "d"), lambda f: np.broadcast_to(f.max(1, keepdims=True), f.shape))

    def test_ppermute_over_processes(self):
        n = jax.process_count()
        self.check(lambda v: jax.lax.ppermute(v, "p", [(i, (i + 1) % n) for i in range(n)]),
                   lambda f: np.roll(f, 1, axis=0))

    def test_jit_sum_of_a_sharded_array(self):
        mesh = grid()
        full, x = global_input(mesh)
        out = jax.jit(lambda a: a.sum(axis=(0, 1)), out_shardings=NamedSharding(mesh, P()))(x)
        np.testing.assert_array_equal(np.asarray(out.addressable_data(0)), full.sum((0, 1)))


if __name__ == "__main__":
    jt_multiprocess.main()

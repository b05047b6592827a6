"""Meshes over the same ranks in different device orders, each its own communicator of XLA's
(tests/jax_over_mpi/test_node_path.py), through mpi_collectives.initialize():

    node_path_meshes.py orders COUNT   the first COUNT orders of the devices (itertools.permutations),
                                       a psum of 2 MiB a rank on each mesh, checked against NumPy

Prints "EXACT rank R meshes M" when every psum was exact ("WRONG ..." else), then "DONE rank R", and
ends normally: with jax 0.4.x, XLA frees its communicators at exit in a hash order of its own on
each rank, which is where a free that waits for the other ranks hangs."""
import itertools
import sys

import numpy as np

import mpi_collectives

info = mpi_collectives.initialize()
import jax  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from launcher_env import jax_compat  # noqa: E402

count = int(sys.argv[2])
N = 512 * 1024  # float32: 2 MiB a rank, the node path's
devices = jax.devices()
n = len(devices)
wrong = []
orders = list(itertools.islice(itertools.permutations(devices), count))
for k, order in enumerate(orders):
    mesh = Mesh(np.array(order), ("x",))
    f = jax.jit(jax_compat.shard_map()(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
    full = np.stack([(np.arange(N) % 13 + d.id % 7 + k).astype(np.float32) for d in order])
    x = jax.make_array_from_callback(full.shape, NamedSharding(mesh, P("x")), lambda index: full[index])
    got = np.asarray(f(x).addressable_data(0))[0]
    if not np.array_equal(got, full.sum(0)):
        wrong.append(k)
rank = info.rank
print(f"WRONG rank {rank} meshes {wrong}" if wrong else f"EXACT rank {rank} meshes {len(orders)}", flush=True)
print(f"DONE rank {rank}", flush=True)

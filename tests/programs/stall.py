"""A rank that stalls: rank 1 stays alive but spends SECONDS in Python
(time.sleep, in a function named away_from_the_collective, which its stacks
must show) before a psum that the other ranks are already waiting in.

    stall.py SECONDS [ELEMENTS [OP]]

ELEMENTS (default 4) per rank: 1048576 (4 MiB) puts the psum on the node path
(native/src/services/node/) where the ranks share a node. OP: psum (the
default) or all_to_all (one MPI_Sendrecv with each peer, on the node path
too at that size).

Every rank then checks the result exactly and prints "PASS stall rank R"; the
test reads the stall report and the stacks from stderr."""
import os
import sys
import time

import numpy as np

import mpi_collectives

seconds = float(sys.argv[1])
info = mpi_collectives.initialize()
import jax  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from jax.experimental import multihost_utils  # noqa: E402
from launcher_env import jax_compat  # noqa: E402

rank, size = info.rank, info.size
mesh = Mesh(np.array(jax.devices()), ("x",))
n = len(jax.devices())
elements = int(sys.argv[2]) if len(sys.argv) > 2 else 4
op = sys.argv[3] if len(sys.argv) > 3 else "psum"
full = (np.arange(n * elements) % 251).astype(np.float32).reshape(n, elements)
x = jax.make_array_from_callback(full.shape, NamedSharding(mesh, P("x")), lambda index: full[index])
if op == "psum":
    psum = jax.jit(jax_compat.shard_map()(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
    want = full.sum(0, keepdims=True)
else:  # all_to_all: rank r gets part r of every rank's row
    psum = jax.jit(jax_compat.shard_map()(lambda v: jax.lax.all_to_all(v, "x", 1, 1, tiled=True), mesh=mesh,
                                          in_specs=P("x"), out_specs=P("x")))
    want = full.reshape(n, n, -1).transpose(1, 0, 2).reshape(n, elements)[rank:rank + 1]
assert np.array_equal(np.asarray(psum(x).addressable_data(0)), want)  # the communicator exists: a warm-up


def away_from_the_collective():
    time.sleep(seconds)


# STALL_BUSY=S: every rank first runs psums for S seconds, so that the report's "outside MPI for N s"
# must count from rank 1's last collective, not from the first second it was seen outside MPI.
busy = float(os.environ.get("STALL_BUSY", "0"))
busy_until = time.monotonic() + busy
while busy > 0:
    for _ in range(20):  # a collective every 50 ms, the time between them outside MPI (as a training step's)
        psum(x).block_until_ready()
        time.sleep(0.05)
    # rank 0 says when every rank stops: they run the same number of rounds
    if not int(multihost_utils.broadcast_one_to_all(np.int32(time.monotonic() < busy_until))):
        break


if rank == 1:
    away_from_the_collective()
got = np.asarray(psum(x).addressable_data(0))
assert np.array_equal(got, want), (got, want)
print(f"PASS stall rank {rank}", flush=True)

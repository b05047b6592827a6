"""mpi4py and JAX's MPI collectives in one process, mpi4py imported ORDER (before|after) JAX's first collective."""
import os
import sys

import numpy as np

order = sys.argv[1]
if order == "before":
    from mpi4py import MPI  # initializes MPI itself (MPI_THREAD_MULTIPLE)

import jax  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

rank = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", 0)))
size = int(os.environ.get("PMI_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", 1)))
jax.distributed.initialize(f"127.0.0.1:{os.environ['MPI_COLLECTIVES_TEST_PORT']}", size, rank)
mesh = Mesh(np.array(jax.devices()), ("x",))
f = jax.jit(jax.shard_map(lambda x: jax.lax.psum(x, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), np.full((1, 4096), rank + 1, np.float32))
got = np.asarray(f(x).addressable_data(0))
assert (got == size * (size + 1) / 2).all(), got

if order == "after":
    from mpi4py import MPI  # MPI is already initialized, by the wrapper

total = MPI.COMM_WORLD.allreduce(rank + 1)
assert total == size * (size + 1) // 2, total
assert MPI.COMM_WORLD.Get_size() == size
print(f"PASS mpi4py {order} rank {rank}", flush=True)

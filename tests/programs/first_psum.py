"""The smallest JAX program whose collective goes over MPI: one psum."""
import os

import numpy as np
import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

rank = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", 0)))
size = int(os.environ.get("PMI_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", 1)))
jax.distributed.initialize(f"127.0.0.1:{os.environ['MPI_COLLECTIVES_TEST_PORT']}", size, rank)
mesh = Mesh(np.array(jax.devices()), ("x",))
f = jax.jit(jax.shard_map(lambda x: jax.lax.psum(x, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), np.full((1, 8), rank + 1, np.float32))
got = np.asarray(f(x).addressable_data(0))
assert (got == size * (size + 1) / 2).all(), got
print(f"PASS psum rank {rank}", flush=True)

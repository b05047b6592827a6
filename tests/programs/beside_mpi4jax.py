"""JAX's own collectives over this package and mpi4jax's in one program, on
the same MPI (docs/mpi4jax.md): initialize() first (it starts MPI with
MPI_THREAD_MULTIPLE), then mpi4jax (through mpi4py, which finds MPI started).
Inside one jit: mpi4jax's allreduce and allgather, and JAX's psum and
all_gather over a global mesh, every result checked exactly against NumPy.
Prints "EXACT rank R of N" on success, "WRONG ..." otherwise.
"""
import sys

import mpi_collectives

info = mpi_collectives.initialize()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mpi4jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from mpi4py import MPI  # noqa: E402

from mpi_collectives.integration.jax_compat import shard_map  # noqa: E402

rank, size = info.rank, info.size
assert MPI.COMM_WORLD.Get_rank() == rank and MPI.COMM_WORLD.Get_size() == size
assert MPI.Query_thread() == MPI.THREAD_MULTIPLE, MPI.Query_thread()

n = 1000
local = (np.arange(n, dtype=np.float32) % 13) * (rank + 1)
every = np.stack([(np.arange(n, dtype=np.float32) % 13) * (r + 1) for r in range(size)])

# mpi4jax inside jit, on this process's array
got_sum = np.asarray(jax.jit(lambda v: mpi4jax.allreduce(v, op=MPI.SUM))(jnp.asarray(local)))
got_gather = np.asarray(jax.jit(lambda v: mpi4jax.allgather(v))(jnp.asarray(local)))

# JAX's own collectives over this package, on a global array over every process
mesh = Mesh(np.array(jax.devices()), ("x",))
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), local[None])
psum = jax.jit(shard_map()(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
gather = jax.jit(shard_map()(lambda v: jax.lax.all_gather(v[0], "x", tiled=True)[None], mesh=mesh,
                             in_specs=P("x"), out_specs=P("x")))
jax_sum = np.asarray(psum(x).addressable_data(0))[0]
jax_gather = np.asarray(gather(x).addressable_data(0))[0].reshape(size, n)

# and mpi4jax again after JAX's collectives, both ways interleaved
again = np.asarray(jax.jit(lambda v: mpi4jax.allreduce(v, op=MPI.MAX))(jnp.asarray(local)))

checks = {"mpi4jax allreduce": (got_sum, every.sum(0)), "mpi4jax allgather": (got_gather, every),
          "JAX psum": (jax_sum, every.sum(0)), "JAX all_gather": (jax_gather, every),
          "mpi4jax allreduce max": (again, every.max(0))}
for name, (got, want) in checks.items():
    if not np.array_equal(got, want):
        print(f"WRONG rank {rank}: {name}: {got.ravel()[:4]} != {want.ravel()[:4]}", flush=True)
        sys.exit(1)
print(f"EXACT rank {rank} of {size}", flush=True)

"""mpi4py and JAX in one program, over one MPI: host-side work with mpi4py
(here, splitting a dataset and checking a total), device collectives with
JAX. Either may be imported first; MPI is initialized once.

    mpiexec -n 4 python examples/mpi4py_and_jax.py
"""
from mpi4py import MPI

import mpi_collectives

info = mpi_collectives.initialize()  # finds MPI already initialized by mpi4py, and uses it

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

comm = MPI.COMM_WORLD
assert (comm.rank, comm.size) == (info.rank, info.size)

# Host side, mpi4py: rank 0 makes the data and scatters one chunk to each rank.
chunks = np.array_split(np.arange(1000, dtype=np.float32), comm.size) if comm.rank == 0 else None
mine = comm.scatter(chunks, root=0)

# Device side, JAX: a global sum over all ranks, by a psum inside shard_map.
mesh = Mesh(np.array(jax.devices()), ("i",))
local_sum = np.array([[mine.sum()]], np.float32)
total = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "i"), mesh=mesh, in_specs=P("i"), out_specs=P()))(
    jax.make_array_from_process_local_data(NamedSharding(mesh, P("i")), local_sum))
total = float(np.asarray(total.addressable_data(0))[0, 0])

# Back on the host: mpi4py agrees with JAX, and both with the formula.
assert comm.allreduce(float(mine.sum())) == total == 999 * 1000 / 2, total
print(f"rank {comm.rank}/{comm.size}: mpi4py and JAX agree, total {total:.0f} "
      f"({MPI.Get_library_version().splitlines()[0].strip()})", flush=True)

"""A program whose main thread ends while its last jitted computations, collectives and all, may
still run (JAX dispatches asynchronously): it must end 0, not in a segfault or MPI's "Invalid
communicator" after its last line (tests/jax_over_mpi/test_clean_end.py)."""
import mpi_collectives
info = mpi_collectives.initialize()
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()), ("x",))
x = jax.make_array_from_callback((info.size * 4096, 1024), NamedSharding(mesh, P("x")), lambda i: np.ones((4096, 1024), np.float32))
f = jax.jit(lambda v: (v @ v.T).sum(axis=0), out_shardings=NamedSharding(mesh, P()))
for _ in range(3):
    y = f(x)
print("leaving with a collective in flight", flush=True)

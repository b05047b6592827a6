"""One launch-to-first-psum, for the start-up comparison:
    mpiexec -n N python -m mpi_collectives.tools.bench.startup mpi|gloo"""
import sys

import numpy as np

from .worker import start_jax

jax, rank, size = start_jax(sys.argv[1])
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from ...integration.jax_compat import process_local_array, shard_map  # noqa: E402

mesh = Mesh(np.array(jax.devices()), ("x",))
f = jax.jit(shard_map()(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P("x")))
got = np.asarray(f(process_local_array(NamedSharding(mesh, P("x")),
                                                          np.ones((1, 4), np.float32))).addressable_data(0))
if not (got == size).all():
    raise SystemExit(f"mpi-collectives bench: WRONG first psum on rank {rank}: {got}")

"""initialize(), one psum checked, then every rank holds until a file exists,
so that a test can look at the coordinator from outside while the job runs:

    python coordinator_hold.py GO_FILE

Prints "READY rank R of N host H coordinator C" after the first psum, and
"DONE rank R" after a second psum once GO_FILE exists (at most 120 s later).
"""
import os
import socket
import sys
import time

import mpi_collectives

info = mpi_collectives.initialize()
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from mpi_collectives.integration.jax_compat import process_local_array, shard_map  # noqa: E402

mesh = Mesh(np.array(jax.devices()), ("x",))
psum = jax.jit(shard_map()(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
x = process_local_array(NamedSharding(mesh, P("x")), np.full((1, 1000), info.rank + 1, np.int32))
expected = info.size * (info.size + 1) // 2
assert (np.asarray(psum(x).addressable_data(0)) == expected).all()
print(f"READY rank {info.rank} of {info.size} host {socket.gethostname()} coordinator {info.coordinator}",
      flush=True)

deadline = time.monotonic() + 120
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
assert (np.asarray(psum(x).addressable_data(0)) == expected).all()
print(f"DONE rank {info.rank}", flush=True)

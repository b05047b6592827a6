"""A collective over part of the mesh: some processes run a program with a
collective, the others run nothing of it (pipeline stages, a sub-mesh for
evaluation, one rank's own devices). Over MPI (argv[1] == "mpi", through
mpi_collectives.initialize()) or over JAX's gloo ("gloo").

    python sub_mesh.py mpi|gloo CASE     (JAX_NUM_CPU_DEVICES set by the test)

    1d-1dev   3 processes x 1 device: a 1-D mesh over ranks 1 and 2
    2d-1dev   3 processes x 1 device: a 2-D (2, 1) mesh over ranks 1 and 2
    own-2dev  2 processes x 2 devices: a 1-D mesh over rank 1's own devices
              (JAX's array_test.py test_jit_no_local_devices_named_sharding_collective)
    2d-2dev   3 processes x 2 devices: a 2-D (process, device) mesh over ranks 1 and 2

The members psum over every axis of their mesh and check the result against
NumPy ("WRONG" if it differs); every rank prints "DONE rank R" at the end.
"""
import sys

backend, case = sys.argv[1], sys.argv[2]
from launcher_env import jax_compat, start  # noqa: E402  (the package's jax_compat, without importing it)

jax, rank, size = start(backend)

import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

L = jax.local_device_count()
devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
members = [1] if case == "own-2dev" else [1, 2]
chosen = np.array([d for d in devices if d.process_index in members])
mesh = Mesh(chosen.reshape(len(members), L) if case.startswith("2d") else chosen,
            ("p", "l") if case.startswith("2d") else ("x",))
axes = mesh.axis_names
N = 8
if rank in members:
    spec = P(axes)
    psum = jax.jit(jax_compat.shard_map()(lambda v: jax.lax.psum(v, axes), mesh=mesh, in_specs=spec,
                                          out_specs=P()))
    rows = np.stack([np.arange(N, dtype=np.float32) + i for i in range(chosen.size)])  # one per member device
    x = jax.make_array_from_callback(rows.shape, NamedSharding(mesh, spec), lambda index: rows[index])
    got = np.asarray(psum(x).addressable_data(0)).ravel()
    want = rows.sum(0)
    print(f"{'RESULT' if np.array_equal(got, want) else 'WRONG'} rank {rank}: {got[:4]}", flush=True)
print(f"DONE rank {rank}", flush=True)

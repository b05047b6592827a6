"""A program that sets JAX up itself and never imports mpi_collectives, the
way JAX's own multi-process tests run: MPITRAMPOLINE_LIB and
JAX_CPU_COLLECTIVES_IMPLEMENTATION=mpi exported, jax.distributed.initialize()
with its own arguments. What the package gives it comes through its JAX
plugin hook (mpi_collectives_jax_plugin).

    plain_program.py HOW
HOW: "env" (JAX_NUM_CPU_DEVICES from the launching test, or none: one
device), or "config" (jax.config.update('jax_num_cpu_devices', 2) in code).
ONLY_ON="R:NAME=VALUE" sets a variable on rank R alone, before jax loads.

Every collective (psum in float32 and float16, all_gather, ppermute) over all
devices, checked exactly against NumPy; prints "PASS plain rank R devices L".
"""
import os
import sys

import numpy as np

from launcher_env import jax_compat, launcher_rank_size

how = sys.argv[1]
rank, size = launcher_rank_size()
# ONLY_ON="R:NAME=VALUE": a variable on rank R alone (as a launcher that passes it to one rank)
who, _, assignment = os.environ.get("ONLY_ON", "").partition(":")
if who and int(who) == rank:
    os.environ.__setitem__(*assignment.split("=", 1))
import jax  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

if how == "config":
    jax.config.update("jax_num_cpu_devices", 2)
# (jax before 0.4.3x reads this option only from its config, not from the environment: a program
# for those versions sets it, as JAX's own multi-process harness does)
jax.config.update("jax_cpu_collectives_implementation", os.environ["JAX_CPU_COLLECTIVES_IMPLEMENTATION"])
jax.distributed.initialize(f"127.0.0.1:{os.environ['MPI_COLLECTIVES_TEST_PORT']}", size, rank)
L = jax.local_device_count()
devices = np.array(sorted(jax.devices(), key=lambda d: (d.process_index, d.id)))
mesh = Mesh(devices, ("x",))
n = size * L
full = (np.arange(n * 4, dtype=np.float32).reshape(n, 4) % 7) + 1
sharding = NamedSharding(mesh, P("x"))
shard_map = jax_compat.shard_map()


def check(name, f, x, want):
    for shard in f(x).addressable_shards:
        got = np.asarray(shard.data)
        if not np.array_equal(got, want[shard.index]):
            print(f"WRONG {name} rank {rank}: {got.ravel()[:8]} != {want[shard.index].ravel()[:8]}", flush=True)
            sys.exit(3)


for dtype in (np.float32, np.float16):
    x = jax.make_array_from_callback(full.shape, sharding, lambda index: full[index].astype(dtype))
    psum = jax.jit(shard_map(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    check(f"psum {np.dtype(dtype).name}", psum, x, np.tile(full.sum(0, keepdims=True), (n, 1)).astype(dtype))
x = jax.make_array_from_callback(full.shape, sharding, lambda index: full[index])
gather = jax.jit(shard_map(lambda v: jax.lax.all_gather(v, "x", tiled=True), mesh=mesh, in_specs=P("x"),
                           out_specs=P("x")))
check("all_gather", gather, x, np.tile(full, (n, 1)))
shift = [(i, (i + 1) % n) for i in range(n)]
permute = jax.jit(shard_map(lambda v: jax.lax.ppermute(v, "x", shift), mesh=mesh, in_specs=P("x"), out_specs=P("x")))
check("ppermute", permute, x, np.roll(full, 1, axis=0))
print(f"PASS plain rank {rank} devices {L}", flush=True)

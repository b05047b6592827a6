"""A training loop that saves on preemption the way JAX (and Orbax's
CheckpointManager) asks: each step a psum, then
multihost_utils.reached_preemption_sync_point(step); when it says True, every
rank writes its checkpoint file (SAVE_DIR/rank-R-step-S) and ends 0.

    preemption.py BACKEND MODE MARKER SAVE_DIR

BACKEND: "initialize" (mpi_collectives.initialize()), "plain" (its own
arguments to jax.distributed.initialize, the package never imported) or
"gloo". MODE: "loop" as above; "stuck": rank 1 stops asking and sleeps in
away_from_the_loop() for 600 s (the others wait for it in their next psum);
"never": a loop that never asks the sync point. Every rank prints "STEP R S"
each step after the fifth, flushing. MARKER only lets the test find this
job's processes.
"""
import os
import sys
import time

import numpy as np

backend, mode, save_dir = sys.argv[1], sys.argv[2], sys.argv[4]
if backend == "initialize":
    import mpi_collectives
    info = mpi_collectives.initialize()
    import jax
    rank, size = info.rank, info.size
else:
    from launcher_env import start
    jax, rank, size = start("plain" if backend == "plain" else "gloo")
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from launcher_env import jax_compat  # noqa: E402

mesh = Mesh(np.array(jax.devices()), ("x",))
psum = jax.jit(jax_compat.shard_map()(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
x = jax.make_array_from_callback((size, 1024), NamedSharding(mesh, P("x")),
                                 lambda index: np.ones((size, 1024), np.float32)[index])


def away_from_the_loop():
    time.sleep(600)


for step in range(100000):
    total = float(np.asarray(psum(x).addressable_data(0))[0, 0])
    assert total == size, total
    if step >= 5:
        print(f"STEP {rank} {step}", flush=True)
    if mode == "stuck" and rank == 1 and step == 10:
        away_from_the_loop()
    if mode != "never" and multihost_utils.reached_preemption_sync_point(step):
        with open(os.path.join(save_dir, f"rank-{rank}-step-{step}"), "w") as f:
            f.write("checkpoint\n")
        print(f"SAVED {rank} {step}", flush=True)
        sys.exit(0)
    time.sleep(0.01)

"""Faults in a program that sets JAX up itself, with its own arguments to
jax.distributed.initialize() and no import of mpi_collectives (JAX's own
multi-process tests are written so): what it gets comes through the JAX
plugin hook (mpi_collectives/integration/plain_programs.py).

    plain_faults.py MODE MARKER [SECONDS]

    stall    rank 1 spends SECONDS in away_from_the_collective() before a psum
             the others already wait in; then every rank checks the psum and
             prints "PASS plain-stall rank R"
    sigterm  every rank computes psums until the launcher is stopped
    exit     rank 1 sys.exit(0)s before the next psum (finished early)
    kill     rank 1 is SIGKILLed from outside, likely inside a psum
    raise    rank 1 raises an uncaught exception

Every rank prints "READY rank R pid P" after a first psum. MARKER only lets
the test find this job's processes.
"""
import os
import signal
import sys
import threading
import time

import numpy as np

from launcher_env import jax_compat, start

mode = sys.argv[1]
jax, rank, size = start("plain")
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

mesh = Mesh(np.array(jax.devices()), ("x",))
psum = jax.jit(jax_compat.shard_map()(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
x = jax.make_array_from_callback((size, 4), NamedSharding(mesh, P("x")),
                                 lambda index: np.arange(size * 4, dtype=np.float32).reshape(size, 4)[index])
want = np.arange(size * 4, dtype=np.float32).reshape(size, 4).sum(0, keepdims=True)
assert np.array_equal(np.asarray(psum(x).addressable_data(0)), want)
print(f"READY rank {rank} pid {os.getpid()}", flush=True)


def away_from_the_collective():
    time.sleep(float(sys.argv[3]))


if mode == "stall":
    if rank == 1:
        away_from_the_collective()
    assert np.array_equal(np.asarray(psum(x).addressable_data(0)), want)
    print(f"PASS plain-stall rank {rank}", flush=True)
    sys.exit(0)
if rank == 1:
    if mode == "exit":
        sys.exit(0)
    if mode == "raise":
        raise ValueError("rank 1 fails on purpose")
    if mode == "kill":
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGKILL)).start()
deadline = time.monotonic() + 120
while time.monotonic() < deadline:  # the others never get past a psum without rank 1
    psum(x).block_until_ready()
print(f"UNEXPECTED rank {rank} computed for 120 s", flush=True)

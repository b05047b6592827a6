"""A 3-rank job in which rank 1 fails while the others are in (or about to
enter) a collective, in the way argv[1] names:

    raise     an uncaught exception
    kill      SIGKILL from outside, during a collective
    exit      sys.exit(0) before the next collective (finished early)
    os_exit   os._exit(3): no Python exit path at all
    none      nobody fails: 3000 psums, then "DONE rank R" and a normal end
    exit_first  sys.exit(0) right after initialize(), before any collective
              (the others wait for it in JAX's start-up exchange, not in MPI)
    sigterm   nobody fails; every rank computes until the launcher is stopped
    lost      every rank runs psums, each result checked, until a test cuts a host
              off or freezes it ("WRONG" if a result is ever wrong)

Every rank prints "READY rank R pid P" first, so that a test can match a
launcher's PID to a rank. argv[2] is a marker that only lets the test find
this job's processes.
"""
import os
import signal
import sys
import threading
import time

import mpi_collectives

info = mpi_collectives.initialize()
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

mode = sys.argv[1]
if mode == "exit_first" and info.rank == 1:
    print(f"READY rank {info.rank} pid {os.getpid()}", flush=True)
    sys.exit(0)
mesh = Mesh(np.array(jax.devices()), ("x",))
psum = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), np.ones((1, 1 << 16), np.float32))
psum(x).block_until_ready()
if mode == "exit_first":
    print(f"UNEXPECTED rank {info.rank} made its backend without rank 1", flush=True)
print(f"READY rank {info.rank} pid {os.getpid()}", flush=True)
mpi_collectives.barrier()

if info.rank == 1:
    if mode == "raise":
        raise ValueError("rank 1 fails on purpose")
    if mode == "exit":
        sys.exit(0)
    if mode == "os_exit":
        os._exit(3)
    if mode == "kill":  # a moment from now, whatever this rank is doing: likely inside a psum
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGKILL)).start()

if mode == "none":
    for _ in range(3000):  # a few seconds: long enough to overlap another job failing
        psum(x).block_until_ready()
    print(f"DONE rank {info.rank}", flush=True)
    sys.exit(0)

if mode == "lost":
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        got = psum(x).addressable_data(0)
        if not np.all(np.asarray(got) == info.size):
            print(f"WRONG rank {info.rank}: a psum returned {np.asarray(got).ravel()[:4]}", flush=True)
    print(f"UNEXPECTED rank {info.rank} still running after 240 s", flush=True)
    sys.exit(0)

deadline = time.monotonic() + 120
while time.monotonic() < deadline:  # the others never get past a psum without rank 1
    psum(x).block_until_ready()
print(f"UNEXPECTED rank {info.rank} still running after 120 s", flush=True)

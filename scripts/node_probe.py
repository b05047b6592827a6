"""Where a node's all-reduce time goes, one launch per MODE (run under mpiexec;
scripts/node_probe.sh runs the set):

    mpiexec -n 16 python scripts/node_probe.py floor    # C loop through the wrapper, memory floor
    mpiexec -n 16 python scripts/node_probe.py grad     # JAX: the training step's gradient psum
    mpiexec -n 16 python scripts/node_probe.py start    # launch to initialize() done (start-up)
    mpiexec -n 16 python scripts/node_probe.py step     # the bench's training step (PROBE_BACKEND=gloo too)
    mpiexec -n 16 python scripts/node_probe.py loop     # JAX's psum back to back, 8 B and 64 KiB

floor: MPI_Allreduce of float32 through the wrapper's MPIABI_Allreduce (the C
loop of the bench) at 1 and 16 MiB, and three 16 MiB calls back to back on
three buffers (what XLA makes of a step's combined gradient all-reduce: one
MPI call per operand); and the node's memory floor: every rank copying its
16 MiB buffer once, all ranks at once (memcpy: the least memory traffic a
shared-memory all-reduce needs, each rank's input read and its output
written once).
grad: a jit of psum over a tuple of three 16 MiB arrays (replicated out), and
of one 16 MiB array, through initialize().
step: the bench's training step (weights [in, out] and [out, in]), its compute
alone and its gradient psum alone, over PROBE_BACKEND (mpi, or gloo with its
coordinator at PROBE_COORDINATOR), rank 0's medians.
Every rank's result is checked; rank 0 prints one line of JSON per measurement:
{"mode", "what", "ranks", "median_s", "env"}.
"""
import json
import os
import sys
import time

import numpy as np

MODE = sys.argv[1]
ITERS = int(os.environ.get("PROBE_ITERS", "20"))
MiB = 1 << 20
ENV_SHOWN = ("MPIR_CVAR_DEVICE_COLLECTIVES", "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM", "MPI_COLLECTIVES_CHECK_COLLECTIVES",
             "MPI_COLLECTIVES_BIND_CPUS", "MPI_COLLECTIVES_MPI_SETTINGS", "MPIR_CVAR_CH4_CMA_ENABLE",
             "MPI_COLLECTIVES_NODE_PATH")
t_start = float(os.environ.get("PROBE_T0", "0") or 0)

if MODE == "step":
    # The bench's training step (mpi_collectives/tools/bench/user_loops.py) over PROBE_BACKEND: mpi
    # (initialize()) or gloo (JAX's default, its coordinator at PROBE_COORDINATOR).
    from mpi_collectives.tools.backends import start
    jax, rank, size = start(os.environ.get("PROBE_BACKEND", "mpi"), os.environ.get("PROBE_COORDINATOR"))
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from mpi_collectives.integration.jax_compat import shard_map
    from mpi_collectives.tools.bench import user_loops
    mesh = Mesh(np.array(jax.devices()), ("x",))
    # PROBE_BEFORE_MIB=N: the step after three psums of N MiB in the same process, as the bench's
    # worker runs it after its collectives of every size (the bench-against-standalone gap).
    before = int(os.environ.get("PROBE_BEFORE_MIB", "0"))
    if before:
        n = before * MiB // 4
        big = jax.make_array_from_callback((size * n,), NamedSharding(mesh, P("x")),
                                           lambda i: np.full(n, 1.0, np.float32))
        f = jax.jit(shard_map()(lambda a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
        for _ in range(3):
            jax.block_until_ready(f(big))
        del big
    got = user_loops.train_step(jax, mesh, rank, os.environ.get("PROBE_SMOKE") == "1", ITERS)
    if rank == 0:
        env = {k: os.environ[k] for k in ENV_SHOWN + ("PROBE_BACKEND", "PROBE_BEFORE_MIB") if k in os.environ}
        for what in ("step", "step-out-in", "local", "gradients"):
            print(json.dumps({"mode": MODE, "what": f"train {what}", "ranks": size,
                              "median_s": float(np.median(got[what])), "env": env}), flush=True)
    sys.exit(0)

import mpi_collectives  # noqa: E402

info = mpi_collectives.initialize()
started = time.time()
from mpi_collectives.base import mpi  # noqa: E402


def say(what, seconds, **extra):
    if info.rank == 0:
        env = {k: os.environ[k] for k in ENV_SHOWN if k in os.environ}
        print(json.dumps({"mode": MODE, "what": what, "ranks": info.size, "median_s": seconds, "env": env, **extra}),
              flush=True)


def agreed_median(times):
    """The median over iterations of the slowest rank's time."""
    every = mpi.allgather(np.asarray(times, np.float64), info.size)
    return float(np.median(every.max(axis=0)))


if MODE == "start":
    # The launcher's start (PROBE_T0, set by the shell just before mpiexec) to initialize() done.
    say("start-up to initialize() done", agreed_median([started - t_start]))

elif MODE == "floor":
    from mpi_collectives.tools.bench import c_loop
    target = c_loop.through_wrapper()
    for size in (MiB, 16 * MiB):
        n = size // 4
        send, recv = np.full(n, info.rank + 1, np.float32), np.empty(n, np.float32)
        c_loop.run(target, "all-reduce", send, recv, 2)
        times = c_loop.run(target, "all-reduce", send, recv, ITERS)
        assert recv[0] == info.size * (info.size + 1) / 2
        say(f"C all-reduce {size // MiB} MiB", agreed_median(times))
    # the bench's own floor of the step's gradients: three 16 MiB calls, each on its own buffers
    from mpi_collectives.tools.bench.worker import gradient_floor
    times = gradient_floor(mpi, target, info.rank, info.size, 1.0)["all-reduce"][16 * MiB]  # (slowest rank's)
    say("C all-reduce 3 x 16 MiB", float(np.median(times)))
    n = 16 * MiB // 4
    src, dst = np.full(n, 1.0, np.float32), np.empty(n, np.float32)
    times = []
    for it in range(ITERS + 2):
        mpi.barrier()
        t = time.perf_counter()
        np.copyto(dst, src)
        if it >= 2:
            times.append(time.perf_counter() - t)
    say("memory floor: every rank copies 16 MiB at once", agreed_median(times))

elif MODE == "grad":
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from mpi_collectives.integration.jax_compat import shard_map

    mesh = Mesh(np.array(jax.devices()), ("x",))
    n = 16 * MiB // 4
    local = np.full(n, info.rank + 1, np.float32)
    xs = [jax.make_array_from_callback((info.size * n,), NamedSharding(mesh, P("x")), lambda i: local)
          for _ in range(3)]
    want = info.size * (info.size + 1) / 2
    for name, arity in (("JAX psum 3 x 16 MiB (the step's gradients)", 3), ("JAX psum 16 MiB", 1)):
        f = jax.jit(shard_map()(lambda *a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=(P("x"),) * arity,
                                out_specs=(P(),) * arity))
        out = jax.block_until_ready(f(*xs[:arity]))
        assert all(float(np.asarray(o.addressable_shards[0].data)[0]) == want for o in out)
        times = []
        for _ in range(ITERS):
            mpi.barrier()
            t = time.perf_counter()
            jax.block_until_ready(f(*xs[:arity]))
            times.append(time.perf_counter() - t)
        say(name, agreed_median(times))
elif MODE == "loop":
    # JAX's psum called back to back (the psum loop): 8 B and 64 KiB, median of a call.
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from mpi_collectives.integration.jax_compat import shard_map

    mesh = Mesh(np.array(jax.devices()), ("x",))
    f = jax.jit(shard_map()(lambda a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
    for nbytes in (8, 64 << 10):
        n = nbytes // 4
        x = jax.make_array_from_callback((info.size * n,), NamedSharding(mesh, P("x")),
                                         lambda i: np.full(n, info.rank + 1, np.float32))
        jax.block_until_ready(f(x))
        times = []
        for _ in range(20):
            mpi.barrier()
            t = time.perf_counter()
            for _ in range(50):
                y = f(x)
            jax.block_until_ready(y)
            times.append((time.perf_counter() - t) / 50)
        assert float(np.asarray(y.addressable_shards[0].data)[0]) == info.size * (info.size + 1) / 2
        say(f"JAX psum loop {nbytes} B", agreed_median(times))
else:
    raise SystemExit(f"node_probe.py: unknown mode {MODE!r} (floor, grad, start, step, loop)")

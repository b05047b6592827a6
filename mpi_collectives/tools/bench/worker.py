"""One benchmark path on every rank of an mpiexec launch:

    mpiexec -n N python -m mpi_collectives.tools.bench.worker PATH OUT.json SIZES ITERS_SCALE [OPS]

PATH is jax-mpi, jax-gloo, jax-xla-mpi (XLA's own MPI collectives through an
MPIwrapper: MPI_COLLECTIVES_BENCH_MPIWRAPPER), jax-call (the same jitted programs with the
collective replaced by a local op of the same output shape), mpi4py, c
(the C loop through the wrapper and directly, and the memory floor), or, for
`tune`, c-wrapper (the C loop through the wrapper only) and jax-step (the
training step alone, through initialize()), and jax-step-one-rank (the
step as one rank with the node's every CPU, on a multi-rank run's global
batch: whether splitting the node pays). Every result is checked
against NumPy once per size; rank 0 writes {op: {bytes: [seconds...]}}.
OPS (comma-separated, default all) limits the collectives (`tune` uses it).
The C and mpi4py paths start MPI with the same library settings as
initialize() (library_settings.py), so that the floor is measured like
for like.
"""
import json
import os
import sys
import time

import numpy as np

from ..backends import start
from ...integration.jax_compat import process_local_array, shard_map
from .c_loop import OPS
from .inputs import expected, rank_input


def iterations(nbytes: int, scale: float) -> int:
    """The same on every rank (so that every rank runs as many collectives): many for small messages."""
    return int(max(5, min(300, 2 ** 25 / max(nbytes, 64))) * scale) or 3


def elements(op: str, nbytes: int, size: int) -> int:
    count = max(1, nbytes // 4)
    if op in ("reduce-scatter", "all-to-all"):
        count = -(-count // size) * size  # a multiple of the ranks, as these need
    return count


# ---- JAX ----

def jax_programs(mesh, size, with_collective):
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    lax = jax.lax
    shift = [(i, (i + 1) % size) for i in range(size)]
    if with_collective:
        bodies = {
            "all-reduce": lambda v: lax.psum(v, "x"),
            "all-gather": lambda v: lax.all_gather(v[0], "x", tiled=True)[None],
            "reduce-scatter": lambda v: lax.psum_scatter(v[0], "x", tiled=True)[None],
            "all-to-all": lambda v: lax.all_to_all(v[0].reshape(size, -1), "x", 0, 0, tiled=True).reshape(1, -1),
            "ppermute": lambda v: lax.ppermute(v, "x", shift),
        }
    else:
        # JAX's own cost: the same program with its output, of the same shape, filled with zeros
        # instead of computed by the collective (dispatch, a fresh output buffer, one write of it).
        def zeros(parts):
            return lambda v: jnp.zeros((1, v.shape[1] * parts), v.dtype)

        bodies = {"all-reduce": zeros(1), "all-gather": zeros(size),
                  "reduce-scatter": lambda v: jnp.zeros((1, v.shape[1] // size), v.dtype),
                  "all-to-all": zeros(1), "ppermute": zeros(1)}
    return {op: jax.jit(shard_map()(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
            for op, body in bodies.items()}


def start_jax(impl):
    """JAX with its collectives over `impl` ("mpi": this package; "gloo": JAX's default, set up
    as a gloo user would, its coordinator where bench.run chose). Returns (jax, rank, size)."""
    return start(impl, os.environ.get("MPI_COLLECTIVES_BENCH_COORDINATOR"))


def run_jax(path, sizes, scale, out, ops=OPS):
    jax, rank, size = start_jax({"jax-gloo": "gloo", "jax-xla-mpi": "xla-mpi"}.get(path, "mpi"))
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("x",))
    sharding = NamedSharding(mesh, P("x"))
    programs = jax_programs(mesh, size, path != "jax-call")
    results = {op: {} for op in ops}
    for op in ops:
        for nbytes in sizes:
            count = elements(op, nbytes, size)
            x = process_local_array(sharding, rank_input(count, rank)[None])
            f = programs[op]
            got = np.asarray(f(x).addressable_data(0))[0]
            if path != "jax-call" and not np.array_equal(got, expected(op, count, rank, size)):
                raise SystemExit(f"mpi-collectives bench: WRONG result: {path} {op} {nbytes} B on rank {rank}")
            times = results[op][nbytes] = timed_calls(f, x, iterations(nbytes, scale))
            progress(rank, path, op, nbytes, times)
    extra = host_helpers(rank) if path == "jax-mpi" else {}
    if path in ("jax-mpi", "jax-gloo", "jax-xla-mpi") and ops == OPS:  # what users see, over each
        from . import user_loops
        smoke = os.environ.get("MPI_COLLECTIVES_BENCH_SMOKE") == "1"
        extra["user_loops"] = {
            "psum-kept": user_loops.psum_kept(jax, mesh, rank, sizes, lambda n: iterations(n, scale)),
            # at least 10 steps, as a launch of the step alone (scripts/node_probe.py step) times it
            "train-step": user_loops.train_step(jax, mesh, rank, smoke, max(3 if smoke else 10, int(20 * scale)))}
        extra["user_loops"].update(monte_carlo_loop(jax, smoke, scale))  # last: NetKet turns x64 on
    write(rank, out, {"results": results, **extra})


def monte_carlo_loop(jax, smoke: bool, scale: float) -> dict:
    """{"vmc-plain": the VMC iteration in plain JAX, "vmc": NetKet's where NetKet is installed}
    (monte_carlo.py); the plain one first, in float32, before NetKet turns x64 on."""
    from . import monte_carlo

    iterations = 3 if smoke else max(10, int(60 * scale))
    loops = {"vmc-plain": monte_carlo.plain(jax, iterations)}
    if monte_carlo.available():
        loops["vmc"] = monte_carlo.vmc(jax, iterations)
    return loops


def run_step(scale, out):
    """The training step alone, weights [in, out] and [out, in], through initialize(): what
    `tune` confirms its kept settings on."""
    from . import user_loops

    jax, rank, _ = start_jax("mpi")
    from jax.sharding import Mesh

    mesh = Mesh(np.array(jax.devices()), ("x",))
    smoke = os.environ.get("MPI_COLLECTIVES_BENCH_SMOKE") == "1"
    steps = user_loops.train_step(jax, mesh, rank, smoke, max(3, int(20 * scale)), parts=("step", "step-out-in"))
    write(rank, out, {"train-step": {k: steps[k] for k in ("step", "step-out-in")}})


def run_step_one_rank(scale, out):
    """The training step as one rank with every CPU of the node, given the multi-rank run's global
    batch (MPI_COLLECTIVES_BENCH_ROWS): whether splitting the node pays for this step
    (docs/layout.md)."""
    from . import user_loops

    jax, rank, _ = start_jax("mpi")
    from jax.sharding import Mesh

    mesh = Mesh(np.array(jax.devices()), ("x",))
    smoke = os.environ.get("MPI_COLLECTIVES_BENCH_SMOKE") == "1"
    rows = int(os.environ["MPI_COLLECTIVES_BENCH_ROWS"])
    steps = user_loops.train_step(jax, mesh, rank, smoke, max(3 if smoke else 10, int(20 * scale)),
                                  parts=("step", "step-out-in"), rows=rows)
    one = {"step": steps["step"], "step-out-in": steps["step-out-in"], "rows": rows,
           "cpus": len(os.sched_getaffinity(0))}
    one.update(monte_carlo_loop(jax, smoke, scale))  # the same chains and samples as the ranks' run
    write(rank, out, {"one-rank": one})


def host_helpers(rank):
    """Small pytree: ours against jax.experimental.multihost_utils. Timed as
    rounds of calls closed by a barrier, so that a call that returns before the
    others have the data (the root of a broadcast) is not counted as finished."""
    from jax.experimental import multihost_utils

    from mpi_collectives.services import host


    from mpi_collectives.base import mpi
    tree = {"step": np.int32(rank), "loss": np.float32(0.5), "metrics": np.arange(8, dtype=np.float32) + rank}
    out = {}
    for name in ("broadcast_one_to_all", "process_allgather"):
        ours, theirs = getattr(host, name), getattr(multihost_utils, name)
        a, b = ours(tree), theirs(tree)
        if not all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in tree):
            raise SystemExit(f"mpi-collectives bench: WRONG result: host {name} differs from multihost_utils")
        for label, fn in (("ours", ours), ("multihost_utils", theirs)):
            calls = 20
            for _ in range(3):
                fn(tree)
            times = []
            for _ in range(15):
                mpi.barrier()
                t = time.perf_counter()
                for _ in range(calls):
                    fn(tree)
                mpi.barrier()
                times.append((time.perf_counter() - t) / calls)
            out.setdefault("host_helpers", {}).setdefault(name, {})[label] = float(np.median(times))
    return out


# ---- mpi4py and C ----

def same_library_settings():
    """The MPI library's own settings that initialize() would set (before MPI_Init reads them)."""
    from mpi_collectives.services import library_settings

    from mpi_collectives.base import settings
    library_settings.set_for_this_process(settings.read())


def run_mpi4py(sizes, scale, out):
    same_library_settings()
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    calls = {
        "all-reduce": lambda s, r: comm.Allreduce(s, r),
        "all-gather": lambda s, r: comm.Allgather(s, r),
        "reduce-scatter": lambda s, r: comm.Reduce_scatter(s, r, [r.size] * size),
        "all-to-all": lambda s, r: comm.Alltoall(s, r),
        "ppermute": lambda s, r: comm.Sendrecv(s, (rank + 1) % size, 7, r, (rank - 1) % size, 7),
    }
    results = {op: {} for op in OPS}
    for op in OPS:
        for nbytes in sizes:
            count = elements(op, nbytes, size)
            send, want = rank_input(count, rank), expected(op, count, rank, size)
            recv = np.empty_like(want)
            calls[op](send, recv)
            if not np.array_equal(recv, want):
                raise SystemExit(f"mpi-collectives bench: WRONG result: mpi4py {op} {nbytes} B on rank {rank}")
            comm.Barrier()
            times = []
            for _ in range(iterations(nbytes, scale)):
                t = MPI.Wtime()
                calls[op](send, recv)
                times.append(MPI.Wtime() - t)
            results[op][nbytes] = times
            progress(rank, "mpi4py", op, nbytes, times)
    write(rank, out, {"results": results})


# mpi4jax's primitive for each of the bench's collectives it has (it has no reduce-scatter), on
# this process's own array inside jit, as an mpi4jax program writes them.
MPI4JAX_OPS = ("all-reduce", "all-gather", "all-to-all", "ppermute")


def run_mpi4jax(sizes, scale, out):
    """mpi4jax in the same processes as JAX over this package (docs/mpi4jax.md: initialize()
    first), on the same MPI."""
    jax, rank, size = start_jax("mpi")
    import jax.numpy as jnp
    import mpi4jax
    from mpi4py import MPI

    left, right = (rank - 1) % size, (rank + 1) % size
    calls = {
        "all-reduce": jax.jit(lambda v: mpi4jax.allreduce(v, op=MPI.SUM)),
        "all-gather": jax.jit(lambda v: mpi4jax.allgather(v).reshape(-1)),
        "all-to-all": jax.jit(lambda v: mpi4jax.alltoall(v.reshape(size, -1)).reshape(-1)),
        "ppermute": jax.jit(lambda v: mpi4jax.sendrecv(v, jnp.empty_like(v), source=left, dest=right)),
    }
    results = {}
    for op in MPI4JAX_OPS:
        results[op] = {}
        for nbytes in sizes:
            count = elements(op, nbytes, size)
            x = jnp.asarray(rank_input(count, rank))
            f = calls[op]
            if not np.array_equal(np.asarray(f(x)), expected(op, count, rank, size)):
                raise SystemExit(f"mpi-collectives bench: WRONG result: mpi4jax {op} {nbytes} B on rank {rank}")
            times = results[op][nbytes] = timed_calls(f, x, iterations(nbytes, scale))
            progress(rank, "mpi4jax", op, nbytes, times)
    write(rank, out, {"results": results})


def run_c(sizes, scale, out, ops=OPS, wrapper_only=False):
    """wrapper_only: the loop through the wrapper, which jobs through initialize() run, and
    neither the direct loop nor the memory floor (tune compares the library's settings only)."""
    from mpi_collectives.base import mpi

    from . import c_loop

    same_library_settings()
    mpi.init()
    rank, size = mpi.rank_size()
    both = (c_loop.through_wrapper(),) if wrapper_only else (c_loop.through_wrapper(), c_loop.direct())
    targets = [t for t in both if t is not None]
    results = {t.name: {op: {} for op in ops} for t in targets}
    for op in ops:
        for nbytes in sizes:
            count = elements(op, nbytes, size)
            send = rank_input(count, rank)
            want = expected(op, count, rank, size)
            for target in targets:
                recv = np.zeros_like(want)
                c_loop.run(target, op, send, recv, 1)
                if not np.array_equal(recv, want):
                    raise SystemExit(f"mpi-collectives bench: WRONG result: {target.name} {op} {nbytes} B")
            # Interleaved rounds, so that both see the same machine.
            for target in targets:
                results[target.name][op][nbytes] = []
            rounds = 5
            for _ in range(rounds):
                for target in targets:
                    times = c_loop.run(target, op, send, recv, max(2, iterations(nbytes, scale) // rounds))
                    results[target.name][op][nbytes] += times.tolist()
            progress(rank, "C", op, nbytes, results[targets[0].name][op][nbytes])
    if not wrapper_only:
        results[MEMORY_FLOOR] = memory_floor(mpi, rank, size, sizes, scale, ops)
        results[GRADIENT_FLOOR] = gradient_floor(mpi, targets[-1], rank, size, scale)
        results[STEP_MEMORY_FLOOR] = step_memory_floor(mpi, rank, size, scale)
    write(rank, out, {"results_by_target": results})


MEMORY_FLOOR = "memory floor"
GRADIENT_FLOOR = "gradient floor"  # the C loop's floor of the training steps' collectives
STEP_MEMORY_FLOOR = "step memory floor"


def gradient_floor(mpi, target, rank, size, scale) -> dict:
    """The C floor of the training step's gradient all-reduce (user_loops.train_step), through
    `target` (the library itself where it can be called directly): XLA makes of it one MPI call
    per gradient, LAYERS calls one after the other, each on its own buffers. {"all-reduce":
    {bytes of one gradient: [seconds for the LAYERS calls], the slowest rank's}}. Not LAYERS
    times the per-size loop's call, which repeats one buffer pair that stays in the caches and
    the page tables: at 16 MiB on 8 ranks of a 16-core node 3 x 15.0 ms, against 54.8 ms for
    three buffer pairs (docs/benchmarks/node-16/README.md).
    The fully sharded step's collectives the same way (user_loops._fsdp): LAYERS all-gathers of a
    weight's shard and LAYERS reduce-scatters of a gradient, keyed by one weight's bytes too; and
    STEP_MEMORY_FLOOR's "copy": every rank copying LAYERS weight-sized buffers of its own once,
    the floor of all three (each reads or writes a whole weight a rank at least once)."""
    from . import c_loop, user_loops

    width = user_loops.SMOKE_WIDTH if os.environ.get("MPI_COLLECTIVES_BENCH_SMOKE") == "1" else user_loops.WIDTH
    count = width * width
    calls = iterations(4 * count, scale) + 2

    def layers_of(op, per_rank):
        sends = [rank_input(per_rank, rank) for _ in range(user_loops.LAYERS)]
        want = expected(op, per_rank, rank, size)
        recvs = [np.zeros_like(want) for _ in sends]
        times = []
        for it in range(calls):
            mpi.barrier()
            t = time.perf_counter()
            for send, recv in zip(sends, recvs):
                c_loop.run(target, op, send, recv, 1)
            if it >= 2:
                times.append(time.perf_counter() - t)
        if not all(np.array_equal(recv, want) for recv in recvs):
            raise SystemExit(f"mpi-collectives bench: WRONG result: {target.name} {op} of the step's weights")
        return mpi.allgather(np.asarray(times, np.float64), size).max(axis=0).tolist()

    out = {"all-reduce": {4 * count: layers_of("all-reduce", count)}}
    if count % size == 0:  # the fully sharded step runs where the first axis divides
        out["all-gather"] = {4 * count: layers_of("all-gather", count // size)}
        out["reduce-scatter"] = {4 * count: layers_of("reduce-scatter", count)}
    return out


def step_memory_floor(mpi, rank, size, scale) -> dict:
    """{"copy": {one weight's bytes: [seconds for LAYERS copies]}}: see gradient_floor."""
    from . import user_loops

    width = user_loops.SMOKE_WIDTH if os.environ.get("MPI_COLLECTIVES_BENCH_SMOKE") == "1" else user_loops.WIDTH
    count = width * width
    srcs = [np.ones(count, np.float32) for _ in range(user_loops.LAYERS)]
    dsts = [np.empty_like(a) for a in srcs]
    times = []
    for it in range(iterations(4 * count, scale) + 2):
        mpi.barrier()
        t = time.perf_counter()
        for src, dst in zip(srcs, dsts):
            np.copyto(dst, src)
        if it >= 2:
            times.append(time.perf_counter() - t)
    return {"copy": {4 * count: mpi.allgather(np.asarray(times, np.float64), size).max(axis=0).tolist()}}


def memory_floor(mpi, rank, size, sizes, scale, ops) -> dict:
    """The node's floor under MPI's: every rank copying its larger buffer of the collective (its
    input, or its output where that is larger: all-gather's) once, all ranks at once, the
    slowest rank's time. A shared-memory collective must read each rank's input and write each
    rank's output at least once; across nodes the network's floor comes first and this says
    little."""
    out = {op: {} for op in ops}
    for op in ops:
        for nbytes in sizes:
            count = elements(op, nbytes, size)
            words = count * size if op == "all-gather" else count
            src, dst = np.ones(words, np.float32), np.empty(words, np.float32)
            times = []
            for it in range(iterations(nbytes, scale) + 2):
                mpi.barrier()
                t = time.perf_counter()
                np.copyto(dst, src)
                if it >= 2:
                    times.append(time.perf_counter() - t)
            slowest = mpi.allgather(np.asarray(times, np.float64), size).max(axis=0)
            out[op][nbytes] = slowest.tolist()
    return out


def timed_calls(f, x, calls: int) -> list:
    """Seconds per call of f(x), each waited for, after two calls not timed."""
    for _ in range(2):
        f(x).block_until_ready()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        f(x).block_until_ready()
        times.append(time.perf_counter() - t)
    return times


def progress(rank, path, op, nbytes, times):
    if rank == 0:
        print(f"  {path:9s} {op:14s} {nbytes:>10d} B  median {np.median(times) * 1e6:10.1f} us", file=sys.stderr,
              flush=True)


def write(rank, out, data):
    if rank == 0:
        with open(out, "w") as f:
            json.dump(data, f)


def main():
    path, out, sizes, scale = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3].split(",")], float(sys.argv[4])
    ops = sys.argv[5].split(",") if len(sys.argv) > 5 and sys.argv[5] else OPS
    if set(ops) - set(OPS):
        raise SystemExit(f"unknown collectives {sorted(set(ops) - set(OPS))} (known: {', '.join(OPS)})")
    if path == "jax-step":
        run_step(scale, out)
    elif path == "jax-step-one-rank":
        run_step_one_rank(scale, out)
    elif path.startswith("jax-"):
        run_jax(path, sizes, scale, out, ops)
    elif path == "mpi4py":
        run_mpi4py(sizes, scale, out)
    elif path == "mpi4jax":
        run_mpi4jax(sizes, scale, out)
    elif path in ("c", "c-wrapper"):
        run_c(sizes, scale, out, ops, wrapper_only=path == "c-wrapper")
    else:
        raise SystemExit(f"unknown path {path}")


if __name__ == "__main__":
    main()

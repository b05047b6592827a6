"""One rank of one launch of the scale bench (scale.py):

    mpiexec -n P python -m mpi_collectives.tools.bench.scale_worker PATH OUT_DIR ITERS_SCALE

PATH is "package" (initialize(), the node path as configured), "library"
(initialize() with MPI_COLLECTIVES_NODE_PATH=0 set by the driver: the MPI
library's own collectives under the same wrapper) or "gloo" (JAX's default,
set up as a gloo user would). Each rank writes OUT_DIR/rank-R.json: its
start-up's parts, the medians of its loops, what it holds (memory, threads,
descriptors, sockets, the node's /dev/shm), and, through the wrapper, the
counts of what one collective cost it (native/src/base/counts.h) and of the
package's reads of JAX's key-value store. Every result is checked exactly
against NumPy; a wrong one ends the launch with WRONG in its line.

The programs are what a one-rank-a-core job runs: a psum over a 1-D mesh of
every rank at 8 B and 1 MiB, a 2-D mesh's psums along each axis (one
communicator per axis group), and a step of ten small all-reduces in a row,
as NetKet's stochastic reconfiguration makes them."""
import json
import os
import statistics
import sys
import time

MAIN_AT = time.time()  # before any import of weight: the interpreter's start is measured from the launch

import numpy as np  # noqa: E402


class KeyValueCount:
    """JAX's distributed client, its key-value calls counted (the calls, and the rows a directory
    read returned): what the package's reads and writes cost the one coordinator."""

    def __init__(self, client, before=None):
        self._client, self.calls = client, (before.calls if before else {})

    def __getattr__(self, name):
        attr = getattr(self._client, name)
        if not name.startswith("key_value") and not name.startswith("blocking_key_value"):
            return attr

        def counted(*args, **kwargs):
            out = attr(*args, **kwargs)
            entry = self.calls.setdefault(name, [0, 0])
            entry[0] += 1
            entry[1] += len(out) if isinstance(out, list) else 1  # a directory read: its rows
            return out
        return counted


def count_key_value_calls():
    """Count the package's own calls of the key-value store: its two modules that reach jax.distributed's
    client (services/stall.py with liveness.py, services/peers.py) get it wrapped. JAX's own calls, and
    the client handed to jaxlib's C++ when the backend is made, stay untouched. Returns a function that
    gives {call: [calls, rows]} so far."""
    from ...services import peers, stall

    holder = {}

    def counted_client(real=stall._client):
        client = real()
        if client is None:
            return None
        if holder.get("real") is not client:
            holder.update(real=client, count=KeyValueCount(client, holder.get("count")))
        return holder["count"]

    stall._client = peers._client = counted_client
    return lambda: dict(holder["count"].calls) if "count" in holder else {}


def held() -> dict:
    """What this process holds now: memory, threads, descriptors, sockets."""
    status = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            status[key] = value.split()
    fds = os.listdir("/proc/self/fd")
    sockets = 0
    for fd in fds:
        try:
            sockets += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    # RSS counts the shared libraries' pages and the windows' in every rank that touched them; PSS
    # divides each shared page among its sharers, and private pages are this rank's alone.
    rollup = {}
    try:
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                key, _, value = line.partition(":")
                if value.strip().endswith("kB"):
                    rollup[key] = int(value.split()[0])
    except OSError:
        pass
    return {"rss_mb": int(status["VmRSS"][0]) / 1024, "peak_rss_mb": int(status["VmHWM"][0]) / 1024,
            "pss_mb": rollup.get("Pss", 0) / 1024,
            "private_mb": (rollup.get("Private_Clean", 0) + rollup.get("Private_Dirty", 0)) / 1024,
            "threads": int(status["Threads"][0]), "fds": len(fds), "sockets": sockets}


def shm_new(before_file: str) -> dict:
    """The /dev/shm files made since the driver listed them (before the launch): their count, their
    size and the memory they take (blocks: a window's file is sparse until written)."""
    try:
        with open(before_file) as f:
            before = set(json.load(f))
    except (OSError, ValueError):
        before = set()
    files, size, used = 0, 0, 0
    for name in os.listdir("/dev/shm"):
        if name in before:
            continue
        try:
            st = os.stat(os.path.join("/dev/shm", name))
        except OSError:
            continue
        files, size, used = files + 1, size + st.st_size, used + st.st_blocks * 512
    return {"files": files, "bytes": size, "used_bytes": used}


def timed(fn, calls: int) -> float:
    """The median seconds of a call of fn(), its result waited for, after two untimed calls."""
    from .user_loops import _timed

    return statistics.median(_timed(fn, calls))


def main():
    path, out_dir, scale = sys.argv[1], sys.argv[2], float(sys.argv[3])
    launched = float(os.environ["MPI_COLLECTIVES_BENCH_LAUNCHED"])
    t = time.time()
    from ..backends import start
    kv_calls = count_key_value_calls() if path != "gloo" else (lambda: {})
    imported = time.time()
    jax, rank, size = start("mpi" if path != "gloo" else "gloo", os.environ.get("MPI_COLLECTIVES_BENCH_COORDINATOR"))
    started = time.time()
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    from ...integration.jax_compat import process_local_array, shard_map
    from .inputs import rank_input

    def summed(count, members):
        """Every member's input summed, one at a time: the check's own memory stays one message's, not
        P messages' (inputs.expected stacks them: at 64 ranks, 64 MiB for a 1 MiB psum, which the
        package's kept freed memory then counted in every rank's private memory)."""
        total = np.zeros(count, np.float32)
        for r in members:
            total += rank_input(count, r)
        return total

    def wrong(what, got, want):
        raise SystemExit(f"mpi-collectives scale bench: WRONG result: {what} on rank {rank}/{size} ({path}): "
                         f"got {np.asarray(got).ravel()[:4]}, want {np.asarray(want).ravel()[:4]}")

    mesh = Mesh(np.array(jax.devices()), ("x",))
    psum = jax.jit(shard_map()(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P("x")))

    def local(count):
        return process_local_array(NamedSharding(mesh, P("x")), rank_input(count, rank)[None])

    first_x = local(2)
    got = np.asarray(psum(first_x).addressable_data(0))[0]
    if not np.array_equal(got, summed(2, range(size))):
        wrong("the first psum", got, summed(2, range(size)))
    first_done = time.time()
    record = {"rank": rank, "size": size, "path": path, "host": os.uname().nodename,
              "startup": {"interpreter": t - launched, "imports": imported - t, "initialize": started - imported,
                          "first_psum": first_done - started, "total": first_done - launched}}

    from ...base import mpi as native
    counting = path != "gloo"
    loops, costs = {}, {}
    small_calls = max(10, int(200 * scale / max(1, size / 8)))
    for nbytes, calls in ((8, small_calls), (1 << 20, max(5, small_calls // 10))):
        count = nbytes // 4
        x = local(count)
        want = summed(count, range(size))
        got = np.asarray(psum(x).addressable_data(0))[0]
        if not np.array_equal(got, want):
            wrong(f"psum of {nbytes} B", got, want)
        before = native.counts() if counting else None
        loops[f"psum_{nbytes}"] = timed(lambda: psum(x), calls)
        if counting:  # what one collective cost this rank: the loop's counts over its calls
            after = native.counts()
            costs[f"psum_{nbytes}"] = {k: (after[k] - before[k]) / (calls + 2) for k in after}

    # A 2-D mesh, rows x columns: psums along each axis run on one communicator per axis group.
    rows = 2 if size % 2 == 0 and size > 2 else 1
    mesh2 = Mesh(np.array(jax.devices()).reshape(rows, size // rows), ("r", "c"))
    for axis, groups in (("c", rows), ("r", size // rows)):
        f = jax.jit(shard_map()(lambda v, a=axis: jax.lax.psum(v, a), mesh=mesh2, in_specs=P(("r", "c")),
                                out_specs=P(("r", "c"))))
        x = process_local_array(NamedSharding(mesh2, P(("r", "c"))), rank_input(2, rank)[None])
        r_, c_ = divmod(rank, size // rows)
        members = [r_ * (size // rows) + c for c in range(size // rows)] if axis == "c" else \
            [r * (size // rows) + c_ for r in range(rows)]
        want = summed(2, members)
        got = np.asarray(f(x).addressable_data(0))[0]
        if not np.array_equal(got, want):
            wrong(f"the 2-D mesh's psum along {axis}", got, want)
        loops[f"mesh2d_{axis}_8"] = timed(lambda: f(x), max(10, small_calls // 2))

    # NetKet's stochastic reconfiguration: a step of small all-reduces in a row (means of the energy,
    # of the gradient's parts, of the S matrix's rows), each waited for by the next.
    def sr_step(v):
        for _ in range(10):
            v = jax.lax.psum(v, "x") / size + v
        return v

    sr = jax.jit(shard_map()(sr_step, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    x = local(16)
    want = rank_input(16, rank).astype(np.float64)
    mean = summed(16, range(size)).astype(np.float64) / size
    for _ in range(10):  # every rank's v moves by the same mean: exact in float32 for these integers' sums
        mean, want = mean * 2, want + mean
    got = np.asarray(sr(x).addressable_data(0))[0]
    if not np.allclose(got, want, rtol=1e-5):
        wrong("the SR step of ten psums", got, want)
    before = native.counts() if counting else None
    sr_calls = max(5, small_calls // 10)
    loops["sr_step_10x64B"] = timed(lambda: sr(x), sr_calls)
    if counting:
        after = native.counts()
        costs["sr_step_10x64B"] = {k: (after[k] - before[k]) / (sr_calls + 2) for k in after}

    record.update(loops=loops, costs=costs, held=held(), key_value=kv_calls())
    if counting:
        record["windows"] = native.node_windows()
    if rank == 0:
        record["shm"] = shm_new(os.environ.get("MPI_COLLECTIVES_BENCH_SHM_BEFORE", ""))
    with open(os.path.join(out_dir, f"rank-{rank}.json"), "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main()

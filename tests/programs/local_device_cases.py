"""What may go wrong with several CPU devices per process, one CASE per run
(2 processes; JAX_NUM_CPU_DEVICES=2 unless the case sets it):

  orders     the processes first use the two axes of a (process, device) grid in different orders
  prepared   as `orders`, after mpi_collectives.prepare(mesh): exact results
  threads    two Python threads dispatch collectives over the two axes at once
  subset     a program over one device of each process only (MPI_COLLECTIVES_DEVICES_TIMEOUT short)
  counts     rank 0 asks for 2 devices, the others for 3
  two-axes   independent psums over both axes of the grid in one jit, 10 times: exact
  rearranged a psum over the local axis of the grid, then of a grid whose second process's devices
             are swapped: process 0's group repeats (XLA splits nothing there), process 1's is new

Prints "PASS <case> rank R" when every result was exact; a problem the
wrapper detects ends the job (non-zero) with its message instead, and
"WRONG" marks a result that is not exact.
"""
import os
import sys
import threading

case = sys.argv[1]
if case == "counts":
    from launcher_env import launcher_rank_size
    os.environ["JAX_NUM_CPU_DEVICES"] = "2" if launcher_rank_size()[0] == 0 else "3"

import numpy as np  # noqa: E402

import mpi_collectives  # noqa: E402

info = mpi_collectives.initialize()
import jax  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from launcher_env import jax_compat  # noqa: E402

rank, size = info.rank, info.size
L = jax.local_device_count()
devices = np.array(sorted(jax.devices(), key=lambda d: (d.process_index, d.id)))
grid = Mesh(devices.reshape(size, L), ("p", "l"))
full = np.arange(size * L * 16, dtype=np.float32).reshape(size, L, 16) % 9


def check(name, got, want):
    if not np.array_equal(np.asarray(got), want):
        print(f"WRONG {name} rank {rank}: {np.asarray(got).ravel()[:8]} != {want.ravel()[:8]}", flush=True)
        sys.exit(3)


def axis_program(axis):
    sharding = NamedSharding(grid, P("p", "l"))
    x = jax.make_array_from_callback(full.shape, sharding, lambda index: full[index])
    f = jax.jit(jax_compat.shard_map()(lambda v: jax.lax.psum(v, axis), mesh=grid, in_specs=P("p", "l"),
                                       out_specs=P("p", "l")))
    want = np.broadcast_to(full.sum(0 if axis == "p" else 1, keepdims=True), full.shape)

    def run():
        for shard in f(x).addressable_shards:
            check(f"psum over {axis}", shard.data, want[shard.index])
    return run


if case in ("orders", "prepared"):
    if case == "prepared":
        mpi_collectives.prepare(grid)
    first, second = ("p", "l") if rank == 0 else ("l", "p")
    axis_program(first)()
    axis_program(second)()
elif case == "threads":
    errors = []

    def go(fn):
        try:
            fn()
        except BaseException as e:  # reported by the main thread
            errors.append(e)
    threads = [threading.Thread(target=go, args=(axis_program(a),)) for a in ("p", "l")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"rank {rank}: {errors[0]}")
elif case == "two-axes":
    sharding = NamedSharding(grid, P("p", "l"))
    for i in range(10):
        x = jax.make_array_from_callback(full.shape, sharding, lambda index: full[index] + i)
        f = jax.jit(jax_compat.shard_map()(lambda v: (jax.lax.psum(v, "p"), jax.lax.psum(v * 2, "l")), mesh=grid,
                                           in_specs=P("p", "l"), out_specs=(P("p", "l"), P("p", "l"))))
        a, b = f(x)
        want_a = np.broadcast_to((full + i).sum(0, keepdims=True), full.shape)
        want_b = np.broadcast_to(((full + i) * 2).sum(1, keepdims=True), full.shape)
        for shard in a.addressable_shards:
            check(f"psum over p, run {i}", shard.data, want_a[shard.index])
        for shard in b.addressable_shards:
            check(f"psum over l, run {i}", shard.data, want_b[shard.index])
elif case == "rearranged":
    swapped = Mesh(np.array([devices.reshape(size, L)[0], devices.reshape(size, L)[1][::-1]]), ("p", "l"))
    for mesh in (grid, swapped):
        sharding = NamedSharding(mesh, P("p", "l"))
        x = jax.make_array_from_callback(full.shape, sharding, lambda index: full[index])
        f = jax.jit(jax_compat.shard_map()(lambda v: jax.lax.psum(v, "l"), mesh=mesh, in_specs=P("p", "l"),
                                           out_specs=P("p", "l")))
        out = f(x)
        want = np.broadcast_to(full.sum(1, keepdims=True), full.shape)
        for shard in out.addressable_shards:
            check("psum over l", shard.data, want[shard.index])
elif case == "subset":
    firsts = Mesh(devices.reshape(size, L)[:, 0], ("x",))
    x = jax.make_array_from_callback((size, 4), NamedSharding(firsts, P("x")),
                                     lambda index: np.ones((size, 4), np.float32)[index])
    f = jax.jit(jax_compat.shard_map()(lambda v: jax.lax.psum(v, "x"), mesh=firsts, in_specs=P("x"),
                                       out_specs=P("x")))
    check("psum over one device of each process", f(x).addressable_data(0), np.full((1, 4), size, np.float32))
else:
    raise SystemExit(f"unknown case {case}")
print(f"PASS {case} rank {rank}", flush=True)

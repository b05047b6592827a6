"""Collectives whose communicators XLA creates off the main thread, one CASE per run.

  sweep        many programs (sizes, ops, 1-D and 2-D meshes, a large jit, lax.scan): exact results
  refusal      one program; run with MPI_COLLECTIVES_ANY_THREAD=0 to see XLA's refusal
  two-axes     independent collectives over both axes of a 2x2 mesh in one jit, REPEAT times (4 ranks)
  orders       ranks first use the two axes of a 2x2 mesh in different orders (4 ranks)
  threads      two Python threads dispatch collectives over different axes at once (4 ranks)
  prepared     as `orders`, after mpi_collectives.prepare(mesh): exact results
  two-devices  a psum over two CPU devices per process (XLA_FLAGS=--xla_force_host_platform_device_count=2),
               which initialize() reads: exact (device_groups.c)

Prints "PASS <case> rank R" when every result was exact; a problem the
wrapper detects ends the job (non-zero) with its message instead.
"""
import os
import sys
import threading

import numpy as np

import mpi_collectives

info = mpi_collectives.initialize()
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

case = sys.argv[1]
rank, size = info.rank, info.size
devices = np.array(jax.devices())


def local(shape, salt=0, dtype=np.float32):
    """This rank's block: integer-valued, so every reduction is exact."""
    return ((np.arange(int(np.prod(shape))).reshape(shape) * 7 + rank * 13 + salt) % 23).astype(dtype)


def block_of(r, shape, salt=0, dtype=np.float32):
    return ((np.arange(int(np.prod(shape))).reshape(shape) * 7 + r * 13 + salt) % 23).astype(dtype)


def check(name, got, expected):
    got = np.asarray(got)
    if not np.array_equal(got, expected):
        raise SystemExit(f"rank {rank}: WRONG {name}: got {got.ravel()[:4]} expected {np.asarray(expected).ravel()[:4]}")


def one_d_sweep():
    mesh = Mesh(devices, ("x",))
    sh = NamedSharding(mesh, P("x"))
    for n in (1, 1024, 1 << 16, 1 << 20):
        x = jax.make_array_from_process_local_data(sh, local((1, n), n)[None][0])
        every = np.stack([block_of(r, (1, n), n)[0] for r in range(size)])
        ops = {
            "psum": (lambda v: jax.lax.psum(v, "x"), P(), every.sum(0)[None]),
            "pmax": (lambda v: jax.lax.pmax(v, "x"), P(), every.max(0)[None]),
            "all_gather": (lambda v: jax.lax.all_gather(v, "x", tiled=True), P(), every),
        }
        for name, (fn, out, expected) in ops.items():
            f = jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=P("x"), out_specs=out, check_vma=False))
            check(f"{name} n={n}", f(x).addressable_data(0), expected)
    # The first collective of a large jit: hundreds of instructions before it.
    n = 1 << 14
    x = jax.make_array_from_process_local_data(sh, local((1, n), 5))

    def big(v):
        for i in range(150):
            v = v + (i % 3) - 1
        return jax.lax.psum(jnp.round(v), "x")
    every = np.stack([block_of(r, (1, n), 5)[0] for r in range(size)])
    ref = every.copy()
    for i in range(150):
        ref = ref + (i % 3) - 1
    f = jax.jit(jax.shard_map(big, mesh=mesh, in_specs=P("x"), out_specs=P()))
    check("large jit", f(x).addressable_data(0), ref.sum(0)[None])

    # Inside lax.scan: a psum per step.
    def scanned(v):
        def step(c, _):
            return c, jax.lax.psum(c, "x")
        return jax.lax.scan(step, v, None, length=4)[1]
    f = jax.jit(jax.shard_map(scanned, mesh=mesh, in_specs=P("x"), out_specs=P(None, "x")))
    got = np.asarray(f(x).addressable_data(0))
    check("scan", got, np.stack([every.sum(0)[None]] * 4))


def two_d_mesh():
    return Mesh(devices.reshape(2, size // 2), ("a", "b"))


def two_axes_program(mesh):
    sh = NamedSharding(mesh, P("a", "b"))
    x = jax.make_array_from_process_local_data(sh, local((1, 1, 256), 1))
    f = jax.jit(jax.shard_map(lambda v: (jax.lax.psum(v, "a"), jax.lax.psum(v * 2, "b")), mesh=mesh,
                              in_specs=P("a", "b"), out_specs=(P(None, "b"), P("a", None))))
    return x, f


def expected_two_axes(mesh):
    ids = np.vectorize(lambda d: d.process_index)(mesh.devices)
    ia, ib = np.argwhere(ids == rank)[0]
    over_a = sum(block_of(int(r), (1, 1, 256), 1) for r in ids[:, ib])
    over_b = sum(block_of(int(r), (1, 1, 256), 1) * 2 for r in ids[ia, :])
    return over_a, over_b


def axis_program(mesh, axis):
    sh = NamedSharding(mesh, P("a", "b"))
    x = jax.make_array_from_process_local_data(sh, local((1, 1, 64), 3))
    spec = P(None, "b") if axis == "a" else P("a", None)
    f = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, axis), mesh=mesh, in_specs=P("a", "b"), out_specs=spec))
    ids = np.vectorize(lambda d: d.process_index)(mesh.devices)
    ia, ib = np.argwhere(ids == rank)[0]
    members = ids[:, ib] if axis == "a" else ids[ia, :]
    return lambda: check(f"psum over {axis}", f(x).addressable_data(0),
                         sum(block_of(int(r), (1, 1, 64), 3) for r in members))


if case == "sweep":
    one_d_sweep()
    if size % 2 == 0 and size >= 4:
        mesh = two_d_mesh()
        x, f = two_axes_program(mesh)
        a, b = f(x)
        ea, eb = expected_two_axes(mesh)
        check("2-D psum over a", a.addressable_data(0), ea)
        check("2-D psum over b", b.addressable_data(0), eb)
elif case == "two-devices":  # run with XLA_FLAGS=--xla_force_host_platform_device_count=2
    mesh = Mesh(devices, ("x",))
    g = np.arange(len(devices) * 8, dtype=np.float32).reshape(len(devices), 8)
    x = jax.make_array_from_callback(g.shape, NamedSharding(mesh, P("x")), lambda idx: g[idx])
    f = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
    check("psum over 2 devices per process", f(x).addressable_data(0), g.sum(0)[None])
elif case == "refusal":
    mesh = Mesh(devices, ("x",))
    sh = NamedSharding(mesh, P("x"))
    x = jax.make_array_from_process_local_data(sh, local((1, 1024 * 1024)))
    f = jax.jit(jax.shard_map(lambda v: jax.lax.psum(jnp.round(jnp.sin(v) * 0), "x"), mesh=mesh,
                              in_specs=P("x"), out_specs=P()))
    check("psum after sin", f(x).addressable_data(0), np.zeros((1, 1024 * 1024), np.float32))
elif case == "two-axes":
    mesh = two_d_mesh()
    ea, eb = expected_two_axes(mesh)
    for i in range(int(os.environ.get("REPEAT", "20"))):
        x, f = two_axes_program(mesh)
        a, b = f(x)
        check(f"2-D psum over a, run {i}", a.addressable_data(0), ea)
        check(f"2-D psum over b, run {i}", b.addressable_data(0), eb)
elif case in ("orders", "prepared"):
    mesh = two_d_mesh()
    if case == "prepared":
        mpi_collectives.prepare(mesh)
    first, second = ("a", "b") if rank < size // 2 else ("b", "a")
    axis_program(mesh, first)()
    axis_program(mesh, second)()
elif case == "threads":
    mesh = two_d_mesh()
    runs = [axis_program(mesh, "a"), axis_program(mesh, "b")]
    errors = []

    def go(fn):
        try:
            fn()
        except BaseException as e:  # report in the main thread
            errors.append(e)
    threads = [threading.Thread(target=go, args=(fn,)) for fn in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"rank {rank}: {errors[0]}")
else:
    raise SystemExit(f"unknown case {case}")
print(f"PASS {case} rank {rank}", flush=True)

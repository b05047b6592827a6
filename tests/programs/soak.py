"""Soak: many mixed collectives of random kinds, sizes and dtypes (integer
sums past the type's maximum among them), every
result checked against NumPy. Prints one line per rank:
    SOAK rank R/N impl I: C collectives, W wrong, T s

    mpiexec -n 2 python soak.py --impl mpi --count 10000
    mpiexec -n 2 python soak.py --impl gloo --count 10000   # the same over JAX's default (needs a free port)

Every rank draws the same sequence of (collective, dtype, size) from one
seed and every rank's input from (seed, step, rank), so each rank can
compute every expected result alone.
"""
import argparse
import time

import numpy as np

from launcher_env import start  # (the package's start-up, without importing the package for gloo)

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.int16, np.uint16, np.int8, np.uint8]
SIZES = [1, 2, 3, 5, 8, 17, 64, 100, 1000, 4099, 65536]  # elements per rank and per part
OPS = ["psum", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute", "all_to_all"]


def rank_input(seed, step, rank, dtype, count):
    """Small values; on odd steps, integers just below their maximum, so that
    sums run past it and must wrap around as XLA's do (Open MPI's op/avx
    saturates 8- and 16-bit ones instead)."""
    rng = np.random.default_rng([seed, step, rank])
    if step % 2 and np.issubdtype(dtype, np.integer):
        return (np.iinfo(dtype).max - rng.integers(0, 101, count)).astype(dtype)
    low = 0 if np.issubdtype(dtype, np.unsignedinteger) else -50
    return rng.integers(low, low + 101, count).astype(dtype)


def expected(op, inputs, rank, n):
    """What rank `rank` must receive, from every rank's input (NumPy, same dtype: integer sums wrap alike)."""
    stack = np.stack(inputs)
    if op == "psum":
        return stack.sum(0, dtype=stack.dtype)
    if op == "pmax":
        return stack.max(0)
    if op == "pmin":
        return stack.min(0)
    if op == "all_gather":
        return stack.reshape(-1)
    if op == "psum_scatter":
        return stack.sum(0, dtype=stack.dtype).reshape(n, -1)[rank]
    if op == "ppermute":
        return stack[(rank - 1) % n]
    if op == "all_to_all":
        return stack.reshape(n, n, -1)[:, rank].reshape(-1)
    raise ValueError(op)


def programs(mesh, n):
    import jax
    from jax.sharding import PartitionSpec as P

    lax = jax.lax
    bodies = {
        "psum": lambda v: lax.psum(v, "x"),
        "pmax": lambda v: lax.pmax(v, "x"),
        "pmin": lambda v: lax.pmin(v, "x"),
        "all_gather": lambda v: lax.all_gather(v, "x", axis=1, tiled=True),
        "psum_scatter": lambda v: lax.psum_scatter(v, "x", scatter_dimension=1, tiled=True),
        "ppermute": lambda v: lax.ppermute(v, "x", [(i, (i + 1) % n) for i in range(n)]),
        "all_to_all": lambda v: lax.all_to_all(v, "x", 1, 1, tiled=True),
    }
    return {op: jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
            for op, body in bodies.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--impl", choices=["mpi", "gloo"], default="mpi")
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=20261123)
    args = parser.parse_args()
    _, rank, n = start(args.impl)
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    jax.config.update("jax_enable_x64", True)
    mesh = Mesh(np.array(jax.devices()), ("x",))
    sharding = NamedSharding(mesh, P("x"))
    compiled = programs(mesh, n)
    plan = np.random.default_rng(args.seed)
    wrong, begin = 0, time.perf_counter()
    for step in range(args.count):
        op, dtype = OPS[plan.integers(len(OPS))], DTYPES[plan.integers(len(DTYPES))]
        count = SIZES[plan.integers(len(SIZES))] * (n if op in ("psum_scatter", "all_to_all") else 1)
        inputs = [rank_input(args.seed, step, r, dtype, count) for r in range(n)]
        x = jax.make_array_from_process_local_data(sharding, inputs[rank][None])
        got = np.asarray(compiled[op](x).addressable_data(0))[0]
        want = expected(op, inputs, rank, n)
        if got.dtype != want.dtype or not np.array_equal(got, want):
            wrong += 1
            if wrong <= 5:
                print(f"SOAK WRONG rank {rank} step {step}: {op} {np.dtype(dtype).name}[{count}]", flush=True)
    seconds = time.perf_counter() - begin
    print(f"SOAK rank {rank}/{n} impl {args.impl}: {args.count} collectives, {wrong} wrong, {seconds:.1f} s", flush=True)
    raise SystemExit(1 if wrong else 0)


if __name__ == "__main__":
    main()

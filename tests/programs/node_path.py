"""Collectives through the node path (native/src/services/node/) and around it:
all-reduce (psum, pmax, pmin), all-gather, reduce-scatter (psum_scatter) and
all-to-all, 
every dtype the library reduces, sizes on both sides of its threshold and of
its chunks (512 KiB: a chunk, one element more, several and a part), and
several psums in one jit. Each result is compared exactly
with NumPy's (small integers: every sum is exact in every dtype), and each
rank prints the digest of all its results, so that the test can see every
rank got the same bits.

    node_path.py    prints "PASS node path rank R digest D"
"""
import hashlib

import numpy as np

import mpi_collectives

info = mpi_collectives.initialize()
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from launcher_env import jax_compat  # noqa: E402

mesh = Mesh(np.array(jax.devices()), ("x",))
n = len(jax.devices())
CHUNK = 512 * 1024
digest = hashlib.sha256()


def values(count, dtype, k):
    return ((np.arange(count) * 7 + 3 * k) % 11).astype(dtype)


def check(op, dtype, count):
    body = {"psum": lambda v: jax.lax.psum(v, "x"), "pmax": lambda v: jax.lax.pmax(v, "x"),
            "pmin": lambda v: jax.lax.pmin(v, "x")}[op]
    f = jax.jit(jax_compat.shard_map()(body, mesh=mesh, in_specs=P("x"), out_specs=P()))
    full = np.stack([values(count, dtype, k) for k in range(n)])
    x = jax.make_array_from_callback(full.shape, NamedSharding(mesh, P("x")), lambda index: full[index])
    got = np.asarray(f(x).addressable_data(0))[0]
    want = {"psum": full.sum(0, dtype=dtype), "pmax": full.max(0), "pmin": full.min(0)}[op]
    assert np.array_equal(got, want), (op, dtype, count)
    digest.update(got.tobytes())


dtypes = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.int16, np.complex64]
for dtype in dtypes:
    size = np.dtype(dtype).itemsize
    for count in (1000, 262144 // size, CHUNK // size, CHUNK // size + 1, (3 * CHUNK + 1000) // size):
        check("psum", dtype, count)


def check_gather(dtype, count):
    f = jax.jit(jax_compat.shard_map()(lambda v: jax.lax.all_gather(v, "x", tiled=True), mesh=mesh,
                                       in_specs=P("x"), out_specs=P(), check_vma=False))
    full = np.concatenate([values(count, dtype, k) for k in range(n)])
    x = jax.make_array_from_callback(full.shape, NamedSharding(mesh, P("x")), lambda index: full[index])
    got = np.asarray(f(x).addressable_data(0))
    assert np.array_equal(got, full), ("all_gather", dtype, count)
    digest.update(got.tobytes())


def check_scatter(dtype, count):
    """Each rank's input count * n elements; rank r's result the sum of part r over the ranks."""
    f = jax.jit(jax_compat.shard_map()(lambda v: jax.lax.psum_scatter(v, "x", scatter_dimension=1, tiled=True),
                                       mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    full = np.stack([values(count * n, dtype, k) for k in range(n)])
    x = jax.make_array_from_callback(full.shape, NamedSharding(mesh, P("x")), lambda index: full[index])
    want = full.sum(0, dtype=dtype).reshape(n, count)
    for shard in f(x).addressable_shards:  # each of this process's devices: its own part
        row = shard.index[0].start or 0
        assert np.array_equal(np.asarray(shard.data)[0], want[row]), ("psum_scatter", dtype, count, row)
    digest.update(want.tobytes())  # the same on every rank: each checked its own parts of it

def check_all_to_all(dtype, count):
    """Each rank's input n parts of count elements; rank r's result part r of every rank, in rank order."""
    f = jax.jit(jax_compat.shard_map()(lambda v: jax.lax.all_to_all(v, "x", 1, 1, tiled=True), mesh=mesh,
                                       in_specs=P("x"), out_specs=P("x")))
    full = np.stack([values(count * n, dtype, k) for k in range(n)])
    x = jax.make_array_from_callback(full.shape, NamedSharding(mesh, P("x")), lambda index: full[index])
    want = full.reshape(n, n, count).transpose(1, 0, 2).reshape(n, n * count)
    for shard in f(x).addressable_shards:
        row = shard.index[0].start or 0
        assert np.array_equal(np.asarray(shard.data)[0], want[row]), ("all_to_all", dtype, count, row)
    digest.update(want.tobytes())


for dtype in dtypes:
    size = np.dtype(dtype).itemsize
    for count in (1000, 262144 // size // n, CHUNK // size, CHUNK // size + 1, (3 * CHUNK + 1000) // size):
        check_gather(dtype, count)
        check_scatter(dtype, count)
        check_all_to_all(dtype, count)
for op in ("pmax", "pmin"):
    for dtype in (np.float32, np.int32):
        check(op, dtype, (2 * CHUNK + 12) // 4)

# Three gradients in one jit, as a training step's all-reduce: XLA makes one call each.
three = jax.jit(jax_compat.shard_map()(lambda *g: [jax.lax.psum(v, "x") for v in g], mesh=mesh,
                                       in_specs=P("x"), out_specs=P()))
parts = [np.stack([values(300000 + i, np.float32, k) for k in range(n)]) for i in range(3)]
xs = [jax.make_array_from_callback(p.shape, NamedSharding(mesh, P("x")), lambda index, p=p: p[index]) for p in parts]
for got, p in zip(three(*xs), parts):
    got = np.asarray(got.addressable_data(0))[0]
    assert np.array_equal(got, p.sum(0)), "three psums in one jit"
    digest.update(got.tobytes())
print(f"PASS node path rank {info.rank} digest {digest.hexdigest()[:16]}", flush=True)

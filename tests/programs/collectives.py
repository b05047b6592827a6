"""JAX CPU collectives over MPI, checked exactly against NumPy.

Run under a launcher, one CPU device per process:

    MPITRAMPOLINE_LIB=$(python -m mpi_collectives libpath) \
    MPI_COLLECTIVES_TEST_PORT=12345 mpiexec -n 4 python collectives.py

Every rank's local data is a deterministic function of (rank, shape, dtype,
salt), so every rank computes the expected *global* answer with NumPy and
checks its own shard of every result exactly (integer-valued data, so sums
are exact in every dtype).  Rank 0 prints "ok <name>" per check and
"ALL OK <count>" at the end; any mismatch raises AssertionError (non-zero
exit).
"""
import os
import sys
import time
import traceback

import numpy as np
import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_cpu_collectives_implementation", "mpi")

import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "programs"))
from launcher_env import jax_compat, launcher_rank_size  # noqa: E402  (the package's, without importing it)

shard_map, process_local_array = jax_compat.shard_map, jax_compat.process_local_array

RANK, SIZE = launcher_rank_size()
PORT = os.environ.get("MPI_COLLECTIVES_TEST_PORT", "12355")
T0 = time.time()

jax.distributed.initialize(coordinator_address=f"127.0.0.1:{PORT}", num_processes=SIZE, process_id=RANK)

assert jax.process_index() == RANK and jax.process_count() == SIZE, (jax.process_index(), jax.process_count())
DEVICES = jax.devices()
assert len(DEVICES) == SIZE and len(jax.local_devices()) == 1, (DEVICES, jax.local_devices())
# Mesh position i must be process i, so "rank" means the same thing to us and to XLA.
assert [d.process_index for d in DEVICES] == list(range(SIZE)), [d.process_index for d in DEVICES]
MESH = Mesh(np.array(DEVICES), ("x",))
SHARDED = NamedSharding(MESH, P("x"))
REPLICATED = NamedSharding(MESH, P())
N = SIZE

NUMERIC = [np.float32, np.float64, np.int32, np.int8, np.uint8, np.complex64, np.complex128]
ORDERED = [t for t in NUMERIC if not np.issubdtype(t, np.complexfloating)]  # max/min undefined for complex
SMALL = 1031  # odd prime elements per rank
BIG_BYTES = 1 << 20  # ~1 MiB per rank

checks = 0


def ok(name):
    global checks
    checks += 1
    if RANK == 0:
        print(f"ok {name}", flush=True)


def local_data(rank, shape, dtype, salt=0, span=30):
    """Deterministic integer-valued data for `rank`.

    Values lie in [-span, span] (in [0, 2*span] for uint8); with the default
    span and at most 4 ranks every sum fits int8/uint8 and is exact in every
    float type.
    """
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    i = np.arange(count, dtype=np.int64)
    base = (i * 7 + rank * 13 + salt * 5) % (2 * span + 1) - span
    if dtype == np.bool_:
        out = (i * 5 + rank * 3 + salt) % 3 == 0
    elif dtype == np.uint8:
        out = (base + span).astype(dtype)
    elif np.issubdtype(dtype, np.complexfloating):
        imag = (i * 3 + rank * 11 + salt * 2) % (span + 11) - (span + 11) // 2
        out = base.astype(dtype) + 1j * imag.astype(dtype)
    else:
        out = base.astype(dtype)
    return out.reshape(shape)


def all_local(shape, dtype, salt=0, span=30):
    return [local_data(r, shape, dtype, salt, span) for r in range(N)]


def global_array(local):
    """Global array, sharded over "x" along axis 0, from this rank's block."""
    return process_local_array(SHARDED, local)


def fetch(arr):
    """This process's (only) shard of a result, as NumPy."""
    shards = arr.addressable_shards
    assert len(shards) == 1, shards
    return np.asarray(shards[0].data)


def check(name, got, want):
    got = np.asarray(got)
    want = np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
        bad = np.argwhere(got != want)[:5] if got.shape == want.shape else "shape differs"
        raise AssertionError(
            f"rank {RANK}/{N}: {name}: MISMATCH\n"
            f"  got  dtype={got.dtype} shape={got.shape} {got.ravel()[:8]}\n"
            f"  want dtype={want.dtype} shape={want.shape} {want.ravel()[:8]}\n"
            f"  first differing indices: {bad}"
        )
    ok(name)


def shard_map_jit(fn, n_in, n_out):
    return jax.jit(shard_map()(fn, mesh=MESH, in_specs=(P("x"),) * n_in, out_specs=(P("x"),) * n_out))


# ---------------------------------------------------------------- shard_map
# One compiled program per dtype holding every collective, so that the
# number of compilations (the dominant cost) stays small.

def run_shard_map_checks(dtype):
    dt = np.dtype(dtype)
    tag = dt.name
    big = max(BIG_BYTES // dt.itemsize, 1)
    ordered = dtype in ORDERED

    # Local shapes per input (shard_map hands each rank its own block).
    shapes = {
        "one": (1,),
        "small": (SMALL,),
        "big": (big,),
        "scatter": (N * 7, 3),      # psum_scatter: dim 0 splits into N chunks of 7
        "scatter1": (N,),          # psum_scatter with 1 element per chunk
        "a2a": (2 * N, 5),         # tiled all_to_all split 0 -> concat 1
        "a2a_untiled": (3, N),     # untiled all_to_all: split axis == N
    }
    names = list(shapes)
    locals_ = {k: all_local(s, dt, salt=j) for j, (k, s) in enumerate(shapes.items())}

    def body(one, small, big, scatter, scatter1, a2a, a2a_untiled):
        psum = lambda v: jax.lax.psum(v, "x")
        out = [psum(one), psum(small), psum(big)]
        if ordered:
            out += [jax.lax.pmax(one, "x"), jax.lax.pmax(small, "x"),
                    jax.lax.pmin(one, "x"), jax.lax.pmin(small, "x"),
                    jax.lax.pmax(big, "x")]
        out += [
            jax.lax.all_gather(one, "x", tiled=True),
            jax.lax.all_gather(small, "x", tiled=True),
            jax.lax.all_gather(small, "x", tiled=False)[None],   # stacked: (1, N, SMALL) locally
            jax.lax.psum_scatter(scatter, "x", scatter_dimension=0, tiled=True),
            jax.lax.psum_scatter(scatter1, "x", scatter_dimension=0, tiled=True),
            jax.lax.ppermute(one, "x", perm=[(i, (i + 1) % N) for i in range(N)]),
            jax.lax.ppermute(small, "x", perm=[(i, (i + 1) % N) for i in range(N)]),
            jax.lax.ppermute(big, "x", perm=[(i, (i + 1) % N) for i in range(N)]),
            jax.lax.all_to_all(a2a, "x", split_axis=0, concat_axis=1, tiled=True),
            jax.lax.all_to_all(a2a_untiled, "x", split_axis=1, concat_axis=0, tiled=False),
        ]
        return tuple(out)

    n_out = 3 + (5 if ordered else 0) + 10
    f = shard_map_jit(body, len(names), n_out)
    res = [fetch(r) for r in f(*(global_array(locals_[k][RANK]) for k in names))]
    res = iter(res)

    def total(k):
        return np.sum(np.stack(locals_[k]), axis=0, dtype=dt)

    check(f"psum {tag} n=1", next(res), total("one"))
    check(f"psum {tag} n={SMALL}", next(res), total("small"))
    check(f"psum {tag} n={big} ({big * dt.itemsize} B)", next(res), total("big"))
    if ordered:
        check(f"pmax {tag} n=1", next(res), np.max(np.stack(locals_["one"]), axis=0))
        check(f"pmax {tag} n={SMALL}", next(res), np.max(np.stack(locals_["small"]), axis=0))
        check(f"pmin {tag} n=1", next(res), np.min(np.stack(locals_["one"]), axis=0))
        check(f"pmin {tag} n={SMALL}", next(res), np.min(np.stack(locals_["small"]), axis=0))
        check(f"pmax {tag} n={big}", next(res), np.max(np.stack(locals_["big"]), axis=0))
    check(f"all_gather tiled {tag} n=1", next(res), np.concatenate(locals_["one"]))
    check(f"all_gather tiled {tag} n={SMALL}", next(res), np.concatenate(locals_["small"]))
    check(f"all_gather stacked {tag} n={SMALL}", next(res), np.stack(locals_["small"])[None])
    check(f"psum_scatter {tag} 7x3/rank", next(res), total("scatter")[RANK * 7:(RANK + 1) * 7])
    check(f"psum_scatter {tag} 1/rank", next(res), total("scatter1")[RANK:RANK + 1])
    src = (RANK - 1) % N
    check(f"ppermute ring {tag} n=1", next(res), locals_["one"][src])
    check(f"ppermute ring {tag} n={SMALL}", next(res), locals_["small"][src])
    check(f"ppermute ring {tag} n={big}", next(res), locals_["big"][src])
    # tiled: rank RANK gets chunk RANK (along axis 0) of every rank j, concatenated along axis 1 in j order
    want = np.concatenate([blk[RANK * 2:(RANK + 1) * 2] for blk in locals_["a2a"]], axis=1)
    check(f"all_to_all tiled split0/concat1 {tag}", next(res), want)
    # untiled: axis 1 (size N) removed, new axis of size N inserted at 0 indexed by source rank
    want = np.stack([blk[:, RANK] for blk in locals_["a2a_untiled"]], axis=0)
    check(f"all_to_all untiled split1/concat0 {tag}", next(res), want)
    assert next(res, None) is None


def run_isolated_checks(dtype):
    """XLA combines the same-kind all-reduces above into one variadic
    all-reduce; here a 1-element psum and a 7-element pmin (or all_gather for
    complex) are the only reductions of their kind in the program."""
    dt = np.dtype(dtype)
    tag = dt.name
    ordered = dtype in ORDERED
    one, seven = all_local((1,), dt, salt=21), all_local((7,), dt, salt=22)

    def body(a, b):
        return (jax.lax.psum(a, "x"),
                jax.lax.pmin(b, "x") if ordered else jax.lax.all_gather(b, "x", tiled=True))

    got_one, got_seven = (fetch(r) for r in shard_map_jit(body, 2, 2)(global_array(one[RANK]), global_array(seven[RANK])))
    check(f"psum alone {tag} n=1", got_one, np.sum(np.stack(one), axis=0, dtype=dt))
    if ordered:
        check(f"pmin alone {tag} n=7", got_seven, np.min(np.stack(seven), axis=0))
    else:
        check(f"all_gather alone {tag} n=7", got_seven, np.concatenate(seven))


def run_bool_all_gather_checks():
    shapes = {"one": (1,), "small": (SMALL,), "big": (BIG_BYTES,)}
    names = list(shapes)
    locals_ = {k: all_local(s, np.bool_, salt=j) for j, (k, s) in enumerate(shapes.items())}

    def body(one, small, big):
        return (jax.lax.all_gather(one, "x", tiled=True),
                jax.lax.all_gather(small, "x", tiled=True),
                jax.lax.all_gather(small, "x", tiled=False)[None],
                jax.lax.all_gather(big, "x", tiled=True))

    f = shard_map_jit(body, 3, 4)
    res = iter([fetch(r) for r in f(*(global_array(locals_[k][RANK]) for k in names))])
    check("all_gather tiled bool n=1", next(res), np.concatenate(locals_["one"]))
    check(f"all_gather tiled bool n={SMALL}", next(res), np.concatenate(locals_["small"]))
    check(f"all_gather stacked bool n={SMALL}", next(res), np.stack(locals_["small"])[None])
    check(f"all_gather tiled bool n={BIG_BYTES}", next(res), np.concatenate(locals_["big"]))


# ------------------------------------------------------------ plain jax.jit
# No shard_map: XLA's SPMD partitioner inserts the collectives itself.

def run_global_jit_checks(dtype):
    dt = np.dtype(dtype)
    tag = dt.name
    rows, cols = 3, 5
    # int8: keep every sum/product (<= 4*rows*cols terms) inside int8 range.
    blocks = all_local((rows, cols), dt, salt=11, span=2 if dt.itemsize == 1 else 30)
    full = np.concatenate(blocks)                      # (N*rows, cols), the global array
    x = global_array(blocks[RANK])

    def fn(x):
        return (jnp.sum(x, dtype=x.dtype),               # all-reduce
                x @ x.T,                                 # rows sharded -> all-gather
                x.T @ x,                                 # contracting dim sharded -> all-reduce
                jnp.max(x, axis=0) if dtype in ORDERED else jnp.sum(x, axis=0))

    f = jax.jit(fn, out_shardings=REPLICATED)
    got = [fetch(r) for r in f(x)]
    check(f"jit sum(global) {tag}", got[0], np.sum(full, dtype=dt))
    check(f"jit x@x.T {tag}", got[1], full @ full.T)
    check(f"jit x.T@x {tag}", got[2], full.T @ full)
    if dtype in ORDERED:
        check(f"jit max(global, axis=0) {tag}", got[3], np.max(full, axis=0))
    else:
        check(f"jit sum(global, axis=0) {tag}", got[3], np.sum(full, axis=0, dtype=dt))


def check_wrapper_loaded():
    """Guard against passing on some other collectives backend: the library
    MPItrampoline was told to load must be mapped into this process."""
    lib = os.environ.get("MPITRAMPOLINE_LIB")
    if not lib or not os.path.exists("/proc/self/maps"):
        return
    want = os.path.realpath(lib)
    with open("/proc/self/maps") as maps:
        mapped = {line.split()[-1] for line in maps if "/" in line}
    if not any(os.path.exists(m) and os.path.realpath(m) == want for m in mapped):
        raise AssertionError(f"rank {RANK}: MPITRAMPOLINE_LIB={lib} is not loaded after running collectives")
    ok("collectives went through MPITRAMPOLINE_LIB")


def main():
    only = set(sys.argv[1:])  # optional dtype names, for debugging one dtype
    for dtype in NUMERIC:
        if not only or np.dtype(dtype).name in only:
            run_shard_map_checks(dtype)
            run_isolated_checks(dtype)
    if not only or "bool" in only:
        run_bool_all_gather_checks()
    for dtype in (np.float32, np.float64, np.int32, np.int8, np.complex64):
        if not only or np.dtype(dtype).name in only:
            run_global_jit_checks(dtype)

    check_wrapper_loaded()

    # Every rank got here with the same number of passed checks.
    f = jax.jit(shard_map()(lambda c: jax.lax.psum(c, "x"), mesh=MESH, in_specs=P("x"), out_specs=P()))
    total = int(fetch(f(global_array(np.array([checks], np.int32))))[0])
    if total != checks * N:
        raise AssertionError(f"rank {RANK}: ranks disagree on check count: psum={total}, mine={checks}, N={N}")
    if RANK == 0:
        print(f"ALL OK {checks} ({N} ranks, {time.time() - T0:.1f}s)", flush=True)


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        # Exit at once: a normal exit would wait in jax.distributed's shutdown
        # barrier for ranks that are themselves blocked in the next collective,
        # turning one failed check into a hang.  An abrupt non-zero exit makes
        # the launcher tear the job down.
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)

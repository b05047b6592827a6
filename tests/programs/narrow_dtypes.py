"""Every collective on float16 and JAX's float8 and float4 types, in shard_map and pmap,
over MPI (argv[1] == "mpi", through mpi_collectives.initialize()) or over
JAX's default gloo (argv[1] == "gloo": jax.distributed from the launcher's
rank/size and MPI_COLLECTIVES_TEST_PORT, no mpi_collectives at all).

    python narrow_dtypes.py mpi|gloo OUT_DIR [--probe] [dtype ...]

Two inputs per dtype, both of N elements per rank: small integers, whose
results are checked here against NumPy wherever NumPy's (float64) result is
exactly representable in the dtype, and random values in [-2, 2] (whose
rounding the launching test compares with gloo's). Every result's bytes go
to OUT_DIR/<backend>-rank<R>.npz, keyed "api/dtype/input/collective", with
NumPy's float64 result under "exact/dtype/input/collective".
Prints "DONE rank R: C cases, E exact checks" at the end; with --probe a
failing (api, dtype) prints "FAIL api dtype: first line of the error" and
the program goes on (to see what a backend refuses).
"""
import os
import sys

backend, out_dir = sys.argv[1], sys.argv[2]
probe = "--probe" in sys.argv
wanted = [a for a in sys.argv[3:] if not a.startswith("--")]
from launcher_env import jax_compat, start  # noqa: E402  (the package's jax_compat, without importing it)

jax, rank, size = start(backend)

import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402


jnp, lax = jax.numpy, jax.lax
N = 24  # per rank: divisible by 2, 3 and 4 ranks, twice
NARROW = [name for name in dir(jnp) if name.startswith(("float8_", "float4_"))]
DTYPES = wanted or ["float16"] + sorted(NARROW)
n, r = size, rank
shift = [(i, (i + 1) % n) for i in range(n)]


def collectives(v, axis):
    """v: this rank's (N,) values -> every collective's result, by name."""
    return {
        "psum": lax.psum(v, axis),
        "pmax": lax.pmax(v, axis),
        "pmin": lax.pmin(v, axis),
        "all_gather": lax.all_gather(v, axis),
        "all_gather_tiled": lax.all_gather(v, axis, tiled=True),
        "psum_scatter": lax.psum_scatter(v.reshape(n, -1), axis, scatter_dimension=0),
        "psum_scatter_tiled": lax.psum_scatter(v, axis, tiled=True),
        "ppermute": lax.ppermute(v, axis, shift),
        "all_to_all": lax.all_to_all(v.reshape(n, -1), axis, 0, 0, tiled=True),
    }


def expected(full):
    """NumPy's results in float64 from the global inputs (n, N), for this rank."""
    f = full.astype(np.float64)
    return {
        "psum": f.sum(0), "pmax": f.max(0), "pmin": f.min(0),
        "all_gather": f, "all_gather_tiled": f.reshape(-1),
        "psum_scatter": f.reshape(n, n, -1).sum(0)[r],
        "psum_scatter_tiled": f.sum(0).reshape(n, -1)[r],
        "ppermute": f[(r - 1) % n],
        "all_to_all": f.reshape(n, n, -1)[:, r].reshape(n, -1),
        "psum_2axes": f.sum(0),
    }


devices = np.array(jax.devices())
mesh = Mesh(devices, ("x",))
mesh2 = Mesh(devices.reshape(n // 2, 2) if n % 2 == 0 else devices.reshape(n, 1), ("a", "b"))


def run_shard_map(x_full):
    def body(v):
        return {k: o[None] for k, o in collectives(v[0], "x").items()}
    f = jax.jit(jax_compat.shard_map()(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    x = jax_compat.process_local_array(NamedSharding(mesh, P("x")), x_full[r:r + 1])
    out = {k: np.asarray(o.addressable_data(0))[0] for k, o in f(x).items()}
    g = jax.jit(jax_compat.shard_map()(lambda v: lax.psum(v, ("a", "b")), mesh=mesh2, in_specs=P(("a", "b")),
                              out_specs=P(("a", "b"))))
    x2 = jax_compat.process_local_array(NamedSharding(mesh2, P(("a", "b"))), x_full[r:r + 1])
    out["psum_2axes"] = np.asarray(g(x2).addressable_data(0))[0]
    return out


def run_pmap(x_full):
    out = jax.pmap(lambda v: collectives(v, "i"), axis_name="i")(x_full[r:r + 1])
    return {k: np.asarray(o)[0] for k, o in out.items()}


rng = np.random.default_rng(1234)
results, exact_checks, cases = {}, 0, 0
for name in DTYPES:
    dtype = np.dtype(getattr(jnp, name))
    small = (np.arange(n * N).reshape(n, N) % 5 - 2).astype(np.float64)
    if name == "float8_e8m0fnu":  # no zero, no negatives, no sign: powers of two only
        small = 2.0 ** (np.arange(n * N).reshape(n, N) % 4 - 1)
    rand = rng.uniform(-2, 2, (n, N))
    if name == "float8_e8m0fnu":
        rand = np.abs(rand) + 0.01
    for input_name, values in (("small", small), ("random", rand)):
        full = values.astype(dtype)
        for api, fn in (("shard_map", run_shard_map), ("pmap", run_pmap)):
            try:
                got = fn(full)
            except Exception as e:
                if not probe:
                    raise
                print(f"FAIL {api} {name}: {type(e).__name__}: {str(e).strip().splitlines()[0][:200]}",
                      flush=True)
                continue
            for coll, value in got.items():
                cases += 1
                assert value.dtype == dtype, (api, name, coll, value.dtype)
                results[f"{api}/{name}/{input_name}/{coll}"] = np.frombuffer(value.tobytes(), np.uint8)
            for coll, want in expected(full).items():
                results[f"exact/{name}/{input_name}/{coll}"] = want  # float64, for measuring rounding
            if input_name != "small":
                continue
            for coll, want in expected(full).items():
                if coll not in got:
                    continue
                representable = want.astype(dtype).astype(np.float64)
                if not np.array_equal(representable, want):
                    continue  # not exact in this dtype: compared with gloo by the launching test
                value = got[coll]
                assert value.shape == want.shape, (api, name, coll, value.shape, want.shape)
                assert value.tobytes() == want.astype(dtype).tobytes(), (
                    f"{api} {name} {coll} rank {r}: {value.astype(np.float64).ravel().tolist()} "
                    f"!= {want.ravel().tolist()}")
                exact_checks += 1

os.makedirs(out_dir, exist_ok=True)
np.savez(os.path.join(out_dir, f"{backend}-rank{r}.npz"), **results)
print(f"DONE rank {r}: {cases} cases, {exact_checks} exact checks", flush=True)

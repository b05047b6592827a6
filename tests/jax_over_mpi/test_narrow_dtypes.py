"""float16, float8 and float4 collectives over MPI, which XLA refuses by
itself (mpi_collectives/integration/narrow_dtypes.py), against gloo in the same run:
tests/programs/narrow_dtypes.py runs every collective in shard_map and pmap,
once over MPI and once over gloo, at 2, 3 and 4 ranks, and checks itself
against NumPy where the result is exact in the dtype (small integers).

Here: every result of the small-integer input is bit-equal to gloo's, and so
is every result of the random input that needs no arithmetic (max, min,
gathers, ppermute, all_to_all). Sums of random values: bit-equal to gloo's
at 2 ranks; at 3 and 4 they may differ in the last place (we round once, from
float32; gloo rounds every partial sum to the dtype), and ours must be no
further from the exact (float64) sum than gloo's on average. The measured
comparison is printed (pytest -s) and in the README.

Launches: the full matrix (every narrow dtype at 2 ranks; float16,
float8_e4m3fn and float8_e5m2 at 3 and 4) on the mpich family; a 2-rank run
of float16 and float8_e4m3fn on the others.
"""
import os
import sys

import numpy as np
import pytest

from helpers import HERE, ONCE, PROGRAMS, explain, free_port, mpirun

from mpi_collectives.integration.jax_compat import installed_jax, version_tuple  # noqa: E402

# Its answers can differ between jax versions: scripts/test.sh runs it on each jax it tests.
pytestmark = pytest.mark.version_dependent

# jax 0.4's XLA cannot reduce float8 over gloo (its CPU compiler emits float
# arithmetic on i8: "Floating-point arithmetic operators only work with
# floating-point types"), so there float8 is checked against NumPy alone.
GLOO_REDUCES_FLOAT8 = version_tuple(installed_jax()) >= (0, 6, 0)

PROGRAM = os.path.join(PROGRAMS, "narrow_dtypes.py")
SUMS = ("psum", "psum_scatter", "psum_scatter_tiled", "psum_2axes")

if not GLOO_REDUCES_FLOAT8:
    MATRIX = [(2, ["float16"]), (3, ["float16"])]
elif ONCE:
    # [] = every narrow dtype jnp has; 4 ranks float16 only (each dtype took about 12 s there: CI
    # time); 3 ranks: the older jaxes' run
    MATRIX = [(2, []), (4, ["float16"])]
else:
    MATRIX = [(2, ["float16", "float8_e4m3fn"])]


def launch(nranks, backend, out, dtypes, jax_env):
    env = dict(jax_env)
    if backend == "gloo":
        env.update(MPITRAMPOLINE_LIB=None, JAX_CPU_COLLECTIVES_IMPLEMENTATION=None)
    else:
        env.pop("MPITRAMPOLINE_LIB")  # initialize() sets everything up, as a user's program would
    proc = mpirun(nranks, [sys.executable, PROGRAM, backend, str(out), *dtypes], env=env, timeout=240)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.count("DONE rank") == nranks, explain(proc)
    return proc


def dtype_of(name):
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, name) if name != "float16" else np.float16)


def compare(out, nranks):
    """-> (differences that must not be, rounding stats of the sums of random values)."""
    wrong, stats = [], {}
    for r in range(nranks):
        ours, gloo = np.load(out / f"mpi-rank{r}.npz"), np.load(out / f"gloo-rank{r}.npz")
        assert set(ours) == set(gloo), sorted(set(ours) ^ set(gloo))
        for key in ours:
            if key.startswith("exact/"):
                continue
            api, name, input_name, coll = key.split("/")
            if ours[key].tobytes() == gloo[key].tobytes():
                same = True
            else:
                same = False
                if input_name == "small" or coll not in SUMS or nranks == 2:
                    wrong.append(f"rank {r} {key}")
            if input_name == "random" and coll in SUMS:
                dtype = dtype_of(name)
                exact = ours[f"exact/{name}/{input_name}/{coll}"].ravel()
                a = ours[key].view(dtype).astype(np.float64)
                b = gloo[key].view(dtype).astype(np.float64)
                s = stats.setdefault(name, dict(elements=0, differ=0, err_ours=0.0, err_gloo=0.0))
                s["elements"] += a.size
                s["differ"] += 0 if same else int(np.sum(a != b))
                s["err_ours"] += float(np.abs(a - exact).sum())
                s["err_gloo"] += float(np.abs(b - exact).sum())
    return wrong, stats


@pytest.mark.jax
@pytest.mark.parametrize("nranks,dtypes", MATRIX, ids=[f"{n}ranks" for n, _ in MATRIX])
def test_narrow_dtypes_over_mpi_match_gloo(nranks, dtypes, jax_env, tmp_path):
    launch(nranks, "mpi", tmp_path, dtypes, jax_env)
    launch(nranks, "gloo", tmp_path, dtypes, dict(jax_env, MPI_COLLECTIVES_TEST_PORT=str(free_port())))
    wrong, stats = compare(tmp_path, nranks)
    assert not wrong, f"{len(wrong)} results differ from gloo's: {wrong[:20]}"
    print(f"\n{nranks} ranks, sums of random values in [-2, 2]: elements, differing from gloo, "
          "mean |error| against the exact sum (ours, gloo's)")
    for name, s in sorted(stats.items()):
        n = s["elements"]
        print(f"  {name:22s} {n:6d} {s['differ']:5d}  {s['err_ours'] / n:.3e}  {s['err_gloo'] / n:.3e}")
        assert s["err_ours"] <= s["err_gloo"] * 1.05 + 1e-12, (name, s)


@pytest.mark.jax
@pytest.mark.skipif(GLOO_REDUCES_FLOAT8, reason="this jax's gloo reduces float8: the comparison with gloo "
                    "above covers it")
def test_float8_over_mpi_is_exact_where_gloo_cannot_reduce_it(jax_env, tmp_path):
    """The program checks every small-integer result against NumPy itself."""
    proc = launch(2, "mpi", tmp_path, ["float8_e4m3fn", "float8_e5m2"], jax_env)
    assert "exact checks" in proc.stdout and " 0 exact checks" not in proc.stdout, explain(proc)


ONE_PROCESS = r"""
import jax, numpy as np
from mpi_collectives.integration import narrow_dtypes
jax.config.update("jax_cpu_collectives_implementation", "mpi")
first = narrow_dtypes.install()
assert narrow_dtypes.install() == first, "a second install() changed something"
assert {"psum", "pmax", "pmin", "reduce_scatter", "all_gather"} <= set(first), first
f = jax.pmap(lambda v: (jax.lax.psum(v, "i"), jax.lax.all_gather(v, "i")), axis_name="i")
x = np.arange(4, dtype=np.float16)[None]
text = f.lower(x).as_text()
assert "f32" not in text and "ui16" not in text, text  # one process: JAX's own lowering
out = f(x)
assert np.asarray(out[0]).tolist() == [[0, 1, 2, 3]], out
print("ONE PROCESS OK", first)
"""


@pytest.mark.jax
def test_one_process_keeps_jaxs_own_lowering(jax_env):
    """On one process (even with the mpi setting) the rules leave the program as JAX lowers it."""
    env = dict(jax_env)
    env.pop("MPITRAMPOLINE_LIB")
    from helpers import run
    proc = run([sys.executable, "-c", ONE_PROCESS], env=env, timeout=120, cwd=HERE)
    assert proc.returncode == 0 and "ONE PROCESS OK" in proc.stdout, explain(proc)

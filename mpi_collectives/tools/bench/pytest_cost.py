"""What the pytest plugin costs a test (docs/testing.md), measured as a suite runs it.

    python -m mpi_collectives.tools.bench.pytest_cost [--ranks 2] [--tests 300] [--rounds 3] [--out FILE]

Three suites of `--tests` tests each, under mpiexec: one of empty tests, one whose every test runs a
scalar psum over every device (a jitted function made once), both with a conftest that calls
mpi_collectives.initialize(); and one that never imports JAX (no such conftest: pytest-mpi's own
kind of suite). Each runs with the plugin and with `-p no:mpi_collectives`, the launches
interleaved round by round. The cost a test is the difference of the test loops' times (pytest's
runtestloop, timed on rank 0) divided by the tests; the launch's wall time shows that the suite
starts MPI and JAX once, not once a test, and, for the suite without JAX, what the plugin's start
adds to a launch (issue 72's bound: 0.5 s). Medians over the rounds, with each round's numbers.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from .. import launching

CONFTEST = '''
import json, os, time
import pytest
import mpi_collectives

INFO = mpi_collectives.initialize()  # the plugin's start already did it where the plugin is on


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session):
    start = time.perf_counter()
    yield
    if INFO.rank == 0:
        with open(os.environ["PYTEST_COST_OUT"], "w") as f:
            json.dump({"loop_s": time.perf_counter() - start, "tests": len(session.items)}, f)
'''

# The suite without JAX: the loop timed as above, rank 0 found from the launcher's variables (importing
# the package here would add its import to the launch without the plugin too).
NO_JAX_CONFTEST = '''
import json, os, time
import pytest

RANK = next((os.environ[k] for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")
             if os.environ.get(k)), "0")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session):
    start = time.perf_counter()
    yield
    if RANK == "0":
        with open(os.environ["PYTEST_COST_OUT"], "w") as f:
            json.dump({"loop_s": time.perf_counter() - start, "tests": len(session.items),
                       "jax_imported": "jax" in __import__("sys").modules}, f)
'''

EMPTY = '''
import pytest


@pytest.mark.parametrize("i", range({tests}))
def test_empty(i):
    pass
'''

PSUM = '''
import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

MESH = jax.sharding.Mesh(np.array(jax.devices()), ("d",))
try:
    from jax import shard_map
except ImportError:
    from jax.experimental.shard_map import shard_map
F = jax.jit(shard_map(lambda a: jax.lax.psum(a, "d"), mesh=MESH, in_specs=P("d"), out_specs=P()))
X = jax.make_array_from_process_local_data(NamedSharding(MESH, P("d")),
                                           np.ones((jax.local_device_count(),), np.float32))


@pytest.mark.parametrize("i", range({tests}))
def test_psum(i):
    assert float(np.asarray(F(X).addressable_data(0))[0]) == jax.device_count()
'''


def _launch(suite, plugin, ranks, mpiexec, timeout):
    folder = os.path.dirname(suite)  # each suite's folder holds its own ini and conftest
    out = os.path.join(folder, "loop.json")
    if os.path.exists(out):
        os.remove(out)
    args = [mpiexec, "-n", str(ranks), sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "-c", os.path.join(folder, "pytest.ini"), suite]
    if not plugin:
        args[7:7] = ["-p", "no:mpi_collectives"]
    env = launching.environment({"PYTEST_COST_OUT": out, "MPI_COLLECTIVES_LAYOUT_NOTE": "0"})
    start = time.perf_counter()
    proc = launching.run(args, env=env, timeout=timeout, cwd=folder)
    wall = time.perf_counter() - start
    if proc.returncode != 0 or not os.path.exists(out):
        raise RuntimeError(f"the suite {os.path.basename(suite)} (plugin {'on' if plugin else 'off'}) failed, "
                           f"exit {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    with open(out) as f:
        return dict(json.load(f), wall_s=wall)


def measure(ranks: int, tests: int, rounds: int, mpiexec: str, timeout: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "pytest.ini"), "w") as f:
            f.write("[pytest]\n")
        with open(os.path.join(folder, "conftest.py"), "w") as f:
            f.write(CONFTEST)
        no_jax = os.path.join(folder, "no_jax")
        os.mkdir(no_jax)
        with open(os.path.join(no_jax, "pytest.ini"), "w") as f:
            f.write("[pytest]\n")
        with open(os.path.join(no_jax, "conftest.py"), "w") as f:
            f.write(NO_JAX_CONFTEST)
        suites = {}
        for name, text, where in (("empty", EMPTY, folder), ("psum", PSUM, folder), ("no JAX", EMPTY, no_jax)):
            path = os.path.join(where, f"test_{name.replace(' ', '_')}.py")
            with open(path, "w") as f:
                f.write(text.replace("{tests}", str(tests)))
            suites[name] = path
        runs = {(name, plugin): [] for name in suites for plugin in (True, False)}
        for _ in range(rounds):
            for name, path in suites.items():
                for plugin in (True, False):
                    runs[(name, plugin)].append(_launch(path, plugin, ranks, mpiexec, timeout))
    result = {"ranks": ranks, "tests": tests, "rounds": rounds, "suites": {}}
    for name in suites:
        on, off = runs[(name, True)], runs[(name, False)]
        per_test = [(a["loop_s"] - b["loop_s"]) / tests * 1e3 for a, b in zip(on, off)]
        result["suites"][name] = {
            "plugin_ms_per_test": statistics.median(per_test), "rounds_ms_per_test": per_test,
            "loop_s_with": statistics.median(r["loop_s"] for r in on),
            "loop_s_without": statistics.median(r["loop_s"] for r in off),
            "wall_s_with": statistics.median(r["wall_s"] for r in on),
            "wall_s_without": statistics.median(r["wall_s"] for r in off),
            "launch_s_added": statistics.median(a["wall_s"] - b["wall_s"] for a, b in zip(on, off)),
            "jax_imported_with": any(r.get("jax_imported", True) for r in on)}
    return result


def table(result: dict, where: str) -> str:
    lines = [f"The pytest plugin's cost a test: {result['ranks']} ranks, {result['tests']} tests a suite, "
             f"median of {result['rounds']} interleaved rounds{', ' + where if where else ''}",
             "", "| suite | test loop with the plugin | without | cost a test (target <= 5 ms) | each round | "
             "launch with | without | launch added |", "|---|---|---|---|---|---|---|---|"]
    for name, s in result["suites"].items():
        rounds = ", ".join(f"{v:.2f}" for v in s["rounds_ms_per_test"])
        lines.append(f"| {name} | {s['loop_s_with']:.2f} s | {s['loop_s_without']:.2f} s | "
                     f"{s['plugin_ms_per_test']:.2f} ms | {rounds} | {s['wall_s_with']:.1f} s | "
                     f"{s['wall_s_without']:.1f} s | {s['launch_s_added']:.2f} s |")
    if "no JAX" in result["suites"]:
        s = result["suites"]["no JAX"]
        lines += ["", f"The suite without JAX: the plugin added {s['launch_s_added']:.2f} s to its launch (bound: 0.5 s); "
                      f"JAX {'was' if s['jax_imported_with'] else 'was not'} imported in it with the plugin."]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mpiexec", default=launching.mpiexec_path())
    parser.add_argument("--timeout", type=int, default=600, help="seconds for each launch")
    parser.add_argument("--where", default="", help="where it was measured (cores, MPI), for the table")
    parser.add_argument("--out", default=None, help="a JSON file of the results")
    args = parser.parse_args(argv)
    result = measure(args.ranks, args.tests, args.rounds, args.mpiexec, args.timeout)
    result["where"] = args.where
    print(table(result, args.where))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

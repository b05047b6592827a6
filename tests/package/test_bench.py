"""The benchmark in smoke mode (two sizes, few iterations, every path, every
result checked): it runs, and its JSON holds every path and target. Not a
speed test: numbers from a shared 2-core machine judge nothing."""
import json
import os
import re
import sys

import pytest

from mpi_collectives.bench import summary

from helpers import EXPECTED_FAMILY, HERE, ROOT, explain, mpirun, run  # noqa: F401

# Its answers can differ between jax versions: scripts/test.sh runs it on each jax it tests.
pytestmark = pytest.mark.version_dependent

OPS = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ppermute"]


def test_hard_coded_mpich_handles_match_the_table():
    from mpi_collectives.bench.c_loop import MPICH_HANDLES, OPENMPI_SYMBOLS

    def table(family):
        rows = (line.split() for line in open(os.path.join(ROOT, "native", "abi", f"{family}_constants.txt")))
        return {r[0]: r[2] for r in rows if len(r) == 3}

    mpich, openmpi = table("mpich"), table("openmpi")
    for name, value in MPICH_HANDLES.items():
        assert int(mpich[name], 0) == value, name
    for name, symbol in OPENMPI_SYMBOLS.items():
        assert openmpi[name] == "&" + symbol, name


@pytest.mark.jax
def test_bench_smoke(tmp_path):
    """On every family: Open MPI's NULL MPI_STATUS_IGNORE once broke only the C loop there,
    and only a full benchmark on Open MPI found it."""
    name = "impi" if "impi" in sys.prefix else EXPECTED_FAMILY
    out, png = tmp_path / f"{name}.json", tmp_path / f"{name}.png"
    env = {"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}
    proc = run([sys.executable, "-m", "mpi_collectives", "bench", "--smoke", "--out", str(out), "--plot", str(png)],
               env=env, cwd=HERE, timeout=900)
    assert proc.returncode == 0, explain(proc)
    data = json.loads(out.read_text())
    paths = {"jax-mpi", "jax-mpi-unchecked", "jax-call", "jax-gloo", "mpi4py", "C via wrapper", "C direct"}
    if EXPECTED_FAMILY == "standard":  # no mpi4py build and no hard-coded handles for the standard ABI
        paths -= {"mpi4py", "C direct"}
    assert set(data["results"]) == paths, data["results"].keys()
    for path in paths:
        for op in OPS:
            assert set(data["results"][path][op]) == {"8", "65536"}, (path, op)
    # (the smoke sizes, 8 B and 64 KiB, leave out the all-reduce target at 1 and 16 MiB)
    judged = {"every", "at", "host", "start-up", "agreement"} | ({"the"} if "C direct" in paths else set())  # wrapper vs direct
    assert {t["target"].split(" ")[0] for t in data["targets"]} == judged, data["targets"]
    assert re.search(r"host broadcast_one_to_all: ours \d+ us, multihost_utils \d+ us", proc.stdout), explain(proc)
    assert png.stat().st_size > 10000

    # The summary: docs/benchmarks/README.md and the README's block, from the same JSON.
    readme = tmp_path / "README.md.in"
    readme.write_text("before\n<!-- bench-results:begin -->\nold\n<!-- bench-results:end -->\nafter\n")
    proc = run([sys.executable, "-m", "mpi_collectives.bench.summary", str(tmp_path), "--readme", str(readme)],
               cwd=HERE, timeout=60)
    assert proc.returncode == 0, explain(proc)
    block = readme.read_text()
    assert block.startswith("before\n<!-- bench-results:begin -->\nMeasured on ") and block.endswith("after\n"), block
    assert "old" not in block and "start-up" in block, block
    assert f"| {summary.NAMES[name]} | JAX over MPI (ours) |" in block, block
    full = (tmp_path / "README.md").read_text()
    assert f"![{name}]({name}.png)" in full and full.count("median us per call") == len(OPS), full



def test_committed_results_are_current():
    """docs/benchmarks/README.md and docs/benchmarks.md's results block are what summary makes
    of the committed JSON files: the numbers shown are the numbers measured."""
    folder = os.path.join(ROOT, "docs", "benchmarks")
    runs = summary.load(folder)
    assert set(runs) == {"mpich", "impi", "openmpi"}, runs.keys()
    with open(os.path.join(folder, "README.md")) as f:
        assert f.read() == summary.full(runs), "docs/benchmarks/README.md is stale: run mpi_collectives.bench.summary"
    with open(os.path.join(ROOT, "docs", "benchmarks.md")) as f:
        page = f.read()
    block = "<!-- bench-results:begin -->\n" + summary.short(runs, "benchmarks") + "\n<!-- bench-results:end -->"
    assert block in page, ("docs/benchmarks.md's results block is stale: "
                           "run mpi_collectives.bench.summary docs/benchmarks --readme docs/benchmarks.md")
    for name in runs:
        assert os.path.getsize(os.path.join(folder, f"{name}.png")) > 10000, name

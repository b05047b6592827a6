"""The benchmark in smoke mode (two sizes, few iterations, every path, every
result checked): it runs, and its JSON holds every path and target. Not a
speed test: numbers from a shared 2-core machine judge nothing."""
import json
import os
import re
import sys

import pytest

from conftest import EXPECTED_FAMILY, HERE, ROOT, explain, run  # noqa: F401

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
@pytest.mark.skipif(EXPECTED_FAMILY != "mpich" or "impi" in sys.prefix,
                    reason="one smoke run is enough; it runs on the mpich configuration")
def test_bench_smoke(tmp_path):
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    env = {"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}
    proc = run([sys.executable, "-m", "mpi_collectives", "bench", "--smoke", "--out", str(out), "--plot", str(png)],
               env=env, cwd=HERE, timeout=900)
    assert proc.returncode == 0, explain(proc)
    data = json.loads(out.read_text())
    for path in ("jax-mpi", "jax-call", "jax-gloo", "mpi4py", "C via wrapper", "C direct"):
        for op in OPS:
            assert set(data["results"][path][op]) == {"8", "65536"}, (path, op)
    assert {t["target"].split(" ")[0] for t in data["targets"]} >= {"the", "ours", "at", "host", "start-up"}
    assert re.search(r"host broadcast_one_to_all: ours \d+ us, multihost_utils \d+ us", proc.stdout), explain(proc)
    assert png.stat().st_size > 10000

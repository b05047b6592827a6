"""The benchmark in smoke mode (two sizes, few iterations, every path, every
result checked): it runs, and its JSON holds every path and target. Not a
speed test: numbers from a shared 2-core machine judge nothing."""
import importlib.util
import json
import os
import re
import sys

import pytest

from mpi_collectives.tools.bench import summary
from mpi_collectives.tools.bench.run import NODE_PATH_OPS

from helpers import EXPECTED_FAMILY, HERE, ROOT, TEST_CONFIG, explain, extended, mpirun, run  # noqa: F401

# Its answers can differ between jax versions: scripts/test.sh runs it on each jax it tests.
pytestmark = pytest.mark.version_dependent

OPS = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ppermute"]
MPI4JAX_OPS = ["all-reduce", "all-gather", "all-to-all", "ppermute"]  # (mpi4jax has no reduce-scatter)


def test_hard_coded_mpich_handles_match_the_table():
    from mpi_collectives.tools.bench.c_loop import MPICH_HANDLES, OPENMPI_SYMBOLS

    def table(family):
        rows = (line.split() for line in open(os.path.join(ROOT, "native", "abi", f"{family}_constants.txt")))
        return {r[0]: r[2] for r in rows if len(r) == 3}

    mpich, openmpi = table("mpich"), table("openmpi")
    for name, value in MPICH_HANDLES.items():
        assert int(mpich[name], 0) == value, name
    for name, symbol in OPENMPI_SYMBOLS.items():
        assert openmpi[name] == "&" + symbol, name


@extended  # (114 s: every path of the bench; its parts' tests below run in CI)
@pytest.mark.jax
def test_bench_smoke(tmp_path):
    """On every family: Open MPI's NULL MPI_STATUS_IGNORE once broke only the C loop there,
    and only a full benchmark on Open MPI found it."""
    if TEST_CONFIG == "impi":
        pytest.skip("Intel MPI has MPICH's ABI: the C loop's handles and statuses are those the mpich "
                    "configuration runs, and the other paths are JAX's and mpi4py's (CI time)")
    if TEST_CONFIG == "standard":
        pytest.skip("the standard ABI's library is MPICH's, whose paths the mpich configuration runs; the C "
                    "loop reaches it through the wrapper's exports, which tests/native runs in this "
                    "configuration, and it has no mpi4py or direct C path (CI time: 79 s on 2026-11-29)")
    name = EXPECTED_FAMILY
    out, png = tmp_path / f"{name}.json", tmp_path / f"{name}.png"
    env = {"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}
    proc = run([sys.executable, "-m", "mpi_collectives", "bench", "--smoke", "--out", str(out), "--plot", str(png)],
               env=env, cwd=HERE, timeout=900)
    assert proc.returncode == 0, explain(proc)
    data = json.loads(out.read_text())
    paths = {"jax-mpi", "jax-mpi-unchecked", "jax-mpi-library", "jax-call", "jax-gloo", "mpi4py", "C via wrapper",
             "C direct",
             "memory floor", "gradient floor", "step memory floor"}
    if EXPECTED_FAMILY == "standard":  # no mpi4py build and no hard-coded handles for the standard ABI
        paths -= {"mpi4py", "C direct"}
    # mpi4jax beside us where scripts/setup_beside.sh installed it (the mpich configuration), else one line
    if importlib.util.find_spec("mpi4jax") is not None and EXPECTED_FAMILY != "standard":
        paths.add("mpi4jax")
    else:
        assert "mpi-collectives bench: no mpi4jax path: " in proc.stderr, explain(proc)
    assert set(data["results"]) == paths, data["results"].keys()
    for path in paths - {"gradient floor", "step memory floor"}:
        for op in {"mpi4jax": MPI4JAX_OPS, "jax-mpi-library": NODE_PATH_OPS}.get(path, OPS):
            assert set(data["results"][path][op]) == {"8", "65536"}, (path, op)
    # The step's gradient all-reduce in C, as XLA calls it: one smoke gradient (256 x 256 float32).
    # The fully sharded step's all-gathers and reduce-scatters the same way, and their memory floor.
    one = {str(4 * 256 * 256)}
    assert {op: set(v) for op, v in data["results"]["gradient floor"].items()} == \
        {"all-reduce": one, "all-gather": one, "reduce-scatter": one}, data["results"]["gradient floor"]
    assert {op: set(v) for op, v in data["results"]["step memory floor"].items()} == {"copy": one}
    # (the smoke sizes, 8 B and 64 KiB, leave out the all-reduce target at 1 and 16 MiB)
    judged = {"every", "at", "host", "start-up", "agreement", "the"}  # "the": wrapper vs direct, the psum loop
    if importlib.util.find_spec("netket") is not None:
        judged.add("NetKet's")  # its VMC iteration against gloo's
    assert {t["target"].split(" ")[0] for t in data["targets"]} == judged, data["targets"]
    assert re.search(r"host broadcast_one_to_all: ours \d+ us, multihost_utils \d+ us", proc.stdout), explain(proc)
    # What users see: the psum loop with its result kept, and a training step with its parts, both ways.
    for path in ("jax-mpi", "jax-gloo"):
        loops = data["user_loops"][path]
        assert set(loops["psum-kept"]) == {"65536"}, loops.keys()
        assert set(loops["train-step"]) == {"params", "step", "step-out-in", "local", "gradients", "step-fsdp",
                                            "fsdp-all-gather", "fsdp-reduce-scatter"}, loops
        assert loops["train-step"]["params"] == 3 * 256 * 256
    for row in ("step (weights [in, out], as flax stores them)", "step (weights [out, in])",
                "its compute alone (one device)", "its gradient psum alone", "C floor of that psum",
                "step minus compute minus psum", "step (fsdp)", "its 3 all-gathers alone",
                "its 3 reduce-scatters alone"):
        assert re.search(rf"^{re.escape(row)} +-?\d+\.\d", proc.stdout, re.M), explain(proc)  # (the last can be < 0)
    assert re.search(r"^ +65536 +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+$", proc.stdout, re.M), explain(proc)
    # The same step as one rank with every CPU, on the 2 ranks' global batch (docs/layout.md)
    one = data["user_loops"]["one-rank"]
    assert one["rows"] == 2 * 32 and one["cpus"] == len(os.sched_getaffinity(0)) and len(one["step"]) >= 3, one
    for row in ("step (weights [in, out])", "step (weights [out, in])"):
        assert re.search(rf"^{re.escape(row)} +\d+\.\d +\d+\.\d +\d+\.\d\d$", proc.stdout, re.M), explain(proc)
    assert re.search(r"^splitting the node into 2 ranks (pays for this step|costs this step \d+\.\d\dx) ",
                     proc.stdout, re.M), explain(proc)
    assert any(t["target"].startswith("the psum loop as a training step writes it") for t in data["targets"])
    assert png.stat().st_size > 10000
    # The VMC iteration in plain JAX (monte_carlo.plain) over us, over gloo and as one rank: every chain
    # draws from its own global index's key, so every rank count samples the same chains, and the energies
    # agree to float32's rounding of the sums (a lost or doubled rank's part moves them by percents).
    plain = {key: data["user_loops"][key]["vmc-plain"] for key in ("jax-mpi", "jax-gloo", "one-rank")}
    for key, vmc in plain.items():
        assert len(vmc["iteration"]) == 3 and vmc["chains"] == 16 and vmc["samples"] == 1008, (key, vmc)
        assert vmc["params"] == 440 and 0.5 < vmc["acceptance"] <= 1, (key, vmc)
        assert max(abs(a / b - 1) for a, b in zip(vmc["energies"], plain["jax-mpi"]["energies"])) <= 1e-4, \
            (key, vmc["energies"], plain["jax-mpi"]["energies"])
    assert re.search(r"^variational Monte Carlo in plain JAX \(1008 samples from 16 chains, .*RBM of 440 float32 "
                     r"parameters", proc.stdout, re.M), explain(proc)
    if importlib.util.find_spec("netket") is not None:  # (the mpich configuration: scripts/setup_beside.sh)
        # NetKet's VMC iteration over us, over gloo and as one rank: the same seeds draw the same
        # samples, so the energies agree to the sums' rounding (a lost or doubled rank's part moves
        # them by percents).
        runs = {key: data["user_loops"][key]["vmc"] for key in ("jax-mpi", "jax-gloo", "one-rank")}
        ours = runs["jax-mpi"]["energies"]
        for key, vmc in runs.items():
            assert len(vmc["iteration"]) == 3 and vmc["chains"] == 16 and vmc["samples"] == 1008, (key, vmc)
            assert max(abs(a / b - 1) for a, b in zip(vmc["energies"], ours)) <= 1e-9, (key, vmc["energies"], ours)
        for row in ("ours", "gloo", "1 rank, "):
            assert re.search(rf"^{re.escape(row)}.* +\d+\.\d +\d+\.\d\d +\d\.\de[+-]\d\d$", proc.stdout, re.M), \
                explain(proc)
        assert any(t["target"] == "NetKet's VMC iteration at least 4x faster than over gloo" for t in data["targets"])

    # The summary: docs/benchmarks/README.md and the README's block, from the same JSON.
    readme = tmp_path / "README.md.in"
    readme.write_text("before\n<!-- bench-results:begin -->\nold\n<!-- bench-results:end -->\nafter\n")
    proc = run([sys.executable, "-m", "mpi_collectives.tools.bench.summary", str(tmp_path), "--readme", str(readme)],
               cwd=HERE, timeout=60)
    assert proc.returncode == 0, explain(proc)
    block = readme.read_text()
    assert block.startswith("before\n<!-- bench-results:begin -->\nMeasured on ") and block.endswith("after\n"), block
    assert "old" not in block and "start-up" in block, block
    assert f"| {summary.NAMES[name]} | JAX over MPI (ours) |" in block, block
    full = (tmp_path / "README.md").read_text()
    assert f"![{name}]({name}.png)" in full and full.count("median us per call") == len(OPS) + 1, full  # and the psum loop users write



@pytest.mark.parametrize("folder, block, families", [
    ("benchmarks", "bench-results", {"mpich", "impi", "openmpi"}),
    ("benchmarks/across-hosts", "bench-hosts-results", {"mpich", "impi", "openmpi"}),
    ("benchmarks/user-loops", "bench-user-results", {"mpich"}),
    ("benchmarks/beside-xla", "bench-xla-results", {"debian-openmpi"})])
def test_committed_results_are_current(folder, block, families):
    """docs/benchmarks/README.md, docs/benchmarks/across-hosts/README.md and their blocks in
    docs/benchmarks.md are what summary makes of the committed JSON files: the numbers shown are
    the numbers measured."""
    link, folder = folder, os.path.join(ROOT, "docs", folder)
    runs = summary.load(folder)
    assert set(runs) == families, runs.keys()
    with open(os.path.join(folder, "README.md")) as f:
        assert f.read() == summary.full(runs), f"{folder}/README.md is stale: run mpi_collectives.tools.bench.summary"
    with open(os.path.join(ROOT, "docs", "benchmarks.md")) as f:
        page = f.read()
    text = f"<!-- {block}:begin -->\n" + summary.short(runs, link) + f"\n<!-- {block}:end -->"
    assert text in page, (f"docs/benchmarks.md's {block} block is stale: "
                          f"run mpi_collectives.tools.bench.summary {folder} --readme docs/benchmarks.md --block {block}")
    for name in runs:
        assert os.path.getsize(os.path.join(folder, f"{name}.png")) > 10000, name


def test_targets_across_hosts_are_judged_from_the_numbers():
    """Ranks on two hosts get issue 32's targets, each judged from the medians given."""
    from mpi_collectives.tools.bench.report import targets

    def result(us_by_size):
        return {"all-reduce": {str(n): [us * 1e-6] for n, us in us_by_size.items()}}

    MiB = 1 << 20
    data = {"hosts": 2, "sizes": [8, MiB, 16 * MiB], "results": {
        "jax-mpi": result({8: 14.0, MiB: 500.0, 16 * MiB: 12000.0}),
        "jax-mpi-unchecked": result({8: 12.0, MiB: 490.0, 16 * MiB: 12000.0}),
        "C direct": result({8: 10.0, MiB: 400.0, 16 * MiB: 10000.0}),
        "jax-gloo": result({8: 200.0, MiB: 900.0, 16 * MiB: 25000.0})}}
    got = {t: (met, what) for t, met, what in targets(data)}
    assert got["at 8 B the checked psum within 1.25x of the unchecked"] == (True, "1.17x (14.0 against 12.0 us)")
    assert got["psum within 1.3x of the C floor at 1 MiB and 16 MiB"][0] is True
    assert got["psum at least 5x faster than gloo at 8 B"][0] is True
    assert got["psum at least 2x faster than gloo from 1 MiB"] == (False, "1.8x at 1048576 B, 2.1x at 16777216 B")


def test_several_rank_counts_in_one_run():
    from mpi_collectives.tools.bench.run import parse, suffixed
    assert parse(["--ranks", "2,4,8,16"]).ranks == [2, 4, 8, 16]
    assert suffixed("out/bench.json", 8, [2, 8]) == "out/bench-8ranks.json"
    assert suffixed("bench.png", 2, [2]) == "bench.png"
    proc = run([sys.executable, "-m", "mpi_collectives", "bench", "--ranks", "2,x"], cwd=HERE)
    assert proc.returncode == 2 and "argument --ranks: '2,x' is not a count of ranks or a list like 2,4,8,16" in \
        proc.stderr, explain(proc)


def test_user_targets_are_judged_from_the_numbers():
    from mpi_collectives.tools.bench.report import user_targets
    r = {"jax-call": {"all-reduce": {"16777216": [0.002]}}, "C direct": {"all-reduce": {"16777216": [0.005]}}}
    step = lambda ms: {"params": 3 * 2048 * 2048, **{k: [ms[k] / 1e3] for k in ms}}  # noqa: E731
    data = {"ranks": 8, "results": r, "user_loops": {
        "jax-mpi": {"psum-kept": {"16777216": [0.0084]},
                    "train-step": step({"step": 100, "step-out-in": 60, "local": 30, "gradients": 18})},
        "jax-gloo": {"psum-kept": {"16777216": [0.02]},
                     "train-step": step({"step": 160, "step-out-in": 120, "local": 30, "gradients": 60})}}}
    got = {t: (met, what) for t, met, what in user_targets(data)}
    assert got == {
        "the psum loop as a training step writes it within 1.3x of JAX's call cost plus the C floor from 64 KiB":
            (True, "1.20x at 16777216 B"),
        "a data-parallel training step at least 1.5x faster than over gloo (8 ranks and more)":
            (True, "100.0 against gloo's 160.0 ms (1.60x)"),
        "the training step's all-reduce within 1.15x of its C floor":
            (False, "18.0 ms against 15.0 ms, 3 x C's one call (1.20x)")}
    data["ranks"] = 4
    assert len(user_targets(data)) == 2  # the step against gloo is judged from 8 ranks
    # A run that measured the floor as XLA calls it (worker.gradient_floor): three calls on their own buffers.
    r["gradient floor"] = {"all-reduce": {"16777216": [0.0165, 0.017, 0.0175]}}
    got = {t: (met, what) for t, met, what in user_targets(data)}
    assert got["the training step's all-reduce within 1.15x of its C floor"] == (
        True, "18.0 ms against 17.0 ms, C's 3 calls on their own buffers (1.06x)")



def test_targets_beside_xla_own_mpi_path_are_judged_from_the_numbers():
    """Issue 61's targets where a run measured XLA's own MPI collectives (bench --mpiwrapper)."""
    from mpi_collectives.tools.bench.report import monte_carlo_lines, xla_targets

    KiB = 1024
    us = lambda by_size: {"all-reduce": {str(n): [t * 1e-6] for n, t in by_size.items()}}  # noqa: E731
    vmc = lambda ms, energies: {"iteration": [ms / 1e3] * 3, "energies": energies, "chains": 16,  # noqa: E731
                                "samples": 1008, "devices": 2, "netket": "3.23.0"}
    data = {"ranks": 2, "sizes": [8, 64 * KiB, 256 * KiB, 1024 * KiB], "results": {
        "jax-mpi": us({8: 7.14, 64 * KiB: 40.0, 256 * KiB: 100.0, 1024 * KiB: 190.0}),
        "jax-xla-mpi": us({8: 6.8, 64 * KiB: 41.0, 256 * KiB: 99.0, 1024 * KiB: 267.0})},
        "user_loops": {"jax-mpi": {"vmc": vmc(20.0, [-20.0, -21.0])},
                       "jax-xla-mpi": {"vmc": vmc(21.0, [-20.0, -21.0])},
                       "jax-gloo": {"vmc": vmc(70.0, [-20.0, -21.0 * (1 + 2e-3)])},
                       "one-rank": {"cpus": 2, "vmc": vmc(31.0, [-20.0, -21.0])}}}
    got = {t: (met, what) for t, met, what in xla_targets(data)}
    assert got == {
        "psum (agreement check on) within 5% of XLA's own MPI path from 8 B to 64 KiB":
            (True, "1.05x at 8 B, 0.98x at 65536 B"),
        "psum (agreement check on) no slower than XLA's own MPI path from 256 KiB":
            (False, "1.01x at 262144 B, 0.71x at 1048576 B"),
        "NetKet's VMC iteration no slower than over XLA's own MPI path (at most 1.02x)":
            (True, "20.0 against 21.0 ms (0.95x)"),
        "NetKet's VMC iteration at least 4x faster than over gloo": (False, "20.0 against gloo's 70.0 ms (3.5x)")}
    text = "\n".join(monte_carlo_lines(data))
    assert "gloo                          70.0    3.50         2.0e-03" in text, text
    assert "1 rank, 2 CPUs                31.0    1.55         0.0e+00" in text, text


def test_an_mpiwrapper_of_another_mpi_is_refused_in_one_sentence(tmp_path):
    """XLA's own path needs an MPIwrapper built for the MPI the bench runs: another one is named
    before any launch, with the fix."""
    from mpi_collectives.base import mpi
    from mpi_collectives.tools.bench.run import SONAMES, linked_libmpi

    family = mpi.family()
    other = "libmpi.so.40" if SONAMES.get(family) == "libmpi.so.12" else "libmpi.so.12"
    fake = tmp_path / "libmpiwrapper.so"
    fake.write_bytes(b"\x7fELF\0\0" + other.encode() + b"\0libc.so.6\0")
    assert linked_libmpi(str(fake)) == other
    proc = run([sys.executable, "-m", "mpi_collectives", "bench", "--smoke", "--mpiwrapper", str(fake),
                "--out", str(tmp_path / "b.json")], cwd=HERE, timeout=120)
    assert proc.returncode == 1, explain(proc)
    assert f"the MPIwrapper {fake} was built against {other}, and this run's MPI is" in proc.stderr, explain(proc)
    assert "Fix: run the bench over the MPI it was built for" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "b.json").exists()
    proc = run([sys.executable, "-m", "mpi_collectives", "bench", "--mpiwrapper", str(tmp_path / "none.so")],
               cwd=HERE, timeout=120)
    assert proc.returncode == 2 and "none.so is not a file" in proc.stderr, explain(proc)

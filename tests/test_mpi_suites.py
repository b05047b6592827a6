"""Launch the pytest-mpi suites (tests/mpi_suites/) as
`mpiexec -n N python -m pytest --with-mpi`, under a timeout, and require
every rank's pytest to pass every test.

Inside, pytest-timeout's thread method ends a rank whose test hangs with
os._exit, which makes the launcher end the job; the outer timeout is the
last resort. The standard-ABI configuration has no mpi4py, which pytest-mpi
needs, so there the same suites run with the plugin off.
"""
import json
import os
import sys

import pytest

from conftest import EXPECTED_FAMILY, HERE, explain, mpirun

SUITES = os.path.join(HERE, "mpi_suites")
PER_TEST_TIMEOUT = 300


def run_suite(nranks, files, jax_env, timeout, reports):
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEs",
            "-o", f"timeout={PER_TEST_TIMEOUT}", "-o", "timeout_method=thread"]
    args += ["-p", "no:pytest_mpi"] if EXPECTED_FAMILY == "standard" else ["--with-mpi"]
    env = dict(jax_env, MPI_COLLECTIVES_IN_SUITE="1", MPI_COLLECTIVES_SUITE_REPORTS=str(reports))
    env.pop("MPITRAMPOLINE_LIB")  # initialize() sets everything up, as a user's program would
    return mpirun(nranks, args + [os.path.join(SUITES, f) for f in files], env=env, timeout=timeout)


def check_every_rank_passed(proc, nranks, reports, expect_skipped=0):
    """Every rank ran the same tests and all passed (a rank that died writes no report)."""
    assert proc.returncode == 0, explain(proc)
    found = sorted(p.name for p in reports.iterdir())
    assert found == [f"rank-{r}.json" for r in range(nranks)], f"reports: {found}\n" + explain(proc)
    counts = [json.loads((reports / name).read_text()) for name in found]
    assert all(c == counts[0] for c in counts), f"ranks disagree: {counts}\n" + explain(proc)
    assert counts[0]["failed"] == counts[0]["error"] == 0 and counts[0]["passed"] > 0, explain(proc)
    return counts[0]


ALL = ["test_training.py", "test_pmap.py", "test_sharding_2d.py", "test_shard_map.py",
       "test_multihost_utils.py", "test_buffers.py"]


@pytest.mark.jax
@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_workload_suites(nranks, jax_env, tmp_path):
    proc = run_suite(nranks, ALL, jax_env, timeout=1200, reports=tmp_path)
    counts = check_every_rank_passed(proc, nranks, tmp_path)
    assert counts["skipped"] == (0 if nranks == 4 else 1), counts  # only the 2x2 mesh, below 4 ranks

"""Test suites written elsewhere, run under the pytest plugin (issue 72): each peer's own tests, from
its sdist at the version installed, must give the outcomes they give without the package. Once, in
the mpich configuration, where scripts/setup_beside.sh installs mpi4jax (CI time: about 35 s for
both; docs/contributing.md). NetKet's distributed tests are not here: NetKet's sdist holds no
tests, and CI reaches package indexes only (docs/testing.md has their figures, run by hand)."""
import importlib.metadata
import os
import re
import sys
import tarfile

import pytest

from helpers import ONCE, explain, mpiexec_path, run

PY = sys.executable
pytestmark = pytest.mark.skipif(not ONCE, reason="once (the mpich configuration): the plugin's Python side")
NO_PACKAGE_ENV = {"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}


def sdist_tree(tmp_path, name):
    """The unpacked sdist of `name` at its installed version. Without build isolation: mpi4jax's
    metadata would otherwise build mpi4py from source in pip's isolated environment."""
    version = importlib.metadata.version(name)
    got = run([PY, "-m", "pip", "download", "-q", "--no-deps", "--no-build-isolation", "--no-binary", ":all:",
               f"{name}=={version}", "-d", str(tmp_path)], timeout=180)
    assert got.returncode == 0, f"pip could not fetch {name}'s sdist (its tests):\n" + explain(got)
    sdist = next(tmp_path.glob(f"{name.replace('-', '[-_]')}-*.tar.gz"))
    with tarfile.open(sdist) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(tmp_path, filter="data")
        else:
            archive.extractall(tmp_path)
    return next(p for p in tmp_path.iterdir() if p.is_dir() and (p / "tests").is_dir())


def test_pytest_mpis_own_suite_gives_its_outcomes_with_the_package_installed(tmp_path):
    """pytest-mpi's tests run `mpirun -n 2 python -mpytest` inside pytester with 5 s limits and never
    import JAX: 10 passed without the package. With it, 4 failed (JAX's whole start in each launch,
    --only-mpi), then 2 (the ranks, started in step, both emptying one --basetemp). pytester drops
    PYTEST_ADDOPTS, so the plugin is on in every inner launch."""
    source = sdist_tree(tmp_path, "pytest-mpi")
    bin_dir = os.path.dirname(PY)  # its conftest launches `mpirun` from PATH: the venv's MPI
    proc = run([PY, "-m", "pytest", "-p", "pytester", "--runpytest=subprocess", "-p", "no:cacheprovider", "-q",
                "tests"], env={"PATH": f"{bin_dir}:{os.environ['PATH']}", **NO_PACKAGE_ENV}, timeout=300,
               cwd=str(source))
    assert proc.returncode == 0 and re.search(r"\b10 passed\b", proc.stdout), explain(proc)
    assert "failed" not in proc.stdout.strip().splitlines()[-1], explain(proc)


def test_mpi4jaxs_own_suite_gives_its_outcomes_under_the_plugin(tmp_path):
    """mpi4jax's tests (and the example one of them runs) under `mpiexec -n 2 python -m pytest`: 112
    passed with the plugin (22 s) as with -p no:mpi_collectives (30 s), mpi4jax 0.9.1.post2 built
    against the mpich wheel. Copied out of the sdist's folder: run there, its source package (without
    its compiled part) would shadow the installed one."""
    pytest.importorskip("mpi4jax", reason="scripts/setup_beside.sh installs it (the mpich configuration)")
    source = sdist_tree(tmp_path, "mpi4jax")
    suite = tmp_path / "suite"
    suite.mkdir()
    for part in ("tests", "examples"):
        os.rename(source / part, suite / part)
    (suite / "pytest.ini").write_text("[pytest]\n")
    proc = run([mpiexec_path(), "-n", "2", PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--color=no",
                "-c", str(suite / "pytest.ini"), "tests"], env=NO_PACKAGE_ENV, timeout=300, cwd=str(suite))
    assert proc.returncode == 0 and re.search(r"\b112 passed\b", proc.stdout), explain(proc)
    assert proc.stdout.count("short test summary info") <= 1 and " failed" not in proc.stdout, explain(proc)

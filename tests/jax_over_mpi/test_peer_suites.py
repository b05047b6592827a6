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

from helpers import ONCE, explain, extended, mpiexec_path, run

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


@extended
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


# ---- suites that must not see pytest-mpi (issue 80) ----
# pytest-isolate-mpi and pytest-mpi both own the `mpi` mark, and mpi-pytest's module is pytest-mpi's
# name (pytest_mpi): each needs an environment without pytest-mpi, which CI's venv holds (test_beside,
# pytest-mpi's own suite above). One venv of the package, the mpich wheel, mpi4py and pytest at the
# versions installed here; the plugins under test each in a folder of its own on PYTHONPATH.

def _installed(name):
    return f"{name}=={importlib.metadata.version(name)}"


def sdist_of(name, version, folder):
    """The sdist of name==version, unpacked in folder; its top directory. Read off the package index's
    JSON listing (PEP 691), never built: `pip download` prepares metadata, and mpi4py's build backend
    compiles for minutes to do it."""
    import json
    import urllib.request

    request = urllib.request.Request(f"https://pypi.org/simple/{name}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        files = json.load(answer)["files"]
    wanted = {f"{name.replace('-', '_')}-{version}.tar.gz", f"{name}-{version}.tar.gz"}
    url = next(f["url"] for f in files if f["filename"] in wanted)
    archive_path = folder / f"{name}-{version}.tar.gz"
    urllib.request.urlretrieve(url, archive_path)
    with tarfile.open(archive_path) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(folder, filter="data")
        else:
            archive.extractall(folder)
    return next(p for p in folder.iterdir() if p.is_dir() and p.name.lower().startswith(name.replace("-", "_")[:6]))


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory):
    """(python, environment): the package with mpich, mpi4py and pytest, without pytest-mpi."""
    from helpers import ROOT

    folder = tmp_path_factory.mktemp("plain-venv")
    venv = folder / "venv"
    made = run([PY, "-m", "venv", str(venv)], timeout=120)
    assert made.returncode == 0, explain(made)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "--disable-pip-version-check", "-q", "install"]
    got = run([*pip, _installed("mpich"), _installed("mpi4py"), _installed("pytest"), _installed("numpy"),
               _installed("cffi"), "setuptools", "wheel"], timeout=600)
    assert got.returncode == 0, explain(got)
    got = run([*pip, "--no-deps", "--no-build-isolation", ROOT], timeout=600)
    assert got.returncode == 0, explain(got)
    environment = {**NO_PACKAGE_ENV, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "PYTHONPATH": None,
                   "PYTEST_ADDOPTS": None}
    return python, environment


def _outcomes(path):
    import xml.etree.ElementTree as ElementTree

    found = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        found[f"{case.get('classname')}::{case.get('name')}"] = (
            "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed")
    return found


MPI4PY_FILES = ["test_cco_obj.py", "test_cco_buf.py", "test_p2p_obj.py", "test_p2p_buf.py", "test_comm.py"]


@pytest.fixture(scope="module")
def mpi4py_tests(tmp_path_factory):
    version = importlib.metadata.version("mpi4py")
    return sdist_of("mpi4py", version, tmp_path_factory.mktemp("mpi4py")) / "test"


def test_mpi4pys_own_suite_gives_the_same_outcome_per_test_under_the_plugin(plain_venv, mpi4py_tests):
    """mpi4py's own tests (five files: collectives of objects and buffers, point-to-point, communicators;
    357 tests, 7,488 subtests at 2 ranks, mpi4py 4.1.2), under the plugin and without it
    (-p no:mpi_collectives): the same outcome for every test."""
    python, environment = plain_venv
    results = {}
    for name, extra in (("with", []), ("without", ["-p", "no:mpi_collectives"])):
        report = mpi4py_tests / f"report-{name}.xml"
        proc = run([mpiexec_path(), "-n", "2", python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra,
                    f"--junitxml={report}", *MPI4PY_FILES], env=environment, timeout=300, cwd=str(mpi4py_tests))
        assert proc.returncode == 0, explain(proc)
        results[name] = _outcomes(report)
    assert len(results["with"]) > 300 and results["with"] == results["without"]


@pytest.mark.parametrize("test", ["test_cco_obj.py::TestCCOObjWorldDup::testAllreduce"] + [
    pytest.param(t, marks=extended) for t in ("test_cco_obj.py::TestCCOObjWorld::testAllreduce",  # (15 s each)
                                              "test_cco_buf.py::TestCCOBufWorldDup::testAllreduce",
                                              "test_cco_buf.py::TestCCOBufWorld::testAllreduce")])
def test_a_failure_injected_on_one_rank_of_mpi4pys_suite_ends_the_job_with_a_line(plain_venv, mpi4py_tests, test):
    """Issue 80: rank 1 fails a test of mpi4py's own suite before its body (tests/programs/
    pytest_inject_failure.py, from outside the suite), so rank 0 meets the body's collective alone:
    a lowercase (pickled) all-reduce on a new communicator (mpi4py's first lowercase collective on a
    communicator holds Python's lock: the native watchdog ends the job) and on the world, a buffer
    all-reduce on both. Before: silent hangs. Now one line naming the test and rank 0's wait within 30 s
    (12.7-14.7 s measured with the default hold of 10 s; --mpi-hold 3 here, for CI's time)."""
    import time

    python, environment = plain_venv
    file, cls = test.split("::")[:2]
    start = time.monotonic()
    proc = run([mpiexec_path(), "-n", "2", python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--mpi-hold", "3",
                "-p", "pytest_inject_failure", file, "-k", f"{cls} and not Inter"],
               env={**environment, "PYTHONPATH": os.path.join(os.path.dirname(os.path.dirname(__file__)), "programs"),
                    "INJECT_TEST": test, "INJECT_RANK": "1"}, timeout=90, cwd=str(mpi4py_tests))
    took = time.monotonic() - start
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0 and took < 20, (took, explain(proc))
    assert re.search(rf"mpi-collectives: error: \S*{re.escape(test)} cannot finish: rank 0 waits", text), explain(proc)


@extended
def test_pytest_isolate_mpis_own_suite_gives_its_outcomes_with_the_package_installed(plain_venv, tmp_path):
    """pytest-isolate-mpi launches a job of its own for each test and runs pytest inside it, which set
    the package's plugin on (it took those jobs over: 42 passed, 5 failed, against 45 and 2 without the
    package). Its children say so in their environment (PYTEST_ISOLATE_MPI_IS_FORKED): the plugin steps
    back. The two failures are its own, without the package too (pytest-forked absent; a command
    line it expects of another pytest version), pytest-isolate-mpi 0.4.1."""
    python, environment = plain_venv
    version = "0.4.1"
    plugin = tmp_path / "plugin"
    got = run([python, "-m", "pip", "-q", "install", "--no-deps", "--target", str(plugin),
               f"pytest-isolate-mpi=={version}"], timeout=300)
    assert got.returncode == 0, explain(got)
    (tmp_path / "sdist").mkdir()
    source = sdist_of("pytest-isolate-mpi", version, tmp_path / "sdist")
    proc = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", "tests"],
               env={**environment, "PYTHONPATH": str(plugin)}, timeout=400, cwd=str(source))
    assert re.search(r"\b2 failed, 45 passed\b", proc.stdout), explain(proc)
    failed = set(re.findall(r"^FAILED (\S+)", proc.stdout, re.M))
    assert failed == {"tests/test_pytest_forked_compatibility.py::test_non_mpi_test_respects_forked",
                      "tests/test_subsession.py::test_assemble_sub_pytest_cmd[test_session]"}, explain(proc)


@extended
def test_mpi_pytests_own_suite_in_both_modes(plain_venv, tmp_path):
    """mpi-pytest (Firedrake's): its forking mode launches `mpiexec -n N python -m pytest` for each
    parallel test, marking the children (_PYTEST_MPI_CHILD_PROCESS, passed with -genv under MPICH): the
    plugin steps back there; under an outer mpiexec, the plugin and mpi-pytest run the suite together.
    The outcomes without the package (mpi-pytest 2026.0): 15 passed forking; 5 passed at 2 and at 3 ranks."""
    python, environment = plain_venv
    version = "2026.0"
    plugin = tmp_path / "plugin"
    got = run([python, "-m", "pip", "-q", "install", "--no-deps", "--target", str(plugin), f"mpi-pytest=={version}"],
              timeout=300)
    assert got.returncode == 0, explain(got)
    (tmp_path / "sdist").mkdir()
    tests = sdist_of("mpi-pytest", version, tmp_path / "sdist") / "tests"
    env = {**environment, "PYTHONPATH": str(plugin)}
    pytest_command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(tests)]
    proc = run([*pytest_command, str(tests)], env=env, timeout=300, cwd=str(tests))
    assert proc.returncode == 0 and re.search(r"\b15 passed\b", proc.stdout), explain(proc)
    for n in (2, 3):
        proc = run([mpiexec_path(), "-n", str(n), *pytest_command, "-m", f"parallel[{n}]", str(tests)], env=env,
                   timeout=300, cwd=str(tests))
        assert proc.returncode == 0 and re.search(r"\b5 passed, 10 deselected\b", proc.stdout), explain(proc)
        assert proc.stdout.count("5 passed") == 1, explain(proc)  # the plugin's one report

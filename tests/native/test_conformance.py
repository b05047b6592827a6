"""MPIABI conformance: tests/programs/conformance_harness.c, C code with no MPI
header (run inside Python by conformance_runner.py) that loads the wrapper the way MPItrampoline does (dlopen with
RTLD_DEEPBIND, every function and constant through dlsym), runs a broad set of
exact checks (point-to-point, probes, every collective, request arrays,
persistent and generalized requests, datatypes, communicators, user ops,
info, attributes, error handlers, one-sided, MPI-IO, threads) under mpiexec
and prints "PASS <group>" / "FAIL <group>: ..." lines and a final
"conformance: N checks passed"."""
import os
import subprocess
import sys

import pytest

import mpi_collectives  # noqa: F401  (publishes MPI_COLLECTIVES_PREFIXES for the harness)
from helpers import PROGRAMS, ROOT, explain, mpirun, wrapper_path


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """The harness as a shared library, run inside Python by conformance_runner.py (which says why:
    it works whether libpython is shared or static, and whatever the linker's binding default)."""
    lib = str(tmp_path_factory.mktemp("conformance") / "harness.so")
    cmd = ["cc", "-O1", "-Wall", "-shared", "-fPIC", "-Dmain=conformance_main", "-I", "native/generated", "-o", lib,
           "tests/programs/conformance_harness.c", "-ldl"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, "compiling the harness: " + " ".join(cmd) + "\n" + explain(proc)
    return [sys.executable, os.path.join(PROGRAMS, "conformance_runner.py"), lib]


@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_conformance(harness, nprocs, tmp_path):
    env = {
        "MPI_COLLECTIVES_PREFIXES": os.environ.get("MPI_COLLECTIVES_PREFIXES", sys.prefix),
        # The harness splits communicators with keys that are not XLA's
        # convention on purpose (reversed keys); the check is for XLA only.
        "MPI_COLLECTIVES_CHECK_SPLITS": "0",
        "CONFORMANCE_GROUPS": "",  # the harness's debugging filter: run everything
    }
    proc = mpirun(nprocs, [*harness, wrapper_path(), str(tmp_path)], env=env, timeout=180)
    message = explain(proc)
    assert proc.returncode == 0, message
    assert "conformance:" in proc.stdout, message
    assert "FAIL" not in proc.stdout, message
    assert "FAIL" not in proc.stderr, message
    assert proc.stdout.count("PASS ") >= 21, message

"""Shared helpers for the test suite.

Multi-rank tests start `mpiexec` themselves (from the same installation as
the running Python, so the MPI under test is the one the venv holds), each
launch with a timeout so that a hang fails the test instead of CI.
"""
import os
import signal
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LAUNCH_TIMEOUT = int(os.environ.get("MPI_COLLECTIVES_TEST_TIMEOUT", "300"))

# Open MPI's launcher refuses root and more ranks than cores unless told;
# CI runs as root on 2 cores. Harmless for the other MPIs.
for _k, _v in {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
               "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",
               "OMPI_MCA_rmaps_base_oversubscribe": "1"}.items():
    os.environ.setdefault(_k, _v)


# The ABI family the suite is run against (scripts/test.sh sets it per venv).
EXPECTED_FAMILY = os.environ.get("MPI_COLLECTIVES_TEST_FAMILY", "mpich")
# The configuration of scripts/test.sh (mpich, impi, openmpi, standard,
# jax-<version>): tests whose answer cannot depend on it run in "mpich" only.
TEST_CONFIG = os.environ.get("MPI_COLLECTIVES_TEST_CONFIG", "mpich")
ONCE = TEST_CONFIG == "mpich"

# mpi4py's wheels hold builds for the MPICH and Open MPI ABIs only: with the
# standard ABI it would load MPICH's libmpi.so.12 beside libmpi_abi.so.1.
needs_mpi4py = pytest.mark.skipif(
    EXPECTED_FAMILY == "standard",
    reason="mpi4py's wheel has no build for the MPI-5 standard ABI",
)


def mpiexec_path():
    return os.path.join(os.path.dirname(sys.executable), "mpiexec")


def wrapper_path():
    # From the tests folder: the source tree at the top would shadow the installed package.
    return subprocess.check_output([sys.executable, "-m", "mpi_collectives", "libpath"], text=True,
                                   cwd=HERE).strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, env=None, timeout=LAUNCH_TIMEOUT, cwd=None):
    """Run a command with captured text output and a timeout; never hangs.

    The command gets its own process group, and on timeout the whole group is
    killed: killing only mpiexec leaves its ranks spinning in MPI (seen with
    MPICH's Hydra), which would eat the CPU of every later test.
    """
    full = dict(os.environ)
    for key, value in (env or {}).items():  # None removes a variable
        if value is None:
            full.pop(key, None)
        else:
            full[key] = value
    proc = subprocess.Popen(cmd, env=full, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        try:  # a rank outside the group may still hold the pipes open
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            out, err = "(unavailable: pipes still held open)", ""
        pytest.fail(f"timed out after {timeout}s: {' '.join(cmd)}\nstdout:\n{out[-6000:]}\nstderr:\n{err[-6000:]}")
    finally:
        try:  # leftovers of a launch that ended anyway (a rank that outlived mpiexec)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def mpirun(n, args, env=None, timeout=LAUNCH_TIMEOUT):
    return run([mpiexec_path(), "-n", str(n)] + list(args), env=env, timeout=timeout)


def explain(proc):
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}"


@pytest.fixture
def jax_env():
    """Environment for a JAX program whose collectives go through our wrapper."""
    return {
        "MPITRAMPOLINE_LIB": wrapper_path(),
        "JAX_PLATFORMS": "cpu",
        "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "mpi",
        "MPI_COLLECTIVES_TEST_PORT": str(free_port()),
    }


# tests/mpi_suites/ runs inside mpiexec (tests/test_mpi_suites.py launches it), not in this process.
collect_ignore = [] if os.environ.get("MPI_COLLECTIVES_IN_SUITE") else ["mpi_suites"]

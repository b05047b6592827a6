"""Shared helpers for the test suite.

Multi-rank tests start `mpiexec` themselves (from the same installation as
the running Python, so the MPI under test is the one the venv holds), each
launch with a timeout so that a hang fails the test instead of CI.
"""
import os
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LAUNCH_TIMEOUT = int(os.environ.get("MPI_COLLECTIVES_TEST_TIMEOUT", "300"))


def mpiexec_path():
    return os.path.join(os.path.dirname(sys.executable), "mpiexec")


def wrapper_path():
    return subprocess.check_output([sys.executable, "-m", "mpi_collectives", "libpath"], text=True).strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, env=None, timeout=LAUNCH_TIMEOUT, **kw):
    """subprocess.run with captured text output and a timeout; never hangs."""
    full = dict(os.environ)
    full.update(env or {})
    try:
        return subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"timed out after {timeout}s: {' '.join(cmd)}\nstdout:\n{e.stdout}\nstderr:\n{e.stderr}")


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

"""Collectives whose communicators XLA creates from its pool threads.

Without the wrapper's answer to MPI_Is_thread_main, XLA refuses them; with it,
results must be exact, and where the ranks would pair communicators up
wrongly (different first-use orders, two dispatching threads) the job must
stop with one sentence: never a wrong result. Two devices per process, which
initialize() reads from XLA_FLAGS, are exact (device_groups.c; the whole
matrix is tests/jax_over_mpi/test_local_devices.py).
"""
import os
import sys

import pytest

from helpers import PROGRAMS, explain, mpirun

PROGRAM = os.path.join(PROGRAMS, "thread_cases.py")
PY = sys.executable
OUR_STOPS = ("XLA's MPI_Comm_split calls do not match across ranks",
             "two MPI_Comm_split calls ran at the same time in one process",
             "so the ranks created XLA's device-group communicators in different orders")


def launch(case, n, env=None, timeout=300):
    return mpirun(n, [PY, PROGRAM, case], env=env, timeout=timeout)


def exact_or_stopped(proc, n, case):
    """The only two acceptable outcomes."""
    assert "WRONG" not in proc.stdout + proc.stderr, explain(proc)
    if proc.returncode == 0:
        assert proc.stdout.count(f"PASS {case}") == n, explain(proc)
        return "exact"
    assert any(s in proc.stderr for s in OUR_STOPS), explain(proc)
    return "stopped"


@pytest.mark.jax
def test_xla_refuses_pool_thread_communicators_without_us():
    proc = launch("refusal", 2, env={"MPI_COLLECTIVES_ANY_THREAD": "0"})
    assert proc.returncode != 0, explain(proc)
    assert "Communicator requested from a thread that is not the one MPI was initialized from" in proc.stderr


@pytest.mark.jax
def test_the_same_program_passes_with_us():
    proc = launch("refusal", 2)
    assert proc.returncode == 0 and proc.stdout.count("PASS refusal") == 2, explain(proc)


@pytest.mark.jax
@pytest.mark.parametrize("n", [2, 4])
def test_sweep_exact_no_refusals(n):
    proc = launch("sweep", n)
    assert proc.returncode == 0 and proc.stdout.count("PASS sweep") == n, explain(proc)
    assert "Communicator requested" not in proc.stderr


@pytest.mark.jax
def test_independent_collectives_over_two_axes_repeatedly():
    proc = launch("two-axes", 4, env={"REPEAT": "20"})
    assert proc.returncode == 0 and proc.stdout.count("PASS two-axes") == 4, explain(proc)


@pytest.mark.jax
def test_different_first_use_orders_are_exact_or_stopped():
    # Stopped in every run seen here; exact is acceptable too, wrong never.
    proc = launch("orders", 4)
    if exact_or_stopped(proc, 4, "orders") == "stopped":
        assert "mpi_collectives.prepare(mesh)" in proc.stderr, explain(proc)


@pytest.mark.jax
def test_prepare_makes_different_orders_exact():
    proc = launch("prepared", 4)
    assert exact_or_stopped(proc, 4, "prepared") == "exact", explain(proc)


@pytest.mark.jax
def test_two_dispatching_threads_are_exact_or_stopped():
    exact_or_stopped(launch("threads", 4), 4, "threads")


@pytest.mark.jax
def test_two_devices_per_process_are_exact_or_stopped():
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    assert exact_or_stopped(launch("two-devices", 2, env=env), 2, "two-devices") == "exact"

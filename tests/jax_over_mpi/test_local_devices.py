"""Several CPU devices per process over MPI (native/src/services/devices/).

tests/programs/local_devices.py runs every collective on four meshes over
all P x L devices (in device order, shuffled, a process x device grid, and
a shuffled grid that mixes local and remote devices unevenly), multi-process
pmap, and jit over sharded arrays; it checks every addressable result
exactly against NumPy, over MPI and, in the same test, over gloo, and here
every result must be bit-equal between the two.

Launches: P x L = 2x2 on every family and jax version from 0.6; 3x2, 2x3,
2x4 and 1x4 once (the mpich configuration). Older jax is refused with a
sentence (mpi_collectives.integration.jax_compat.LOCAL_DEVICES_JAX). tests/programs/local_device_cases.py: what may go
wrong (first-use orders, two threads, a program over some devices only,
different device counts) ends exact or with one sentence on every rank.
"""
import os
import sys

import numpy as np
import pytest

from helpers import ONCE, PROGRAMS, explain, free_port, mpirun

from mpi_collectives.integration.jax_compat import LOCAL_DEVICES_JAX, installed_jax, version_tuple  # noqa: E402

# Its answers can differ between jax versions: scripts/test.sh runs it on each jax it tests.
pytestmark = pytest.mark.version_dependent

PROGRAM = os.path.join(PROGRAMS, "local_devices.py")
CASES = os.path.join(PROGRAMS, "local_device_cases.py")
# 4 devices per process: 1x4 (2x4 left out for CI time: the same plan with one more process).
SHAPES = [(2, 2), (3, 2), (2, 3), (1, 4)] if ONCE else [(2, 2)]
SUPPORTED = version_tuple(installed_jax()) >= LOCAL_DEVICES_JAX
supported = pytest.mark.skipif(not SUPPORTED, reason="needs jax 0.6 or newer: "
                               "test_older_jax_is_refused_with_a_sentence checks the refusal")


def launch(backend, processes, devices, out):
    env = {"JAX_NUM_CPU_DEVICES": str(devices), "MPI_COLLECTIVES_TEST_PORT": str(free_port()),
           "MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}
    proc = mpirun(processes, [sys.executable, PROGRAM, backend, str(out)], env=env, timeout=300)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.count("DONE rank") == processes, explain(proc)
    return proc


@pytest.mark.jax
@supported
@pytest.mark.parametrize("processes,devices", SHAPES, ids=[f"{p}x{d}" for p, d in SHAPES])
def test_every_collective_exact_and_equal_to_gloo(processes, devices, tmp_path):
    launch("mpi", processes, devices, tmp_path)
    launch("gloo", processes, devices, tmp_path)
    for rank in range(processes):
        ours = np.load(tmp_path / f"mpi-rank{rank}.npz")
        gloo = np.load(tmp_path / f"gloo-rank{rank}.npz")
        assert sorted(ours.files) == sorted(gloo.files)
        assert len(ours.files) > 200, len(ours.files)  # every case ran
        differ = [k for k in ours.files if ours[k].tobytes() != gloo[k].tobytes()]
        assert not differ, f"rank {rank}: results that differ from gloo's: {differ[:10]}"


@pytest.mark.jax
@pytest.mark.skipif(SUPPORTED, reason="this jax supports several devices per process")
def test_older_jax_is_refused_with_a_sentence():
    code = "import mpi_collectives; mpi_collectives.initialize()"
    proc = mpirun(2, [sys.executable, "-c", code], timeout=120,
                  env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    assert proc.returncode != 0, explain(proc)
    assert proc.stderr.count("2 CPU devices per process need jax 0.6.0 or newer over MPI") == 2, explain(proc)


def run_case(case, env=None):
    full = {"JAX_NUM_CPU_DEVICES": "2", "MPI_COLLECTIVES_DEVICES_TIMEOUT": "5"}
    full.update(env or {})
    return mpirun(2, [sys.executable, CASES, case], env=full, timeout=180)


def exact_or_stopped(proc, case):
    """The only acceptable outcomes: every result exact, or one sentence on every rank."""
    assert "WRONG" not in proc.stdout, explain(proc)
    if proc.returncode == 0:
        assert proc.stdout.count(f"PASS {case}") == 2, explain(proc)
        return "exact"
    for rank in range(2):
        assert f"rank {rank}: the processes are creating different device groups at once" in proc.stderr, \
            explain(proc)
    return "stopped"


@pytest.mark.jax
@supported
def test_different_first_use_orders_are_exact_or_stopped():
    # Stopped in every run seen here: a (process) group and a (device) group meet in one event.
    assert exact_or_stopped(run_case("orders"), "orders") == "stopped"


@pytest.mark.jax
@supported
def test_prepare_makes_different_orders_exact():
    proc = run_case("prepared")
    assert exact_or_stopped(proc, "prepared") == "exact", explain(proc)


@pytest.mark.jax
@supported
def test_independent_collectives_over_both_axes_in_one_jit():
    proc = run_case("two-axes")
    assert exact_or_stopped(proc, "two-axes") == "exact", explain(proc)


@pytest.mark.jax
@supported
def test_two_dispatching_threads_are_exact_or_stopped():
    exact_or_stopped(run_case("threads"), "threads")


@pytest.mark.jax
@supported
def test_a_rearranged_mesh_that_repeats_a_group_ends_named_never_wrong():
    """XLA splits only for the new group, on one process: the other finishes, and is named."""
    proc = run_case("rearranged", env={"MPI_COLLECTIVES_EXIT_TIMEOUT": "5"})
    assert "WRONG" not in proc.stdout, explain(proc)
    assert proc.returncode != 0, explain(proc)
    assert ("rank(s) 0 finished the program while rank 1 has waited" in proc.stderr
            or "creating different device groups at once" in proc.stderr), explain(proc)


@pytest.mark.jax
@supported
def test_a_program_over_some_devices_only_stops_with_a_sentence():
    proc = run_case("subset")
    assert proc.returncode != 0, explain(proc)
    for rank in range(2):
        assert (f"rank {rank}: only 1 of this process's 2 CPU devices started a collective within 5 s"
                in proc.stderr), explain(proc)
    assert "WRONG" not in proc.stdout and "PASS" not in proc.stdout, explain(proc)


@pytest.mark.jax
@supported
def test_different_device_counts_are_refused_on_every_rank():
    proc = run_case("counts")
    assert proc.returncode != 0, explain(proc)
    assert proc.stderr.count("the ranks ask JAX for different numbers of CPU devices per process "
                             "(rank 0: 2, rank 1: 3)") == 2, explain(proc)


@pytest.mark.jax
@supported
@pytest.mark.skipif(not ONCE, reason="the same on every family; once is enough (the mpich configuration)")
def test_device_count_set_after_initialize_is_learned():
    """Devices set after initialize(), before JAX starts its backend: the package's JAX plugin
    hook tells the native layer at backend start, and the psum over 2 x 2 devices is exact.
    (Splits of devices the wrapper is never told of still stop with a sentence:
    native/test_wrapper.py.)"""
    code = ("import mpi_collectives; mpi_collectives.initialize(); import jax, numpy as np; "
            "jax.config.update('jax_num_cpu_devices', 2); "
            "got = jax.pmap(lambda v: jax.lax.psum(v, 'i'), axis_name='i')(np.ones(2)).tolist(); "
            "print(f'psum {got}', flush=True)")
    proc = mpirun(2, [sys.executable, "-c", code], timeout=180)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.count("psum [4.0, 4.0]") == 2, explain(proc)


@pytest.mark.jax
@supported
@pytest.mark.skipif(not ONCE, reason="the same on every family; once is enough (the mpich configuration)")
def test_a_thread_level_below_multiple_is_refused():
    """The devices' leaders call MPI from several threads at once."""
    proc = mpirun(2, [sys.executable, "-c", "import mpi_collectives; mpi_collectives.initialize()"], timeout=120,
                  env={"JAX_NUM_CPU_DEVICES": "2", "MPI_COLLECTIVES_THREAD_LEVEL": "funneled"})
    assert proc.returncode != 0, explain(proc)
    assert proc.stderr.count("2 CPU devices per process need MPI_THREAD_MULTIPLE") == 2, explain(proc)

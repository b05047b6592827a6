"""A program that calls jax.distributed.initialize() with its own arguments
(JAX's own multi-process tests; most existing scripts) gets what initialize()
gives once JAX starts its backends: SIGTERM ends it, a stalled rank is named
with its stacks, a rank that finished early, died or raised is named, and
the job ends non-zero. tests/programs/plain_faults.py never imports the
package; what it gets comes through the JAX plugin hook."""
import os
import re
import signal
import sys
import time
import uuid

import pytest

from helpers import EXPECTED_FAMILY, NOT_STANDARD, ONCE, PROGRAMS, mpiexec_path
from mpi_collectives.tools import launching
from test_failures import END_WITHIN, finish_job, ready_count, ready_ranks

# SIGTERM, the stall report and a killed rank on every family; SIGTERM and the stall report on every jax
# version too (the plugin hook's path); a rank that finishes early or raises (the same watchers as for
# initialize(), whose own tests run everywhere) once, on MPICH (CI's budget).
pytestmark = [pytest.mark.jax, NOT_STANDARD]
once = pytest.mark.skipif(not ONCE, reason="the same watchers as initialize()'s, tested on every family there")
PROGRAM = os.path.join(PROGRAMS, "plain_faults.py")
EXIT_TIMEOUT = 5


def start(mode, jax_env, *args, env=None):
    marker = f"mpic-plain-{uuid.uuid4().hex}"
    full = dict(os.environ, **jax_env, MPI_COLLECTIVES_EXIT_TIMEOUT=str(EXIT_TIMEOUT), **(env or {}))
    proc = launching.start([mpiexec_path(), "-n", "2", sys.executable, PROGRAM, mode, marker, *args], env=full)
    return proc, marker


def ended(mode, jax_env):
    start_time = time.monotonic()
    proc, marker = start(mode, jax_env)
    rc, out, err, seconds, alive = finish_job(proc, marker, start_time)
    text = f"exit {rc} after {seconds:.1f} s\n--- stdout\n{out[-4000:]}\n--- stderr\n{err[-4000:]}"
    assert rc != 0 and seconds < END_WITHIN and not alive and "UNEXPECTED" not in out, text
    return out, err, text


@pytest.mark.version_dependent
def test_sigterm_to_the_launcher_ends_a_plain_program(jax_env):
    proc, marker = start("sigterm", jax_env)
    lines = ready_ranks(proc, 2)
    assert ready_count(lines) == 2, "".join(lines)
    start_time = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rc, out, err, seconds, alive = finish_job(proc, marker, start_time)
    text = f"exit {rc} after {seconds:.1f} s\n--- stdout\n{out[-4000:]}\n--- stderr\n{err[-4000:]}"
    assert rc != 0 and seconds < 15 and not alive, text
    if EXPECTED_FAMILY != "openmpi":  # Open MPI's launcher kills its ranks itself, at once
        for rank in range(2):
            assert f"rank {rank}/2 was asked to stop (SIGTERM" in err, text


@pytest.mark.version_dependent
def test_a_stalled_rank_of_a_plain_program_is_named_with_its_stacks(jax_env):
    start_time = time.monotonic()
    proc, marker = start("stall", jax_env, "8", env={"MPI_COLLECTIVES_STALL_REPORT": "3"})
    rc, out, err, seconds, alive = finish_job(proc, marker, start_time)
    text = f"exit {rc} after {seconds:.1f} s\n--- stdout\n{out[-4000:]}\n--- stderr\n{err[-4000:]}"
    assert rc == 0 and out.count("PASS plain-stall rank") == 2, text
    assert re.search(r"mpi-collectives: stall: rank 0/2 has waited \d+ s in all-reduce sum f32 x4 \(#\d+ on "
                     r"communicator \d+\); not arrived: rank 1 \(outside MPI for \d+ s\)", err), text
    assert "in away_from_the_collective" in err, text


@once
def test_a_rank_of_a_plain_program_that_finishes_early_is_named(jax_env):
    """Rank 0 waits in a psum's check: in the node path's round (its ranks share a node, the default), it
    finds rank 1 at MPI_Finalize in the window at once; through the library's check, the peers watch names
    rank 1 after MPI_COLLECTIVES_EXIT_TIMEOUT."""
    _, err, text = ended("exit", jax_env)
    assert re.search(r"rank 0: rank 1 reached MPI_Finalize while this rank waits for it in all-reduce #\d+ \(sum of 4 "
                     r"f32\) on communicator \d+", err), text
    _, err, text = ended("exit", {**jax_env, "MPI_COLLECTIVES_NODE_PATH_ROUND": "0"})
    assert re.search(r"rank\(s\) 1 finished the program while rank 0 has waited \d+ s in MPI", err), text


def test_a_killed_rank_of_a_plain_program_is_named(jax_env):
    out, err, text = ended("kill", jax_env)
    pid = re.search(r"READY rank 1 pid (\d+)", out).group(1)
    assert re.search(rf"rank 1(/2)? \(pid {pid} on \S+\) ended", err), text


@once
def test_a_rank_of_a_plain_program_that_raises_ends_the_job(jax_env):
    _, err, text = ended("raise", jax_env)
    assert "ValueError: rank 1 fails on purpose" in err, text
    assert "rank 1/2 stopped on an uncaught ValueError" in err, text

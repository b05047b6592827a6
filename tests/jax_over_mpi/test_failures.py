"""A rank that fails mid-run ends the whole job, non-zero, soon, with a
message naming the rank, and leaves no process behind.

Bound: every case below must end within END_WITHIN seconds of the launch
(start-up included; about 10 s of that is JAX's start-up at 3 ranks on two
cores). Measured: raise 5-6 s, SIGKILL 3-4 s, early exit EXIT_TIMEOUT + 3 s.
"""
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from helpers import EXPECTED_FAMILY, ONCE, PROGRAMS, mpiexec_path, read_until
from mpi_collectives.tools import launching

PROGRAM = os.path.join(PROGRAMS, "failures.py")
END_WITHIN = 60
OUTLIVE_CHECKS = 6  # 1.5 s after the launcher has ended
EXIT_TIMEOUT = 5  # MPI_COLLECTIVES_EXIT_TIMEOUT for the early-exit case
HYDRA = EXPECTED_FAMILY in ("mpich", "standard")  # MPICH's and Intel MPI's launcher


def leftovers(marker):
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def start_job(mode, launcher_args=(), env=None):
    marker = f"mpic-failure-{uuid.uuid4().hex}"
    full = dict(os.environ, MPI_COLLECTIVES_EXIT_TIMEOUT=str(EXIT_TIMEOUT), **(env or {}))
    full.pop("MPITRAMPOLINE_LIB", None)
    cmd = [mpiexec_path(), *launcher_args, "-n", "3", sys.executable, PROGRAM, mode, marker]
    proc = launching.start(cmd, env=full)
    return proc, marker


def launch_failing_job(mode, launcher_args=(), env=None):
    """Run the 3-rank job; returns (exit code, stdout, stderr, seconds, pids still alive afterwards)."""
    start = time.monotonic()
    proc, marker = start_job(mode, launcher_args, env)
    return finish_job(proc, marker, start)


def finish_job(proc, marker, start):
    try:
        out, err = proc.communicate(timeout=END_WITHIN * 3)
    except subprocess.TimeoutExpired:
        launching.end(proc)
        out, err = proc.communicate()
    seconds = time.monotonic() - start
    # Processes the launcher is still reaping, and each rank's watcher process, which
    # holds its claim on the node's report until the job's processes on the node are
    # gone (native/src/peer_watch.c): nothing may outlive the job by more than a moment.
    for _ in range(OUTLIVE_CHECKS):
        alive = leftovers(marker)
        if not alive:
            break
        time.sleep(0.25)
    for pid in alive:  # leave nothing for the next test, whatever this one finds
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.returncode, out, err, seconds, alive


def check_ended(rc, out, err, seconds, alive):
    text = f"exit {rc} after {seconds:.1f} s\n--- stdout\n{out[-4000:]}\n--- stderr\n{err[-4000:]}"
    assert rc != 0, text
    assert seconds < END_WITHIN, text
    assert not alive, f"processes left behind: {alive}\n" + text
    assert "UNEXPECTED" not in out, text
    return text


def pid_of(rank, out):
    return re.search(rf"READY rank {rank} pid (\d+)", out).group(1)


def named_dead_rank(rank, out, err):
    """Our line naming the rank that died: from its own watcher process
    ("rank 1/3 (pid P on host) ended before finishing") or from a peer's
    watch thread ("rank 1 (pid P on host) ended while the job was still running")."""
    return re.search(rf"rank {rank}(/3)? \(pid {pid_of(rank, out)} on \S+\) ended", err)


def dev_shm():
    return set(os.listdir("/dev/shm"))


@pytest.mark.jax
def test_a_rank_that_raises():
    """...and the job leaves /dev/shm as it was: the MPI library's files there (MPICH's 2 MiB segment,
    Open MPI's 16 MiB one a rank) stayed after every job the package ended with MPI_Abort (issue 81)."""
    before = dev_shm()
    rc, out, err, seconds, alive = launch_failing_job("raise")
    text = check_ended(rc, out, err, seconds, alive)
    assert "ValueError: rank 1 fails on purpose" in err, text
    assert "rank 1/3 stopped on an uncaught ValueError" in err, text
    assert dev_shm() - before == set(), text


@pytest.mark.jax
def test_a_rank_killed_inside_a_collective():
    before = dev_shm()
    rc, out, err, seconds, alive = launch_failing_job("kill")
    text = check_ended(rc, out, err, seconds, alive)
    assert dev_shm() - before == set(), text  # (the rank that names it ends the job: issue 81)
    ours = named_dead_rank(1, out, err)
    assert ours, text
    others = [r for r in (0, 2) if named_dead_rank(r, out, err)]
    assert not others, f"rank(s) {others} named as dead: the launcher killed them after rank 1 died\n" + text


@pytest.mark.jax
@pytest.mark.skipif(not HYDRA, reason="-disable-auto-cleanup is a Hydra option (MPICH's and Intel MPI's launcher)")
def test_a_killed_rank_is_named_when_the_launcher_does_not_clean_up():
    """As under srun without --kill-on-bad-exit: the other ranks must end the job themselves."""
    rc, out, err, seconds, alive = launch_failing_job("kill", ["-disable-auto-cleanup"])
    text = check_ended(rc, out, err, seconds, alive)
    assert named_dead_rank(1, out, err), text


@pytest.mark.jax
def test_a_rank_that_calls_os_exit():
    rc, out, err, seconds, alive = launch_failing_job("os_exit")
    check_ended(rc, out, err, seconds, alive)


@pytest.mark.jax
def test_a_rank_that_finishes_early_is_named():
    """The others wait in a psum's check through the library: the peers watch names rank 1 once it has
    finished and they have waited MPI_COLLECTIVES_EXIT_TIMEOUT in MPI."""
    rc, out, err, seconds, alive = launch_failing_job("exit", env={"MPI_COLLECTIVES_NODE_PATH_ROUND": "0"})
    text = check_ended(rc, out, err, seconds, alive)
    assert re.search(r"rank\(s\) 1 finished the program while rank [02] has waited \d+ s in MPI", err), text


@pytest.mark.jax
@pytest.mark.skipif(not ONCE, reason="the round's sentence is the wrapper's own, the same on every family (CI time)")
def test_a_rank_that_finishes_early_is_named_by_the_node_paths_round():
    """The same with the psum's check in the node path's round (one node, the default): the others find
    rank 1 at MPI_Finalize in the window at once, and name the collective it skipped."""
    rc, out, err, seconds, alive = launch_failing_job("exit")
    text = check_ended(rc, out, err, seconds, alive)
    assert re.search(r"rank [02]: rank 1 reached MPI_Finalize while this rank waits for it in all-reduce #\d+ \(sum "
                     r"of \d+ f32\) on communicator \d+: the ranks ran different numbers of collectives", err), text


@pytest.mark.jax
def test_a_rank_that_finishes_before_its_first_collective_is_named():
    """The others wait for it in JAX's start-up exchange, not in MPI."""
    rc, out, err, seconds, alive = launch_failing_job("exit_first")
    text = check_ended(rc, out, err, seconds, alive)
    assert re.search(r"rank\(s\) 1 finished the program while rank [02] has waited \d+ s in JAX's start-up "
                     r"exchange", err), text


def ready_count(lines):
    # (mpiexec can splice one rank's line into another's: count in the whole text)
    return len(re.findall(r"READY rank \d+", "".join(lines)))


def ready_ranks(proc, n, timeout=90):
    """Read the job's stdout until n ranks said READY; the lines read."""
    return read_until(proc, lambda lines: ready_count(lines) >= n, timeout)


@pytest.mark.jax
def test_sigterm_to_the_launcher_stops_every_rank():
    """What `timeout`, scancel and schedulers send: one line per rank, all gone soon; the one line
    docs/checkpoints.md promises, no flight record after it (a cancelled job is no fault to explain;
    it printed about 33 lines a rank)."""
    proc, marker = start_job("sigterm")
    lines = ready_ranks(proc, 3)
    assert ready_count(lines) == 3, "".join(lines)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rc, out, err, seconds, alive = finish_job(proc, marker, start)
    text = check_ended(rc, "".join(lines) + out, err, seconds, alive)
    assert seconds < 15, text
    if EXPECTED_FAMILY != "openmpi":  # Open MPI's launcher kills its ranks itself, at once
        for rank in range(3):
            assert f"rank {rank}/3 was asked to stop (SIGTERM" in err, text
        ours = sorted(line for line in err.splitlines()
                      if line.startswith("mpi-collectives") or line.startswith("  #"))
        assert ours == [f"mpi-collectives: rank {rank}/3 was asked to stop (SIGTERM: the launcher, scancel or a "
                        "time limit); ending it now." for rank in range(3)], text


@pytest.mark.jax
def test_a_failing_job_does_not_disturb_another_on_the_same_node():
    """Each job's watchers claim a report name of their own (from its coordinator address)."""
    start = time.monotonic()
    healthy, healthy_marker = start_job("none")
    failing, failing_marker = start_job("kill")
    rc, out, err, seconds, alive = finish_job(failing, failing_marker, start)
    check_ended(rc, out, err, seconds, alive)
    rc, out, err, seconds, alive = finish_job(healthy, healthy_marker, start)
    text = f"exit {rc}\n--- stdout\n{out[-4000:]}\n--- stderr\n{err[-4000:]}"
    assert rc == 0 and not alive, text
    assert sorted(re.findall(r"DONE rank (\d)", out)) == ["0", "1", "2"], text
    assert "mpi-collectives: error" not in err, text

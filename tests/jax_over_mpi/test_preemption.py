"""SIGTERM keeps what the user asked for (mpi_collectives/integration/preemption.py): a
training loop that asks JAX's preemption sync point reaches it on every rank
at the same step, saves and ends 0, as over gloo; a rank that cannot get
there is ended with a line after MPI_COLLECTIVES_PREEMPTION_GRACE seconds; a
loop that never asks is ended at once. For programs through initialize() and
for programs that start jax.distributed with their own arguments.
tests/programs/preemption.py is the loop."""
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from helpers import EXPECTED_FAMILY, NOT_STANDARD, ONCE, PROGRAMS, mpiexec_path, read_until
from mpi_collectives.tools import launching
from test_failures import finish_job

# Every family runs the loop that saves and the grace through initialize(); the jax-version configurations
# (scripts/test.sh) run the loop that saves, where JAX's preemption API could differ; the plain program's
# grace and a loop that never asks (family-independent paths of ours) run once, on MPICH (CI's budget).
pytestmark = [pytest.mark.jax, NOT_STANDARD]
once = pytest.mark.skipif(not ONCE, reason="family-independent: runs once, in the mpich configuration")
PROGRAM = os.path.join(PROGRAMS, "preemption.py")
BACKENDS = ["initialize", "plain"]


def start(backend, mode, jax_env, save_dir, env=None):
    marker = f"mpic-preempt-{uuid.uuid4().hex}"
    full = dict(os.environ, **(env or {}))
    if backend == "plain":
        full.update(jax_env)
    else:
        full.update(JAX_PLATFORMS="cpu")
        full.pop("MPITRAMPOLINE_LIB", None)
    proc = launching.start([mpiexec_path(), "-n", "2", sys.executable, PROGRAM, backend, mode, marker,
                            str(save_dir)], env=full)
    return proc, marker


def steps_seen(lines):
    return len(re.findall(r"STEP \d+ \d+", "".join(lines)))


def stop(proc, marker):
    """SIGTERM as a scheduler sends it: to the launcher, which forwards it to every rank (Hydra);
    Open MPI's mpirun kills its ranks soon after forwarding, so there, as Slurm's --signal does,
    to the ranks themselves."""
    if EXPECTED_FAMILY == "openmpi":
        ranks = f"^{re.escape(sys.executable)} {re.escape(PROGRAM)} .*{marker}"  # not mpirun's own line
        found = subprocess.run(["pgrep", "-f", ranks], capture_output=True, text=True).stdout.split()
        parent = {pid: open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1] for pid in found}
        pids = [pid for pid in found if parent[pid] not in found]  # each rank's watcher process is its child
        assert len(pids) == 2, (found, parent)
        for pid in pids:
            os.kill(int(pid), signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)


def run_until_stopped(backend, mode, jax_env, save_dir, env=None):
    proc, marker = start(backend, mode, jax_env, save_dir, env)
    lines = read_until(proc, lambda text: steps_seen(text) >= 10)  # a few steps on both ranks
    assert steps_seen(lines) >= 10, "".join(lines)
    begin = time.monotonic()
    stop(proc, marker)
    rc, out, err, seconds, alive = finish_job(proc, marker, begin)
    out = "".join(lines) + out
    return rc, out, err, seconds, alive, f"exit {rc} after {seconds:.1f} s\n--- stdout\n{out[-3000:]}\n" \
                                        f"--- stderr\n{err[-4000:]}"


@pytest.mark.version_dependent
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_that_asks_the_sync_point_saves_on_every_rank_and_ends_0(backend, jax_env, tmp_path):
    rc, out, err, seconds, alive, text = run_until_stopped(backend, "loop", jax_env, tmp_path)
    assert rc == 0 and not alive and seconds < 20, text
    saved = sorted(re.findall(r"SAVED (\d+) (\d+)", out))
    assert [r for r, _ in saved] == ["0", "1"] and saved[0][1] == saved[1][1], text  # the same step
    assert sorted(os.listdir(tmp_path)) == [f"rank-{r}-step-{s}" for r, s in saved], text
    for rank in range(2):
        assert (f"rank {rank}/2 was asked to stop (SIGTERM); its program asks JAX's preemption sync point, "
                "so it has 60 s to reach it, save and end") in err, text


@pytest.mark.parametrize("backend", ["initialize", pytest.param("plain", marks=once)])
def test_a_rank_that_cannot_reach_the_sync_point_is_ended_after_the_grace(backend, jax_env, tmp_path):
    rc, out, err, seconds, alive, text = run_until_stopped(backend, "stuck", jax_env, tmp_path,
                                                           {"MPI_COLLECTIVES_PREEMPTION_GRACE": "5"})
    assert rc != 0 and not alive and 5 <= seconds < 30, text
    assert not os.listdir(tmp_path), text
    assert re.search(r"rank [01]/2 was asked to stop \(SIGTERM\) 5 s ago and has not ended: it did not reach JAX's "
                     r"preemption sync point", err), text


@once
def test_a_loop_that_never_asks_is_ended_at_once(jax_env, tmp_path):
    rc, out, err, seconds, alive, text = run_until_stopped("initialize", "never", jax_env, tmp_path)
    assert rc != 0 and not alive and seconds < 15, text
    assert "rank 0/2 was asked to stop (SIGTERM: the launcher, scancel or a time limit); ending it now" in err, text
    assert "preemption sync point" not in err, text

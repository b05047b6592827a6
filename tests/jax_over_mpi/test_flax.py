"""The stack JAX users train with, over MPI (issue 54): examples/train_flax.py, a Flax NNX model
with Optax's adamw and Orbax checkpoints, data-parallel (dp) and fully sharded (fsdp) at 2 and 3
ranks against one process trained on the same global batches, a run stopped and resumed, and
SIGTERM in the middle (saved at one step on every rank, resumed to the same parameters).

Once, in the mpich configuration, whose venv scripts/setup_beside.sh gives flax, optax and
orbax-checkpoint at the versions pinned there (what runs here is Python over JAX's collectives,
which every family's own suites check); elsewhere, or where they are missing, it skips with a line.
The tolerance against one process: 1e-6 absolute and 1e-5 relative, float32 sums in another order
(2026-11-27: at most 5e-8 apart after 30 steps)."""
import importlib.util
import os
import re
import signal
import sys

import numpy as np
import pytest

from helpers import ONCE, ROOT, explain, mpiexec_path, mpirun, preempt_after_first_save, preempted_step
from mpi_collectives.tools import launching

EXAMPLE = os.path.join(ROOT, "examples", "train_flax.py")
STEPS = "40"


def installed(module) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


MISSING = [m for m in ("flax", "optax", "orbax.checkpoint") if not installed(m)]
pytestmark = [pytest.mark.jax, pytest.mark.skipif(not ONCE, reason="Flax, Optax and Orbax: once, in mpich"),
              pytest.mark.skipif(bool(MISSING), reason=f"{', '.join(MISSING)} not installed in this venv "
                                                       "(scripts/setup_beside.sh installs them)")]


def train(n, folder, *extra, timeout=300):
    return mpirun(n, [sys.executable, EXAMPLE, "--dir", str(folder), "--steps", STEPS, "--every", "20", *extra],
                  timeout=timeout)


def done(proc, n, sharding):
    found = re.findall(rf"rank (\d+): done: step 39, loss [\d.]+, parameters ([0-9a-f]+) \({sharding}, {n} ranks\)",
                       proc.stdout)
    assert proc.returncode == 0 and sorted(int(r) for r, _ in found) == list(range(n)), explain(proc)
    assert len({d for _, d in found}) == 1, explain(proc)  # (and assert_equal checked every leaf)
    return found[0][1]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    folder = tmp_path_factory.mktemp("flax-one")
    proc = train(1, folder / "ck", "--out", str(folder / "one.npz"))
    done(proc, 1, "dp")
    return np.load(folder / "one.npz")


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("sharding", ["dp", "fsdp"])
def test_both_shardings_agree_with_one_process(tmp_path, one_process, sharding, n):
    proc = train(n, tmp_path / "ck", "--sharding", sharding, "--out", str(tmp_path / "p.npz"))
    done(proc, n, sharding)
    got = np.load(tmp_path / "p.npz")
    assert sorted(got.files) == sorted(one_process.files)
    for key in got.files:
        np.testing.assert_allclose(got[key], one_process[key], rtol=1e-5, atol=1e-6, err_msg=key)
    if sharding == "fsdp":
        assert "l2/kernel/value" in got.files  # (a 256 x 256 weight: sharded over 2 ranks, replicated over 3)


def test_a_stopped_run_resumes_to_the_same_parameters_bit_for_bit(tmp_path):
    through = done(train(2, tmp_path / "through", "--sharding", "fsdp"), 2, "fsdp")
    stopped = train(2, tmp_path / "again", "--sharding", "fsdp", "--stop-at", "27")
    assert stopped.returncode == 0 and stopped.stdout.count("stopped after step 27") == 2, explain(stopped)
    resumed = train(2, tmp_path / "again", "--sharding", "fsdp")
    assert resumed.stdout.count("resumed from step 20") == 2, explain(resumed)
    assert done(resumed, 2, "fsdp") == through


def test_sigterm_saves_on_every_rank_at_one_step_and_resumes(tmp_path):
    through = done(train(2, tmp_path / "through", "--sharding", "fsdp"), 2, "fsdp")
    proc = launching.start([mpiexec_path(), "-n", "2", sys.executable, EXAMPLE, "--dir", str(tmp_path / "ck"),
                            "--sharding", "fsdp", "--steps", "400", "--every", "20", "--step-seconds", "0.2"],
                           env=launching.environment())
    step = preempted_step(*preempt_after_first_save(proc, lambda: os.kill(proc.pid, signal.SIGTERM)))
    assert 20 <= step < 399
    resumed = train(2, tmp_path / "ck", "--sharding", "fsdp")
    assert resumed.stdout.count(f"resumed from step {step}") == 2, explain(resumed)
    assert done(resumed, 2, "fsdp") == through

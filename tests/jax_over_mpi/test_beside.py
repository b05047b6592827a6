"""Beside the tools our users already run, in the same job: Orbax's
CheckpointManager (examples/checkpoint_orbax.py: saves, saves on SIGTERM at
the same step on every rank and ends 0, resumes to exactly the parameters of
a run that went through) and mpi4jax (tests/programs/beside_mpi4jax.py: its
collectives and JAX's own over this package in one program, exact).

They run once, in the mpich configuration, whose venv scripts/setup_beside.sh
gives orbax-checkpoint and mpi4jax (docs/contributing.md: what the installs
cost); elsewhere, or where they are missing, each test skips with a line.
The same example under srun, ended by scancel, is in tests/cluster/."""
import importlib.util
import os
import re
import signal
import sys

import pytest

from helpers import (ONCE, PROGRAMS, ROOT, explain, mpiexec_path, mpirun, preempt_after_first_save,
                     preempted_step)
from mpi_collectives.tools import launching

EXAMPLE = os.path.join(ROOT, "examples", "checkpoint_orbax.py")
pytestmark = [pytest.mark.jax, pytest.mark.skipif(not ONCE, reason="beside Orbax and mpi4jax: once, in mpich")]


def installed(module) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing ("orbax" for orbax.checkpoint)
        return False


def needs(module):
    return pytest.mark.skipif(not installed(module),
                              reason=f"{module} is not installed in this venv (scripts/setup_beside.sh installs it)")


def digest(proc, n):
    found = re.findall(r"rank (\d+): done: step (\d+), loss [\d.]+, parameters ([0-9a-f]+)", proc.stdout)
    assert sorted(int(r) for r, _, _ in found) == list(range(n)), explain(proc)
    assert len({(s, d) for _, s, d in found}) == 1, explain(proc)
    return found[0][1:]


def checkpoint_run(folder, *extra):
    return mpirun(2, [sys.executable, EXAMPLE, "--dir", str(folder), "--steps", "60", "--every", "20", *extra],
                  env={"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}, timeout=240)


@needs("orbax.checkpoint")
def test_orbax_saves_on_sigterm_and_resumes_to_the_same_parameters(tmp_path):
    through = checkpoint_run(tmp_path / "through")
    assert through.returncode == 0, explain(through)
    want = digest(through, 2)
    assert sorted(os.listdir(tmp_path / "through")) == ["0", "20", "40"], os.listdir(tmp_path / "through")

    # The same run, SIGTERM to the launcher once it has saved step 20 (a step takes 50 ms more).
    folder = tmp_path / "stopped"
    cmd = [mpiexec_path(), "-n", "2", sys.executable, EXAMPLE, "--dir", str(folder), "--steps", "60", "--every",
           "20", "--step-seconds", "0.05"]
    proc = launching.start(cmd, env=launching.environment({"MPITRAMPOLINE_LIB": None,
                                                          "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}))
    step = preempted_step(*preempt_after_first_save(proc, lambda: proc.send_signal(signal.SIGTERM)))
    assert 20 < step < 59 and str(step) in os.listdir(folder), (step, os.listdir(folder))

    resumed = checkpoint_run(folder)
    assert resumed.returncode == 0, explain(resumed)
    assert resumed.stdout.count(f"resumed from step {step}") == 2, explain(resumed)
    assert digest(resumed, 2) == want, explain(resumed)


@needs("mpi4jax")
@pytest.mark.parametrize("n", [2, 3])
def test_mpi4jax_and_jax_collectives_in_one_program(n):
    proc = mpirun(n, [sys.executable, os.path.join(PROGRAMS, "beside_mpi4jax.py")], timeout=240)
    assert proc.returncode == 0, explain(proc)
    assert sorted(re.findall(r"EXACT rank (\d+) of", proc.stdout)) == [str(r) for r in range(n)], explain(proc)

"""NetKet's variational Monte Carlo over MPI (issue 61). examples/netket_vmc.py at 2 ranks gives the
energies of one process with 2 CPU devices (NetKet's single-node recipe) bit for bit, and so does a
program written the way NetKet's docs show, which calls jax.distributed.initialize() itself after
`import mpi_collectives` (tests/programs/netket_plain.py).

The last bits of NetKet's energies depend on the threads each process computes with: XLA's CPU
thread pool (one thread, or several) and OpenBLAS's (SR's solve). One process alone gives other last
bits under `taskset -c 0` than on both cores. So the ranks run with MPI_COLLECTIVES_BIND_CPUS=2:
their compute threads keep both cores, as the one process's do. With the default binding (one core
a rank) the energies of 40 iterations were at most 7e-15 from one process's (2-core VM, jax 0.10.2,
NetKet 3.23.0, 2026-11-28; docs/netket.md).

Once, in the mpich configuration, whose venv scripts/setup_beside.sh gives netket at the version
pinned there (what runs here is JAX's collectives from Python, which every family's suites check);
elsewhere, or where netket is missing, it skips with a line."""
import importlib.util
import json
import os
import re
import sys

import pytest

from helpers import ONCE, PROGRAMS, ROOT, explain, extended, mpirun, run

EXAMPLE = os.path.join(ROOT, "examples", "netket_vmc.py")
ITERATIONS = "8"
# As from a user's shell (the package sets these itself); the ranks' compute threads on every core
# (above); the layout note is for users.
ENV = {"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None, "JAX_NUM_CPU_DEVICES": None,
       "MPI_COLLECTIVES_LAYOUT_NOTE": "0"}
RANKS_ENV = {**ENV, "MPI_COLLECTIVES_BIND_CPUS": "2"}


def installed(module) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


pytestmark = [pytest.mark.jax, pytest.mark.skipif(not ONCE, reason="NetKet: once, in mpich"),
              pytest.mark.skipif(not installed("netket"), reason="netket is not installed in this venv "
                                                                 "(scripts/setup_beside.sh installs it)")]


def energies(path):
    with open(path) as f:
        found = json.load(f)
    assert len(found["energies"]) == int(ITERATIONS), found
    return {"energies": found["energies"], "variances": found["variances"]}


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """One process with 2 CPU devices, no launcher: the energies to match."""
    out = tmp_path_factory.mktemp("netket") / "one.json"
    proc = run([sys.executable, EXAMPLE, "--iterations", ITERATIONS, "--output", str(out)],
               env={**ENV, "JAX_NUM_CPU_DEVICES": "2"}, timeout=240)
    assert proc.returncode == 0, explain(proc)
    assert "1 process, 2 devices" in proc.stdout, explain(proc)
    return energies(out)


def test_the_example_at_2_ranks_gives_one_process_energies_bit_for_bit(tmp_path, one_process):
    out = tmp_path / "ranks.json"
    proc = mpirun(2, [sys.executable, EXAMPLE, "--iterations", ITERATIONS, "--output", str(out)],
                  env=RANKS_ENV, timeout=240)
    assert proc.returncode == 0, explain(proc)
    # Rank 0 alone prints: one line an iteration, one `done:` line.
    assert len(re.findall(r"^iteration +0 +energy ", proc.stdout, re.M)) == 1, explain(proc)
    assert len(re.findall(r"^done: 20 sites, 8 iterations, .*2 processes, 2 devices", proc.stdout, re.M)) == 1, \
        explain(proc)
    assert energies(out) == one_process, explain(proc)


def test_the_plain_way_netket_shows_gives_the_same_energies(tmp_path, one_process):
    out = tmp_path / "plain.json"
    proc = mpirun(2, [sys.executable, os.path.join(PROGRAMS, "netket_plain.py"), ITERATIONS, str(out)],
                  env=RANKS_ENV, timeout=240)
    assert proc.returncode == 0 and "PASS netket plain: 2 processes, 2 devices" in proc.stdout, explain(proc)
    assert energies(out) == one_process, explain(proc)


# Adam under a schedule alone: SGD's run took the same path with no optimizer state to save, so every
# check it made is one of this run's, and it cost 60 s of CI's 75 minutes (docs/contributing.md).
@extended  # (78 s: Flax's SIGTERM resume under srun and in test_flax.py run in CI)
@pytest.mark.parametrize("optimizer", ["adam-schedule"])
def test_the_example_saves_on_sigterm_and_resumes_at_its_iteration(tmp_path, optimizer):
    """--checkpoint: SIGTERM to the launcher mid-run, every rank stops at one iteration, rank 0 saves
    and the job ends 0; started again it resumes there, and its energies are those of a run that went
    through, bit for bit (issue 65: the Slurm recipe's --signal=TERM@120 had nothing that saved). With
    Adam under an optax schedule too, whose moments and step count are state (issue 73: the recipe
    saved the variational state alone, and a resumed Adam run differed from iteration 28 on). --output
    holds every iteration, those before the stop too (issue 74: the resumed run's file lost them)."""
    from helpers import mpiexec_path, sigterm_once

    total = 30
    through = tmp_path / "through.json"
    chosen = ["--optimizer", optimizer]
    proc = mpirun(2, [sys.executable, EXAMPLE, "--iterations", str(total), "--output", str(through), *chosen],
                  env=RANKS_ENV, timeout=300)
    assert proc.returncode == 0, explain(proc)
    checkpoint = str(tmp_path / "state.mpack")
    code, text = sigterm_once([mpiexec_path(), "-n", "2", sys.executable, EXAMPLE, "--iterations", "100000",
                               "--checkpoint", checkpoint, *chosen],
                              lambda got: any(re.match(r"iteration +10 ", line) for line in got), env=RANKS_ENV)
    assert code == 0, text
    at = int(re.search(r"^saved: iteration (\d+) to ", text, re.M).group(1))
    assert 10 <= at < total, text
    resumed = tmp_path / "resumed.json"
    with open(checkpoint, "rb") as f:
        saved = f.read()
    proc = mpirun(2, [sys.executable, EXAMPLE, "--iterations", str(total), "--checkpoint", checkpoint,
                      "--output", str(resumed), *chosen], env=RANKS_ENV, timeout=300)
    assert proc.returncode == 0 and f"resumed: iteration {at} from {checkpoint}\n" in proc.stdout, explain(proc)
    assert re.search(rf"^done: 20 sites, {total} iterations", proc.stdout, re.M), explain(proc)
    with open(through) as f:
        want = json.load(f)["energies"]
    with open(resumed) as f:  # the whole run's: the iterations before the stop came back with the checkpoint
        assert json.load(f)["energies"] == want, explain(proc)
    # A file of the recipe before (the iteration and the variational state, no optimizer's state) resumes
    # with a fresh optimizer, and says so in one line.
    import flax.serialization

    driver = flax.serialization.msgpack_restore(saved)["driver"]
    with open(checkpoint, "wb") as f:
        f.write(flax.serialization.msgpack_serialize({"step": driver["_step_count"], "state": driver["state"]}))
    proc = mpirun(2, [sys.executable, EXAMPLE, "--iterations", str(at + 2), "--checkpoint", checkpoint, *chosen],
                  env=RANKS_ENV, timeout=300)
    assert proc.returncode == 0, explain(proc)
    assert re.search(rf"^resumed: iteration {at} from .*, a checkpoint of the older recipe without the "
                     r"optimizer's state: the optimizer starts afresh", proc.stdout, re.M), explain(proc)

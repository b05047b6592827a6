"""What the test files share: the configuration under test, where things
are, and launching with a timeout.

Multi-rank tests start `mpiexec` themselves (from the same installation as
the running Python, so the MPI under test is the one the venv holds), each
launch with a timeout so that a hang fails the test instead of CI. The
launching itself is the package's (mpi_collectives/tools/launching.py), which the
scripts and the bench use too.
"""
import json
import os
import subprocess
import sys
import time

import pytest

from mpi_collectives.tools import launching
from mpi_collectives.tools.launching import free_port, mpiexec_path  # noqa: F401  (for the test files)

HERE = os.path.dirname(os.path.abspath(__file__))  # tests/: the cwd that keeps the installed package first
ROOT = os.path.dirname(HERE)
PROGRAMS = os.path.join(HERE, "programs")  # what the tests launch
MPI_SUITES = os.path.join(HERE, "jax_over_mpi", "mpi_suites")  # pytest suites run inside mpiexec
LAUNCH_TIMEOUT = int(os.environ.get("MPI_COLLECTIVES_TEST_TIMEOUT", "300"))

# The ABI family the suite is run against (scripts/test.sh sets it per venv).
EXPECTED_FAMILY = os.environ.get("MPI_COLLECTIVES_TEST_FAMILY", "mpich")
# The configuration of scripts/test.sh (mpich, impi, openmpi, standard,
# jax-<version>): tests whose answer cannot depend on it run in "mpich" only.
TEST_CONFIG = os.environ.get("MPI_COLLECTIVES_TEST_CONFIG", "mpich")
ONCE = TEST_CONFIG == "mpich"
# The standard-ABI configuration loads MPICH's libmpi_abi.so under MPICH's own Hydra: what depends
# only on the package's watchers and the launcher, not on the library's ABI (the stall limit and
# trace files, a plain program's faults, the preemption grace, the sub-mesh's 2-device case), the
# mpich configuration answers; the ABI-dependent cases (collectives, the wrapper, a stall's
# report, a rank killed) run there as on every family.
NOT_STANDARD = pytest.mark.skipif(TEST_CONFIG == "standard", reason="the watchers and MPICH's launcher, the same "
                                  "as in the mpich configuration: the standard ABI changes only the library's ABI")

# The configurations of one more MPI family (the others run jax versions or one part): what a rank
# finds alone before MPI starts, or Python decides without MPI, is the same over every family, and
# runs in the mpich configuration and on each jax version only (CI time: docs/contributing.md).
FAMILY_CONFIG = TEST_CONFIG in ("impi", "openmpi", "standard")
SAME_ON_EVERY_FAMILY = pytest.mark.skipif(FAMILY_CONFIG, reason="found before MPI starts, or by Python without "
                                          "MPI: the same on every family (the mpich configuration and each jax)")

# The long checks (MPI_COLLECTIVES_TEST_EXTENDED=1): each a whole outside program or suite of minutes
# that reruns what faster tests already hold (other projects' suites, an image build, MPICH's own suite,
# the sanitizers' builds, a NetKet resume), run by hand before a release and after changing what they
# cover, never in CI's 75 minutes (docs/contributing.md lists them and their last results).
EXTENDED = os.environ.get("MPI_COLLECTIVES_TEST_EXTENDED") == "1"
extended = pytest.mark.skipif(not EXTENDED, reason="a long check (MPI_COLLECTIVES_TEST_EXTENDED=1; "
                                                   "docs/contributing.md): not in CI's 75 minutes")

# mpi4py's wheels hold builds for the MPICH and Open MPI ABIs only: with the
# standard ABI it would load MPICH's libmpi.so.12 beside libmpi_abi.so.1.
needs_mpi4py = pytest.mark.skipif(
    EXPECTED_FAMILY == "standard",
    reason="mpi4py's wheel has no build for the MPI-5 standard ABI",
)


def wrapper_path():
    # From the tests folder: the source tree at the top would shadow the installed package.
    return subprocess.check_output([sys.executable, "-m", "mpi_collectives", "libpath"], text=True,
                                   cwd=HERE).strip()


def wrapper_built(into, **env):
    """The wrapper built from this checkout into the folder `into` by native/build_native.py with `env`
    (MPI_COLLECTIVES_SANITIZE, MPI_COLLECTIVES_TEST_HOOKS): the built library's path."""
    proc = subprocess.run([sys.executable, os.path.join("native", "build_native.py"), str(into)], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, explain(proc)
    return proc.stdout.strip().splitlines()[-1]


def package_with_wrapper(wrapper, site):
    """A copy of the installed package in the folder `site` with `wrapper` in its library's place (the
    package and MPItrampoline must load one file); PYTHONPATH=site imports it (checked here)."""
    import shutil

    import mpi_collectives
    package = os.path.join(str(site), "mpi_collectives")
    shutil.copytree(os.path.dirname(mpi_collectives.__file__), package)
    for name in os.listdir(package):
        if name.startswith("_mpiabi") and name.endswith(".so"):
            shutil.copy(wrapper, os.path.join(package, name))
    where = subprocess.run([sys.executable, "-c", "import mpi_collectives; print(mpi_collectives.__file__)"],
                           env={**os.environ, "PYTHONPATH": str(site)}, cwd=str(site), capture_output=True,
                           text=True, timeout=60)
    assert where.stdout.startswith(package), explain(where)
    return str(site)


def run(cmd, env=None, timeout=LAUNCH_TIMEOUT, cwd=None):
    """Run a command with captured text output and a timeout (the whole
    launch is killed then, and the test fails); `env` changes this process's
    environment, None removing a variable."""
    try:
        return launching.run(cmd, env=launching.environment(env), timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired as e:
        out, err = e.output, e.stderr
        pytest.fail(f"timed out after {timeout}s: {' '.join(cmd)}\nstdout:\n{out[-6000:]}\nstderr:\n{err[-6000:]}")


def mpirun(n, args, env=None, timeout=LAUNCH_TIMEOUT):
    return run([mpiexec_path(), "-n", str(n)] + list(args), env=env, timeout=timeout)


def read_until(proc, enough, timeout=120):
    """A running job's stdout, read as it comes until enough(lines) or the timeout; the lines read.
    Reads the pipe's bytes itself: a text readline() may take several lines into its buffer at once
    (Open MPI's launcher forwards them in one chunk), and select() on the pipe then no longer sees
    them. The launcher may splice one rank's line into another's: test the joined text."""
    import select
    fd, lines, pending = proc.stdout.fileno(), [], b""
    deadline = time.monotonic() + timeout
    while not enough(lines) and time.monotonic() < deadline:
        if select.select([fd], [], [], 1)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            *complete, pending = (pending + chunk).split(b"\n")
            lines += [line.decode(errors="replace") + "\n" for line in complete]
    return lines + ([pending.decode(errors="replace")] if pending else [])


def sigterm_once(cmd, ready, env=None, cwd=None, timeout=240):
    """Start a launch, read its stdout until ready(lines), send SIGTERM to the launcher, wait for its
    end; (exit status, everything it wrote as text). The launch is ended if it outlives the timeout."""
    import signal

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=launching.environment(env),
                            cwd=cwd, start_new_session=True)
    try:
        lines = read_until(proc, ready, timeout=timeout)
        assert ready(lines), "".join(lines)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            launching.end(proc)
    return proc.returncode, "".join(lines) + out.decode(errors="replace") + err.decode(errors="replace")


def preempt_after_first_save(proc, stop, timeout=120):
    """A running examples/checkpoint_orbax.py job (--every 20): once both ranks have saved step 20,
    stop() (SIGTERM to the launcher, or scancel); (exit status, stdout, stderr, seconds from the
    stop to the end). The job is ended if it outlives the timeout."""
    stopped = None
    try:
        lines = read_until(proc, lambda got: "".join(got).count("saved step 20") == 2, timeout=timeout)
        assert "".join(lines).count("saved step 20") == 2, "".join(lines)
        stopped = time.monotonic()
        stop()
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            launching.end(proc)
    return proc.returncode, "".join(lines) + out, err, time.monotonic() - stopped


def preempted_step(returncode, out, err, seconds) -> int:
    """The step both ranks saved on preemption (the same on both, the job ended 0)."""
    import re
    text = f"exit {returncode} {seconds:.1f} s after the stop\n{out}\n{err[-3000:]}"
    assert returncode == 0, text
    saved = re.findall(r"rank (\d): preempted: saved step (\d+), ending", out)
    assert sorted(r for r, _ in saved) == ["0", "1"] and len({s for _, s in saved}) == 1, text
    return int(saved[0][1])


def explain(proc):
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}"


# Open MPI's launcher ends every rank as soon as one exits non-zero (prterun's banner says so):
# an error each rank finds alone, before MPI starts, may then be printed by the first ranks only.
OPEN_MPI_ENDED_THE_JOB = "detected that one or more processes exited with non-zero status"


def said_on_every_rank(proc, text, n):
    """`text` is in stderr once per rank; under Open MPI's launcher, at least once and the
    launcher's banner that it ended the others (the error found by each rank alone)."""
    said = proc.stderr.count(text)
    if said == n:
        return True
    return 1 <= said < n and OPEN_MPI_ENDED_THE_JOB in proc.stderr


def check_every_rank_passed(proc, nranks, reports, expect_skipped=0):
    """Every rank of an MPI_SUITES launch ran the same tests and all passed
    (each rank writes its counts to `reports`; a rank that died writes none)."""
    assert proc.returncode == 0, explain(proc)
    found = sorted(p.name for p in reports.iterdir())
    assert found == [f"rank-{r}.json" for r in range(nranks)], f"reports: {found}\n" + explain(proc)
    counts = [json.loads((reports / name).read_text()) for name in found]
    assert all(c == counts[0] for c in counts), f"ranks disagree: {counts}\n" + explain(proc)
    assert counts[0]["failed"] == counts[0]["error"] == 0 and counts[0]["passed"] > 0, explain(proc)
    return counts[0]

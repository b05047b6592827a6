"""The launcher's MPI is the one loaded (native/src/base/loader.c): with the
mpich wheel and Debian's Open MPI 4.1 on one machine (its libmpi.so.40 on the
loader's default path), each launcher gets its own installation's library,
`info` says which rule chose it and which candidates were passed over, a
launcher's family wins over another family's library, LD_LIBRARY_PATH (a
loaded module) wins over a wheel's prefix, and MPI_COLLECTIVES_LIBMPI stays
final.

Runs in the debian-openmpi configuration of scripts/test.sh, which installs
Debian's openmpi-bin beside the mpich venv (the Open MPI most clusters still
run); skipped elsewhere."""
import os
import sys

import pytest

from helpers import PROGRAMS, TEST_CONFIG, explain, free_port, mpiexec_path, run, wrapper_path

DEBIAN_MPIRUN = "/usr/bin/mpirun.openmpi"
DEBIAN_LIBMPI = "/usr/lib/x86_64-linux-gnu/libmpi.so.40"
pytestmark = pytest.mark.skipif(
    TEST_CONFIG != "debian-openmpi" or not os.path.exists(DEBIAN_MPIRUN),
    reason="the debian-openmpi configuration of scripts/test.sh (Debian's Open MPI beside the mpich wheel)")
VENV_LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.executable))), "lib")
VENV_LIBMPI = os.path.join(VENV_LIB, "libmpi.so.12")


def info(launcher, env=None):
    proc = run(launcher + [sys.executable, "-m", "mpi_collectives", "info"], env=env, timeout=120)
    assert proc.returncode == 0, explain(proc)
    return proc, {line.split(None, 1)[0]: line.split(None, 1)[1] for line in proc.stdout.splitlines()
                  if len(line.split(None, 1)) == 2}


def debian(n):
    return [DEBIAN_MPIRUN, "--oversubscribe", "-n", str(n)]


def test_each_launcher_gets_its_own_installations_library():
    _, ours = info([mpiexec_path(), "-n", "1"])
    assert os.path.realpath(ours["library"]) == os.path.realpath(VENV_LIBMPI), ours
    assert ours["chosen_by"].startswith("the installation of the launcher that started this process ("), ours
    assert "hydra_pmi_proxy" in ours["chosen_by"], ours
    proc, theirs = info(debian(1))
    assert os.path.realpath(theirs["library"]) == os.path.realpath(DEBIAN_LIBMPI), explain(proc)
    assert theirs["family"] == "openmpi", explain(proc)
    assert theirs["chosen_by"] == ("the installation of the launcher that started this process "
                                   "(/usr/bin/orterun)"), explain(proc)
    assert f"{VENV_LIBMPI} (mpich: not the launcher's MPI)" in theirs["passed_over"], explain(proc)


def test_a_jax_job_under_debians_mpirun_is_exact(jax_env):
    env = dict(jax_env, MPI_COLLECTIVES_TEST_PORT=str(free_port()))
    proc = run(debian(2) + [sys.executable, os.path.join(PROGRAMS, "first_psum.py")], env=env, timeout=300)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.count("PASS") == 2, explain(proc)


def test_the_launchers_family_wins_without_its_installation():
    """Variables of Open MPI's launcher, no launcher program above (srun --mpi=pmix sets such
    variables): Open MPI's library on the loader's path before the mpich wheel's."""
    proc, got = info([], env={"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"})
    assert os.path.realpath(got["library"]) == os.path.realpath(DEBIAN_LIBMPI), explain(proc)
    assert got["chosen_by"] == ("the launcher's MPI family (openmpi), on the loader's own search "
                                "(its cache, system folders)"), explain(proc)


def test_ld_library_path_wins_over_a_wheels_prefix(tmp_path):
    """A module's MPI (LD_LIBRARY_PATH) before the same family's library in a wheel. The module
    here is the wheel's own lib folder seen through links (the library finds its own
    dependencies beside it, through $ORIGIN)."""
    for name in os.listdir(VENV_LIB):
        if (name.startswith("lib") and ".so" in name) or name == "mpich":  # (its dependencies' folder)
            os.symlink(os.path.join(VENV_LIB, name), tmp_path / name)
    proc, got = info([], env={"LD_LIBRARY_PATH": str(tmp_path)})
    assert got["library"] == str(tmp_path / "libmpi.so.12"), explain(proc)
    assert got["chosen_by"] == f"the first found, on LD_LIBRARY_PATH ({tmp_path})", explain(proc)
    assert got["passed_over"] == "none", explain(proc)  # the wheel's is the same file, not another library


def test_mpi_collectives_libmpi_stays_final():
    """Named explicitly, the wheel's MPICH is loaded even under Open MPI's launcher, which then
    cannot join it: the one sentence that says so, on every rank."""
    env = {"MPI_COLLECTIVES_LIBMPI": VENV_LIBMPI, "MPITRAMPOLINE_LIB": wrapper_path()}
    proc = run(debian(2) + [sys.executable, "-c", "import mpi_collectives; mpi_collectives.initialize()"],
               env=env, timeout=120)
    assert proc.returncode != 0, explain(proc)
    assert proc.stderr.count("the launcher and the library come from different MPI installations") == 2, \
        explain(proc)

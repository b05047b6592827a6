"""The examples a user copies first: each checks its own result and exits
non-zero when wrong; here they run at 2 and 4 ranks. The Slurm script cannot
run here: its shell syntax and what it refers to are checked."""
import os
import re
import subprocess
import sys

import pytest

from helpers import ROOT, explain, mpirun, needs_mpi4py, run

EXAMPLES = os.path.join(ROOT, "examples")
PY = sys.executable


def launch(n, name, *args):
    env = {"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}  # as from a user's shell
    return mpirun(n, [PY, os.path.join(EXAMPLES, name), *args], env=env, timeout=600)


@pytest.mark.jax
@pytest.mark.parametrize("n", [2, 4])
def test_train_data_parallel(n):
    proc = launch(n, "train_data_parallel.py", "--steps", "120")
    assert proc.returncode == 0, explain(proc)
    assert re.search(rf"done: loss [\d.]+ -> [\d.]+, parameters identical on all {n} ranks", proc.stdout), explain(proc)


@pytest.mark.jax
@pytest.mark.parametrize("n,shape", [(2, "1x2"), (4, "2x2")])
def test_mesh_2d(n, shape):
    proc = launch(n, "mesh_2d.py")
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.count(f"mesh {shape} (data x model)") == n, explain(proc)
    assert proc.stdout.count("result matches NumPy exactly") == n, explain(proc)


@needs_mpi4py
@pytest.mark.jax
@pytest.mark.parametrize("n", [2, 4])
def test_mpi4py_and_jax(n):
    proc = launch(n, "mpi4py_and_jax.py")
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.count("mpi4py and JAX agree, total 499500") == n, explain(proc)


@pytest.mark.jax
def test_mpirun_script():
    env = {"PYTHON": PY, "MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}
    proc = run(["bash", os.path.join(EXAMPLES, "mpirun.sh"), "2", os.path.join(EXAMPLES, "mesh_2d.py")],
               env=env, timeout=600)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.count("result matches NumPy exactly") == 2, explain(proc)


def test_slurm_script_parses_and_refers_to_what_exists():
    path = os.path.join(EXAMPLES, "slurm.sbatch")
    assert subprocess.run(["bash", "-n", path]).returncode == 0
    text = open(path).read()
    assert re.search(r"^#SBATCH --ntasks-per-node=\d+", text, re.M)
    assert "srun --kill-on-bad-exit=1" in text
    for script in re.findall(r"python (examples/\S+\.py)", text):
        assert os.path.exists(os.path.join(ROOT, script)), script


@pytest.mark.jax
def test_multiprocess_suite_runs_as_one_job(tmp_path):
    """examples/test_multiprocess_suite.py under mpiexec, as docs/testing.md runs it: every test
    passes, rank 0 alone reports."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}
    proc = mpirun(2, [PY, "-m", "pytest", "-q", "--color=no", "-p", "no:cacheprovider",
                      "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path),
                      os.path.join(EXAMPLES, "test_multiprocess_suite.py")],
                  env=env, timeout=600)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.count("5 passed") == 1, explain(proc)

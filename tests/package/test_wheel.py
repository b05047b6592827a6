"""The binary wheel as a cluster user gets it: built by scripts/build_wheels.sh
(the wheel configuration of scripts/test.sh passes its path in
MPI_COLLECTIVES_TEST_WHEEL), installed into a fresh venv with jax and the
mpich wheel, binaries only, on a PATH without any C compiler, then a 2-rank
JAX job from that venv (examples/hello_collectives.py) whose every
collective must be exact. Skipped in the other configurations."""
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from helpers import ROOT, explain, run

WHEEL = os.environ.get("MPI_COLLECTIVES_TEST_WHEEL")
pytestmark = pytest.mark.skipif(not WHEEL, reason="the wheel configuration of scripts/test.sh builds the wheel")
JAX = "0.10.2"  # what scripts/setup_env.sh installs on Python 3.11 and newer
TOOLS = ("sh", "bash", "env", "cat", "uname", "hostname", "ls", "rm", "mkdir", "dirname")


def no_compiler_path(folder):
    """A folder with the few programs a job runs besides the venv's own, and no cc, gcc or clang."""
    os.makedirs(folder)
    for tool in TOOLS:
        found = shutil.which(tool)
        if found:
            os.symlink(found, os.path.join(folder, tool))
    return folder


def test_the_wheel_is_tagged_for_every_cluster_os():
    name = os.path.basename(WHEEL)
    assert name.endswith("-cp310-abi3-manylinux_2_17_x86_64.whl"), name
    with zipfile.ZipFile(WHEEL) as z:
        names = z.namelist()
    assert "mpi_collectives/_mpiabi.abi3.so" in names, names
    assert "mpi_collectives_jax_plugin.py" in names, names


def test_installed_without_a_compiler_a_jax_job_is_exact(tmp_path):
    venv = str(tmp_path / "venv")
    base_python = getattr(sys, "_base_executable", None) or shutil.which("python3")
    subprocess.run([base_python, "-m", "venv", venv], check=True)
    path = f"{venv}/bin:{no_compiler_path(str(tmp_path / 'bin'))}"
    for compiler in ("cc", "gcc", "clang", "x86_64-linux-gnu-gcc"):
        assert shutil.which(compiler, path=path) is None, compiler
    env = {"PATH": path, "CC": None, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    proc = run([f"{venv}/bin/python", "-m", "pip", "install", "-q", "--only-binary", ":all:", WHEEL,
                f"jax=={JAX}", f"jaxlib=={JAX}", "mpich", "numpy"], env=env, timeout=900)
    assert proc.returncode == 0, explain(proc)
    libpath = run([f"{venv}/bin/python", "-m", "mpi_collectives", "libpath"], env=env, timeout=60, cwd=str(tmp_path))
    assert libpath.returncode == 0 and libpath.stdout.strip().startswith(venv), explain(libpath)
    env.update({"JAX_PLATFORMS": "cpu"})
    proc = run([f"{venv}/bin/mpiexec", "-n", "2", f"{venv}/bin/python",
                os.path.join(ROOT, "examples", "hello_collectives.py")], env=env, timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.count(" ok  median") == 4 and "WRONG" not in proc.stdout, explain(proc)
    assert f"collectives ran over {venv}/lib/libmpi.so.12 (mpich ABI)" in proc.stdout, explain(proc)

"""The Dockerfile, without a Docker engine: hadolint finds nothing in it, and
its steps (scripts/docker_steps.sh) build a working environment on this host,
in which the image's command passes. Once, on the MPICH configuration."""
import os
import shutil
import sys

import pytest

from helpers import EXPECTED_FAMILY, ROOT, explain, extended, run

only_once = pytest.mark.skipif(EXPECTED_FAMILY != "mpich" or "impi" in sys.prefix,
                               reason="the image holds the mpich wheel; checked on that configuration")


@only_once
def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint") or os.path.join(os.path.dirname(sys.executable), "hadolint")
    proc = run([hadolint, os.path.join(ROOT, "Dockerfile")], timeout=120)
    assert proc.returncode == 0 and not proc.stdout.strip(), explain(proc)


@only_once
@extended  # (37-56 s: the image's steps; hadolint's check above runs in CI)
@pytest.mark.jax
def test_image_steps_build_a_working_environment(tmp_path):
    venv = tmp_path / "image-venv"
    proc = run(["bash", os.path.join(ROOT, "scripts", "docker_steps.sh"), str(venv), ROOT], timeout=900)
    assert proc.returncode == 0, explain(proc)
    assert "family" in proc.stdout and "mpich" in proc.stdout, explain(proc)
    # The image's CMD, from its venv, as in the Dockerfile's last line.
    env = {"PATH": f"{venv}/bin:{os.environ['PATH']}", "JAX_PLATFORMS": "cpu", "VIRTUAL_ENV": None,
           "MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}
    proc = run([str(venv / "bin" / "mpiexec"), "-n", "2", str(venv / "bin" / "python"), "examples/mesh_2d.py"],
               env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0 and proc.stdout.count("result matches NumPy exactly") == 2, explain(proc)

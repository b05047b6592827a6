"""Host-level helpers (against multihost_utils), the command line, the settings table."""
import os
import re
import sys

import pytest

from helpers import EXPECTED_FAMILY, HERE, PROGRAMS, ROOT, explain, mpirun, run

# Its answers can differ between jax versions: scripts/test.sh runs it on each jax it tests.
pytestmark = pytest.mark.version_dependent

PY = sys.executable


@pytest.mark.jax
@pytest.mark.parametrize("n", [2, 4])
def test_host_helpers_match_multihost_utils(n):
    proc = mpirun(n, [PY, os.path.join(PROGRAMS, "host_helpers.py")])
    assert proc.returncode == 0 and proc.stdout.count("PASS host helpers") == n, explain(proc)
    assert re.search(r"time broadcast_one_to_all: ours [\d.]+ us, multihost_utils [\d.]+ us", proc.stdout)


@pytest.mark.parametrize("n", [1, 3])
def test_doctor(n):
    proc = mpirun(n, [PY, "-m", "mpi_collectives", "doctor"])
    assert proc.returncode == 0, explain(proc)
    pairs = 44 if n == 1 else 52  # with several ranks, also the 8 integer sums past the maximum
    assert f"MPI_Allreduce self-check, {pairs} dtype/op pairs: all right" in proc.stdout, explain(proc)
    assert proc.stdout.count("mpi-collectives doctor:") == 1  # rank 0 reports for all


@pytest.mark.skipif(EXPECTED_FAMILY != "openmpi", reason="Open MPI's op/avx component")
def test_doctor_catches_open_mpi_saturating_small_integer_sums():
    """Why the wrapper sets OMPI_MCA_op=^avx: with op/avx forced back on, 8- and
    16-bit sums past the maximum saturate instead of wrapping as XLA's do."""
    proc = mpirun(2, [PY, "-m", "mpi_collectives", "doctor"], env={"OMPI_MCA_op": "avx"})
    assert proc.returncode == 1, explain(proc)
    wrong = re.search(r"WRONG for (.*)", proc.stdout).group(1)
    assert wrong == ("int8 sum past its maximum, uint8 sum past its maximum, "
                     "int16 sum past its maximum, uint16 sum past its maximum"), explain(proc)
    assert "set OMPI_MCA_op=^avx yourself" in proc.stdout, explain(proc)


@pytest.mark.skipif(EXPECTED_FAMILY != "openmpi",
                    reason="only Open MPI has btl/ofi: the wrapper sets OMPI_MCA_btl under Open MPI alone")
def test_open_mpi_on_one_node_skips_the_fabric_probe():
    """Every rank local: the wrapper leaves btl/ofi out (its libfabric probing slept a second
    in each MPI_Init), and the job still communicates; a user's own OMPI_MCA_btl is kept."""
    cmd = [PY, "-m", "mpi_collectives", "doctor"]
    proc = mpirun(2, cmd, env={"MPI_COLLECTIVES_VERBOSE": "1", "OMPI_MCA_btl": None})
    assert proc.returncode == 0 and "all right" in proc.stdout, explain(proc)
    assert proc.stderr.count("set OMPI_MCA_btl=^ofi: all 2 ranks are on this node") == 2, explain(proc)
    proc = mpirun(2, cmd, env={"MPI_COLLECTIVES_VERBOSE": "1", "OMPI_MCA_btl": "self,sm,tcp"})
    assert proc.returncode == 0 and "OMPI_MCA_btl" not in proc.stderr + proc.stdout, explain(proc)


def test_doctor_names_a_missing_library():
    proc = run([PY, "-m", "mpi_collectives", "doctor"], env={"MPI_COLLECTIVES_LIBMPI": "/nonexistent/libmpi.so"},
               cwd=HERE)
    assert proc.returncode == 1, explain(proc)
    assert "no MPI library could be loaded" in proc.stdout and "MPI_COLLECTIVES_LIBMPI" in proc.stdout


def test_info_under_a_launcher():
    proc = mpirun(2, [PY, "-m", "mpi_collectives", "info", "--init", "--json"])
    assert proc.returncode == 0, explain(proc)
    assert f'"family": "{EXPECTED_FAMILY}"' in proc.stdout and '"size": 2' in proc.stdout, explain(proc)
    assert '"thread_level": "multiple"' in proc.stdout


def test_explicit_library_path_is_used():
    lib = re.search(r"^library\s+(\S+)", run([PY, "-m", "mpi_collectives", "info"], cwd=HERE).stdout, re.M).group(1)
    proc = run([PY, "-m", "mpi_collectives", "info"], env={"MPI_COLLECTIVES_LIBMPI": lib}, cwd=HERE)
    assert proc.returncode == 0, explain(proc)
    assert re.search(r"^library\s+%s$" % re.escape(lib), proc.stdout, re.M), proc.stdout
    bogus = run([PY, "-m", "mpi_collectives", "info"], env={"MPI_COLLECTIVES_LIBMPI": lib + ".nothere"}, cwd=HERE)
    assert bogus.returncode == 1 and lib + ".nothere" in bogus.stdout, explain(bogus)  # no fallback


@pytest.mark.parametrize("variable, value", [("MPI_COLLECTIVES_ABI", "bogus"),
                                             ("MPI_COLLECTIVES_THREAD_LEVEL", "bogus"),
                                             ("MPI_COLLECTIVES_CHECK_COLLECTIVES", "yes")])
def test_a_native_setting_that_is_not_understood_loads_no_library(variable, value):
    """The native layer does not guess: no library, and the sentence names the variable."""
    proc = run([PY, "-m", "mpi_collectives", "info"], env={variable: value}, cwd=HERE)
    assert proc.returncode != 0, explain(proc)
    assert re.search(r"family\s+none", proc.stdout), explain(proc)
    assert f"the MPI library was not loaded: {variable}={value} is not" in proc.stderr, explain(proc)


def test_verbose_logs_with_rank():
    proc = mpirun(2, [PY, os.path.join(PROGRAMS, "init_cases.py"), "plain"],
                  env={"MPI_COLLECTIVES_VERBOSE": "1"})
    assert proc.returncode == 0, explain(proc)
    for r in (0, 1):
        assert f"mpi-collectives [rank {r}/2]: MPI initialized" in proc.stderr, explain(proc)


@pytest.mark.jax
@pytest.mark.parametrize("how", ["coordinator", "port", "interface"])
def test_coordinator_settings(how):
    from helpers import free_port
    port = free_port()
    env = {"coordinator": {"MPI_COLLECTIVES_COORDINATOR": f"127.0.0.1:{port}"},
           "port": {"MPI_COLLECTIVES_PORT": str(port)},
           "interface": {"MPI_COLLECTIVES_INTERFACE": "lo"}}[how]
    proc = mpirun(2, [PY, os.path.join(PROGRAMS, "init_cases.py"), "plain"], env=env)
    assert proc.returncode == 0 and proc.stdout.count("PASS") == 2, explain(proc)
    coordinator = set(re.findall(r"coordinator (\S+)", proc.stdout))
    assert len(coordinator) == 1
    if how != "interface":
        assert coordinator == {f"127.0.0.1:{port}"}, coordinator
    else:
        assert next(iter(coordinator)).startswith("127.0.0.1:"), coordinator


def test_settings_reject_unknown_and_malformed():
    from mpi_collectives import settings
    with pytest.raises(TypeError, match="unknown setting"):
        settings.read(bogus=1)
    os.environ["MPI_COLLECTIVES_INIT_TIMEOUT"] = "soon"
    try:
        with pytest.raises(RuntimeError, match="MPI_COLLECTIVES_INIT_TIMEOUT=soon is not a whole number from 1"):
            settings.read()
    finally:
        del os.environ["MPI_COLLECTIVES_INIT_TIMEOUT"]
    assert settings.read(timeout=7).timeout == 7


def test_readme_environment_table_is_current():
    from mpi_collectives.settings import markdown_table
    readme = open(os.path.join(ROOT, "README.md")).read()
    block = readme.split("<!-- env-table: generated by `python -m mpi_collectives env` -->\n")[1]
    block = block.split("\n<!-- end env-table -->")[0]
    assert block == markdown_table(), "README's table differs from `python -m mpi_collectives env`"


def test_search_prefixes_setting(tmp_path):
    """MPI_COLLECTIVES_PREFIXES is searched first: a prefix holding a link to the library wins."""
    info = run([PY, "-m", "mpi_collectives", "info", "--json"], cwd=HERE)
    import json
    lib = json.loads(info.stdout)["library"]
    os.symlink(os.path.dirname(lib), tmp_path / "lib")  # the whole folder: the library finds its own there
    proc = run([PY, "-m", "mpi_collectives", "info", "--json"], env={"MPI_COLLECTIVES_PREFIXES": str(tmp_path)},
               cwd=HERE)
    assert proc.returncode == 0, explain(proc)
    assert json.loads(proc.stdout)["library"] == str(tmp_path / "lib" / os.path.basename(lib)), proc.stdout


def test_initialize_on_a_jax_too_old_says_which_is_needed(monkeypatch):
    from mpi_collectives import jax_compat, jax_setup
    monkeypatch.setattr(jax_compat, "installed_jax", lambda: "0.4.26")
    with pytest.raises(RuntimeError, match=r"jax 0\.4\.26 is too old: .* need jax 0\.4\.27 or newer.*"
                                           r"pip install 'jax>=0\.4\.27'"):
        jax_setup._check_jax_version()
    monkeypatch.setattr(jax_compat, "installed_jax", lambda: "0.4.27")
    jax_setup._check_jax_version()
    assert jax_compat.version_tuple("0.9.0.1") == (0, 9, 0) and jax_compat.version_tuple("0.4.31.dev2024") == (0, 4, 31)

"""Host-level helpers (against multihost_utils), the command line, the settings table."""
import glob
import importlib.metadata
import json
import os
import platform
import re
import sys

import pytest

from helpers import EXPECTED_FAMILY, FAMILY_CONFIG, HERE, PROGRAMS, ROOT, explain, mpiexec_path, mpirun, run

# Its answers can differ between jax versions: scripts/test.sh runs it on each jax it tests.
pytestmark = pytest.mark.version_dependent

PY = sys.executable


@pytest.mark.jax
@pytest.mark.parametrize("n", [2, 4])
def test_host_helpers_match_multihost_utils(n):
    proc = mpirun(n, [PY, os.path.join(PROGRAMS, "host_helpers.py")])
    assert proc.returncode == 0 and proc.stdout.count("PASS host helpers") == n, explain(proc)
    assert re.search(r"time broadcast_one_to_all: ours [\d.]+ us, multihost_utils [\d.]+ us", proc.stdout)


# One rank and three: once (the mpich configuration and each jax); each more family runs 2.
@pytest.mark.parametrize("n", [2] if FAMILY_CONFIG else [1, 2, 3])
def test_doctor(n):
    """On several ranks, after MPI's own answers, one JAX psum through initialize(), exact;
    on one rank, instead of "all good", the one line that says how to launch it on several."""
    proc = mpirun(n, [PY, "-m", "mpi_collectives", "doctor"])
    assert proc.returncode == 0, explain(proc)
    pairs = 44 if n == 1 else 52  # with several ranks, also the 8 integer sums past the maximum
    assert f"MPI_Allreduce self-check, {pairs} dtype/op pairs: all right" in proc.stdout, explain(proc)
    assert proc.stdout.count("mpi-collectives doctor:") == 1  # rank 0 reports for all
    last = proc.stdout.splitlines()[-2:]
    if n == 1:
        assert "JAX psum" not in proc.stdout, explain(proc)
        assert last == ["  [ok] MPI_Allreduce self-check, 44 dtype/op pairs: all right",
                        "checked on 1 rank only: launch it on several to check JAX's collectives across them, "
                        "e.g. `mpiexec -n 2 python -m mpi_collectives doctor` or "
                        "`srun -n 2 --mpi=pmi2 python -m mpi_collectives doctor`"], explain(proc)
    else:  # each rank gives rank + 1 on its one device: 1 + 2 (+ 3)
        total = n * (n + 1) // 2
        assert last == [f"  [ok] JAX psum across {n} ranks through initialize(): {total} on {n} devices, exact",
                        "all good"], explain(proc)


def test_doctor_says_a_wrong_psum_on_every_rank():
    """A real collective with another answer (pmax in place of psum): a WRONG line from each rank,
    the problem in rank 0's report, exit 1 on every rank."""
    proc = mpirun(2, [PY, os.path.join(PROGRAMS, "doctor_wrong_psum.py"), "wrong"])
    assert proc.returncode == 1, explain(proc)
    for r in (0, 1):  # (the ranks' lines can interleave on the launcher's stderr)
        assert (f"mpi-collectives: rank {r}/2: doctor: JAX psum across 2 ranks through initialize() gave [2.0], "
                "expected 3 on every element: WRONG") in proc.stderr, explain(proc)
        assert f"doctor returned 1 on rank {r}" in proc.stderr, explain(proc)
    assert ("  [PROBLEM] JAX psum across 2 ranks through initialize(): WRONG, expected 3 on 2 devices, "
            "rank 0 got [2.0] (every rank's answer is on its stderr)") in proc.stdout.splitlines(), explain(proc)
    assert proc.stdout.splitlines()[-1] == "1 problem(s)", explain(proc)


def test_doctor_ends_the_job_when_one_rank_cannot_run_the_psum():
    """Rank 1 fails before the collective rank 0 waits in: the job ends with rank 1's one line."""
    proc = mpirun(2, [PY, os.path.join(PROGRAMS, "doctor_wrong_psum.py"), "raise"])
    assert proc.returncode != 0, explain(proc)
    assert ("mpi-collectives: error: rank 1/2: doctor: JAX psum across 2 ranks through initialize() failed: "
            "ValueError: broken on purpose") in proc.stderr, explain(proc)
    assert "doctor returned" not in proc.stderr and "Traceback" not in proc.stderr, explain(proc)


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
    from mpi_collectives.base import settings
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
    """docs/configuration.md's settings table is `python -m mpi_collectives env --markdown`."""
    from mpi_collectives.base.settings import markdown_table
    page = open(os.path.join(ROOT, "docs", "configuration.md")).read()
    block = page.split("<!-- env-table: generated by `python -m mpi_collectives env --markdown` -->\n")[1]
    block = block.split("\n<!-- end env-table -->")[0]
    assert block == markdown_table(), ("docs/configuration.md's table differs from `python -m mpi_collectives env "
                                       "--markdown`: paste its output between the env-table markers")


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


def cli(*args, env=None, cwd=HERE):
    """`python -m mpi_collectives ARGS` from tests/, where the installed package comes first."""
    return run([PY, "-m", "mpi_collectives", *args], env=env, cwd=cwd)


def test_version():
    import mpi_collectives
    assert mpi_collectives.__version__ == importlib.metadata.version("mpi-collectives")
    line = f"mpi-collectives {mpi_collectives.__version__}\n"
    proc = cli("--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, line, ""), explain(proc)
    script = run([os.path.join(os.path.dirname(PY), "mpi-collectives"), "--version"], cwd=HERE)  # pyproject's
    assert (script.returncode, script.stdout, script.stderr) == (0, line, ""), explain(script)


def test_info_shows_the_versions():
    """Read from the installed packages' metadata: info imports no jax."""
    import mpi_collectives
    want = {"mpi_collectives": mpi_collectives.__version__, "jax": importlib.metadata.version("jax"),
            "jaxlib": importlib.metadata.version("jaxlib"), "python": f"{platform.python_version()} ({os.path.normpath(PY)})"}
    proc = cli("info", "--json")
    assert proc.returncode == 0, explain(proc)
    info = json.loads(proc.stdout)
    assert {k: info[k] for k in want} == want, proc.stdout
    assert info["version"], proc.stdout  # the MPI's own: MPI_Get_library_version's first line
    text = cli("info")
    assert text.returncode == 0, explain(text)
    for key, value in want.items():
        assert f"{key:20s} {value}" in text.stdout.splitlines(), text.stdout
    code = ("import contextlib, io, sys; from mpi_collectives.__main__ import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): main(['info'])\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'jax', 'jaxlib'}))")
    imported = run([PY, "-c", code], cwd=HERE)
    assert (imported.returncode, imported.stdout) == (0, "[]\n"), explain(imported)


def test_env_shows_the_values_in_force():
    proc = cli("env", env={"MPI_COLLECTIVES_INIT_TIMEOUT": "42", "MPI_COLLECTIVES_EXIT_TIMEOUT": None,
                           "MPI_COLLECTIVES_INTERFACE": None})
    assert proc.returncode == 0 and proc.stderr == "", explain(proc)
    lines = proc.stdout.splitlines()
    assert lines[0] == "| variable | in force | keyword | default | allowed | meaning |", proc.stdout
    row = {line.split(" | ")[0].strip("|` "): line.split(" | ")[1] for line in lines[2:] if line.startswith("|")}
    assert row["MPI_COLLECTIVES_INIT_TIMEOUT"] == "`42` (set)", proc.stdout
    assert row["MPI_COLLECTIVES_EXIT_TIMEOUT"] == "`30` (default)", proc.stdout
    assert row["MPI_COLLECTIVES_PREFIXES"].endswith("(set by import mpi_collectives)"), proc.stdout
    assert row["MPI_COLLECTIVES_INTERFACE"] == "unset (no default)", proc.stdout
    assert len(row) == len(__import__("mpi_collectives.base.settings").base.settings.TABLE)
    bad = cli("env", env={"MPI_COLLECTIVES_INIT_TIMEOUT": "soon"})
    assert bad.returncode == 1, explain(bad)
    assert "| `MPI_COLLECTIVES_INIT_TIMEOUT` | `soon` (set, NOT VALID) |" in bad.stdout, explain(bad)
    assert bad.stderr.splitlines() == ["mpi-collectives: MPI_COLLECTIVES_INIT_TIMEOUT=soon is not a whole number "
                                       "from 1 to 604800. Fix: correct it, or leave it unset for the default (300)."]


def test_env_shows_a_tuning_files_values_and_where_they_come_from(tmp_path):
    """Under the launcher, with a tuning file whose entry is for this MPI and 2 ranks a node: the node
    path and the binding in force are the file's, and each row says so; `env` showed the defaults
    where `info --init` showed the file's values (issue 81). A variable you set stays yours."""
    from mpi_collectives.services import library_settings
    info = json.loads(cli("info", "--json").stdout)
    folder = tmp_path / "config"
    folder.mkdir(mode=0o700)
    path = str(folder / "tuning.json")
    library_settings.write_entry(path, {
        "implementation": library_settings.implementation(info["version"]), "version": info["version"],
        "library": os.path.realpath(info["library"]), "ranks_per_node": 2, "cpus": library_settings.node_cpus(),
        "settings": {}, "bind_cpus": 2, "date": "2026-12-06",
        "node_path": {"mode": 1, "collectives": "all-reduce", "min": 1048576, "max": 0}})
    proc = mpirun(2, [PY, "-m", "mpi_collectives", "env"], env={"MPI_COLLECTIVES_TUNING_FILE": path,
                                                               "MPI_COLLECTIVES_NODE_PATH_MAX": "4096"})
    assert proc.returncode == 0, explain(proc)
    table = proc.stdout.split("| variable |")[1]  # one rank's table (both print one)
    row = {line.split(" | ")[0].strip("|` "): line.split(" | ")[1] for line in table.splitlines()[2:] if " | " in line}
    assert row["MPI_COLLECTIVES_BIND_CPUS"].startswith(f"`2` (tuning file {path}: MPI_COLLECTIVES_BIND_CPUS=2 "
                                                       "measured fastest by mpi-collectives tune on 2026-12-06"), table
    # a node-path variable set by you makes all of them yours (initialize() takes none from the file)
    assert row["MPI_COLLECTIVES_NODE_PATH_MAX"] == "`4096` (set)" and "(default)" in row["MPI_COLLECTIVES_NODE_PATH_MIN"]
    alone = mpirun(2, [PY, "-m", "mpi_collectives", "env"], env={"MPI_COLLECTIVES_TUNING_FILE": path,
                                                                "MPI_COLLECTIVES_NODE_PATH_MAX": None})
    table = alone.stdout.split("| variable |")[1]
    row = {line.split(" | ")[0].strip("|` "): line.split(" | ")[1] for line in table.splitlines()[2:] if " | " in line}
    assert row["MPI_COLLECTIVES_NODE_PATH_MIN"] == f"`1048576` (tuning file {path})", explain(alone)
    assert row["MPI_COLLECTIVES_NODE_PATH_COLLECTIVES"] == f"`all-reduce` (tuning file {path})", explain(alone)


@pytest.mark.jax
@pytest.mark.skipif(FAMILY_CONFIG, reason="Python's listing, the same on every family: the mpich configuration")
def test_verbose_start_lists_every_setting_in_force_with_its_source_on_rank_0():
    code = "import mpi_collectives; mpi_collectives.initialize(timeout=100)"
    proc = mpirun(2, [PY, "-c", code], env={"MPI_COLLECTIVES_VERBOSE": "1", "MPI_COLLECTIVES_NODE_PATH_MIN": None,
                                            "MPI_COLLECTIVES_EXIT_TIMEOUT": "45"})
    assert proc.returncode == 0, explain(proc)
    for line in ("MPI_COLLECTIVES_INIT_TIMEOUT=100 (initialize()'s keyword)", "MPI_COLLECTIVES_EXIT_TIMEOUT=45 (set)",
                 "MPI_COLLECTIVES_NODE_PATH_MIN=262144 (default)"):  # (the export to the native layer is not yours)
        assert proc.stderr.count(f"mpi-collectives [rank 0/2]: {line}") == 1, explain(proc)
        assert f"[rank 1/2]: {line}" not in proc.stderr, explain(proc)


def test_env_markdown_is_the_documentation_table():
    from mpi_collectives.base.settings import markdown_table
    proc = cli("env", "--markdown", env={"MPI_COLLECTIVES_INIT_TIMEOUT": "42"})
    assert (proc.returncode, proc.stdout) == (0, markdown_table() + "\n"), explain(proc)


@pytest.mark.parametrize("args, line", [
    (["info", "--bogus"], "mpi-collectives: unrecognized arguments: --bogus (see `python -m mpi_collectives --help`)"),
    # (how argparse quotes the choices changes between Pythons)
    (["bogus"], re.compile(r"mpi-collectives: argument COMMAND: invalid choice: 'bogus' \(choose from '?libpath'?, "
                           r"'?info'?, '?doctor'?, '?run'?, '?env'?, '?bench'?, '?tune'?, '?layouts'?\) \(see `python -m mpi_collectives "
                           r"--help`\)")),
    ([], "mpi-collectives: the following arguments are required: COMMAND (see `python -m mpi_collectives --help`)"),
    (["bench", "--ranks", "two"], "mpi-collectives: argument --ranks: 'two' is not a count of ranks or a list like "
                                  "2,4,8,16 (see `python -m mpi_collectives bench --help`)"),
    (["tune", "--ranks", "1"], "mpi-collectives: argument --ranks: tuning collectives needs at least 2 ranks "
                               "(see `python -m mpi_collectives tune --help`)"),
    (["bench", "--launcher", "no-such-launcher --mpi=pmi2"],
     "mpi-collectives: the launcher no-such-launcher was not found (not on PATH, or not executable) "
     "(see `python -m mpi_collectives bench --help`)"),
])
def test_a_wrong_argument_is_one_line(args, line):
    proc = cli(*args)
    assert proc.returncode == 2 and proc.stdout == "" and len(proc.stderr.splitlines()) == 1, explain(proc)
    if isinstance(line, str):
        assert proc.stderr == line + "\n", explain(proc)
    else:
        assert line.fullmatch(proc.stderr.strip()), explain(proc)


@pytest.mark.parametrize("args, line", [
    (["run", "no_such_script.py"], f"mpi-collectives: run: no such script no_such_script.py (from {HERE})"),
    (["run", "-m", "no_such_module"],
     f"mpi-collectives: run: no module named no_such_module (from {HERE}, with this Python: {os.path.normpath(PY)})"),
])
def test_a_wrong_target_is_one_line(args, line):
    proc = cli(*args)
    assert (proc.returncode, proc.stdout, proc.stderr.splitlines()) == (1, "", [line]), explain(proc)


def test_a_scripts_own_error_keeps_its_traceback(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("def f():\n    raise ValueError('the script itself')\nf()\n")
    proc = cli("run", str(script))
    assert proc.returncode == 1 and proc.stdout == "", explain(proc)
    assert proc.stderr.startswith("Traceback") and proc.stderr.endswith("ValueError: the script itself\n")
    assert "fails.py\", line 3" in proc.stderr, explain(proc)


@pytest.mark.skipif(bool(glob.glob(os.path.join(ROOT, "mpi_collectives", "_mpiabi*.so"))),
                    reason="the native layer is built in place in the checkout (pip install -e .)")
@pytest.mark.parametrize("command", ["libpath", "info", "doctor"])
def test_from_the_source_checkout_one_sentence(command):
    """There the unbuilt source tree shadows the installed package: one sentence on stderr,
    nothing on stdout (so `export MPITRAMPOLINE_LIB=$(... libpath)` gets nothing), exit 1."""
    proc = cli(command, cwd=ROOT)
    line = (f"mpi-collectives: imported from the source checkout {ROOT}, where the native layer is not built; run "
            "from another directory (the installed package is shadowed here) or build in place with `pip install -e .`")
    assert (proc.returncode, proc.stdout, proc.stderr.splitlines()) == (1, "", [line]), explain(proc)


def test_bench_launcher_replaces_mpiexec(tmp_path, monkeypatch):
    """--launcher "srun --mpi=pmi2": its words, split as a shell would, then -n and the program."""
    from mpi_collectives.tools.bench import run as bench
    srun = tmp_path / "srun"  # (only found on PATH: never run)
    srun.write_text("#!/bin/sh\nexit 1\n")
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    args = bench.parse(["--launcher", "srun --mpi=pmi2 --cpu-bind='map_cpu:0,1'"])
    assert bench.launch_command(args, 2, ["mpi_collectives.tools.bench.startup", "mpi"]) == [
        "srun", "--mpi=pmi2", "--cpu-bind=map_cpu:0,1", "-n", "2", PY, "-c", bench._RUN_MODULE,
        "mpi_collectives.tools.bench.startup", "mpi"]
    args = bench.parse(["--launcher", f"{mpiexec_path()} -bind-to none"])
    assert bench.launch_command(args, 3, ["m"]) == [mpiexec_path(), "-bind-to", "none", "-n", "3", PY, "-c",
                                                    bench._RUN_MODULE, "m"]
    assert bench.launch_command(bench.parse([]), 2, ["m"]) == [mpiexec_path(), "-n", "2", PY, "-c", bench._RUN_MODULE,
                                                               "m"]


def test_tune_reads_every_ranks_cpus_under_unbuffered_python(monkeypatch):
    """tune's placement launch under PYTHONUNBUFFERED=1 (common in job scripts): each rank's line
    arrives whole. print() wrote it in pieces that the launcher interleaved ("vmvm 0,1| 0,1|" in 12
    launches of 20 with MPICH's Hydra), and tune stopped in a ValueError before measuring."""
    from types import SimpleNamespace

    from mpi_collectives.tools.bench import run as bench
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")
    args = SimpleNamespace(ranks=4, launcher=None, mpiexec=mpiexec_path(), timeout=60)
    mine = frozenset(os.sched_getaffinity(0))
    for _ in range(5):
        got = bench.placement(args)
        # each rank's CPUs as its launcher set them: all of this process's, or a part (Intel MPI binds)
        assert len(got) == 4 and all(host == platform.node() and cpus and cpus <= mine for host, cpus in got), got


def test_initialize_on_a_jax_too_old_says_which_is_needed(monkeypatch):
    from mpi_collectives.integration import jax_compat, jax_setup
    monkeypatch.setattr(jax_compat, "installed_jax", lambda: "0.4.26")
    with pytest.raises(RuntimeError, match=r"jax 0\.4\.26 is too old: .* need jax 0\.4\.27 or newer.*"
                                           r"pip install 'jax>=0\.4\.27'"):
        jax_setup._check_jax_version()
    monkeypatch.setattr(jax_compat, "installed_jax", lambda: "0.4.27")
    jax_setup._check_jax_version()
    assert jax_compat.version_tuple("0.9.0.1") == (0, 9, 0) and jax_compat.version_tuple("0.4.31.dev2024") == (0, 4, 31)

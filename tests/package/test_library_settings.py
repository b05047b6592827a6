"""library_settings.py: the MPI library's own collective settings, set before
MPI_Init from the tuning file that `mpi-collectives tune` writes or from the
measured defaults, never over the user's own, and a tuning file used only when
it is the user's, holds known settings and fits the job."""
import json
import os
import subprocess
import sys

import pytest

from helpers import EXPECTED_FAMILY, HERE, TEST_CONFIG, explain, mpiexec_path, run

MPICH = "MPICH Version:      5.0.2"
LIB = "/opt/mpich/lib/libmpi.so.12"


def decide(environ=None, path="/nonexistent/tuning.json", version=MPICH, ranks=2, cpus=16, **kw):
    from mpi_collectives.services import library_settings
    return library_settings.decide(version, LIB, environ or {}, path=path, ranks=ranks, cpus=cpus, **kw)


def entry(**changes):
    out = {"implementation": "mpich", "version": MPICH, "library": LIB, "ranks_per_node": 2, "cpus": 16,
           "settings": {"MPIR_CVAR_DEVICE_COLLECTIVES": "all"}, "date": "2026-11-25"}
    out.update(changes)
    return out


def write(tmp_path, *entries, mode=0o600):
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps({"format": 1, "entries": list(entries)}))
    os.chmod(path, mode)
    os.chmod(tmp_path, 0o700)
    return str(path)


@pytest.mark.parametrize("line, impl", [
    ("MPICH Version:      5.0.2", "mpich"), ("Intel(R) MPI Library 2021.18 for Linux* OS", "impi"),
    ("Open MPI v5.0.11, package: Open MPI", "openmpi"), ("MPI VERSION    : CRAY MPICH version 8.1", ""),
    ("MVAPICH2 Version      :	2.3.7", ""), ("", "")])
def test_the_implementation_comes_from_the_version_line(line, impl):
    from mpi_collectives.services.library_settings import implementation
    assert implementation(line) == impl


def test_mpich_gets_its_generic_collectives_by_default():
    chosen, line = decide()
    assert chosen == {"MPIR_CVAR_DEVICE_COLLECTIVES": "none"}
    assert line.startswith("mpi-settings: MPIR_CVAR_DEVICE_COLLECTIVES=none (MPICH's generic collectives"), line


def test_other_libraries_keep_their_defaults_without_a_tuning():
    assert decide(version="Open MPI v5.0.11") == ({}, "mpi-settings: the library's defaults (nothing measured faster)")
    assert decide(version="MPI VERSION    : CRAY MPICH version 8.1") == ({}, "")


@pytest.mark.parametrize("variable", ["MPIR_CVAR_DEVICE_COLLECTIVES", "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM",
                                      "MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE",
                                      # MPICH's other spellings of the same variables (issue 81)
                                      "MPICH_DEVICE_COLLECTIVES", "MPIR_PARAM_DEVICE_COLLECTIVES",
                                      "MPICH_ALLREDUCE_INTRA_ALGORITHM"])
def test_a_collective_setting_of_the_user_wins(variable, tmp_path):
    path = write(tmp_path, entry())
    chosen, line = decide({variable: "x"}, path=path)
    assert chosen == {} and line == f"mpi-settings: not applied (left to your {variable})"


def test_nothing_is_set_when_mpi_was_initialized_already():
    assert decide(initialized=True) == (
        {}, "mpi-settings: not applied (MPI was initialized before initialize(), by another library)")


def test_switched_off():
    assert decide(enabled=False) == ({}, "mpi-settings: off (MPI_COLLECTIVES_MPI_SETTINGS=0)")


def test_the_tuning_file_entry_for_this_shape_is_used(tmp_path):
    path = write(tmp_path, entry(ranks_per_node=16, settings={}), entry())
    chosen, line = decide(path=path)
    assert chosen == {"MPIR_CVAR_DEVICE_COLLECTIVES": "all"}
    assert line == "mpi-settings: MPIR_CVAR_DEVICE_COLLECTIVES=all (measured by mpi-collectives tune on 2026-11-25)"
    assert decide(path=path, ranks=16) == ({}, "mpi-settings: the library's defaults (measured fastest by "
                                              "mpi-collectives tune)")


def test_an_entry_needs_its_implied_variables(tmp_path):
    version = "Open MPI v5.0.11"
    path = write(tmp_path, entry(implementation="openmpi", version=version,
                                 settings={"OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}))
    chosen, _ = decide(path=path, version=version)
    assert chosen == {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}


@pytest.mark.parametrize("change, shown", [({"cpus": 64}, "2 ranks on 64 CPUs"),
                                           ({"ranks_per_node": 8}, "8 ranks on 16 CPUs"),
                                           ({"library": "/elsewhere/libmpi.so.12"}, "2 ranks on 16 CPUs"),
                                           ({"version": "MPICH Version:      4.3.0"}, "2 ranks on 16 CPUs")])
def test_a_stale_entry_is_named_and_the_defaults_used(change, shown, tmp_path):
    path = write(tmp_path, entry(**change))
    chosen, line = decide(path=path)
    assert chosen == {"MPIR_CVAR_DEVICE_COLLECTIVES": "none"}
    assert line.endswith(f"; {path} has no entry for this MPI with 2 ranks on 16 CPUs (it has {shown}): "
                         "run mpi-collectives tune for this shape"), line


@pytest.mark.parametrize("settings", [{"LD_PRELOAD": "/tmp/x.so"}, {"MPIR_CVAR_DEVICE_COLLECTIVES": "percoll;rm"},
                                      {"I_MPI_ADJUST_ALLREDUCE": "2"}])
def test_a_file_with_an_unknown_setting_is_refused_whole(settings, tmp_path):
    path = write(tmp_path, entry(settings=settings))
    chosen, line = decide(path=path)
    assert chosen == {"MPIR_CVAR_DEVICE_COLLECTIVES": "none"}  # the defaults, as if there were no file
    name, value = next(iter(settings.items()))
    assert line.endswith(f"; tuning file ignored: {path} sets {name}={value!r}, which is not among the settings "
                         "mpi-collectives knows for mpich"), line


@pytest.mark.parametrize("bind", ["2", 3, True, None])
def test_a_file_with_a_binding_initialize_does_not_know_is_refused_whole(bind, tmp_path):
    path = write(tmp_path, entry(bind_cpus=bind))
    chosen, line = decide(path=path)
    assert chosen == {"MPIR_CVAR_DEVICE_COLLECTIVES": "none"}  # the defaults, as if there were no file
    assert line.endswith(f"; tuning file ignored: {path} sets bind_cpus={bind!r}, which is not one of 0, 1, 2"), line


def test_the_binding_tune_measured_is_taken_unless_you_chose_one(tmp_path, monkeypatch):
    from mpi_collectives.base import mpi, settings
    from mpi_collectives.services import library_settings
    monkeypatch.setattr(mpi, "library_version", lambda: MPICH)
    monkeypatch.setattr(mpi, "library", lambda: LIB)
    monkeypatch.setattr(library_settings, "node_cpus", lambda: 16)
    path = write(tmp_path, entry(bind_cpus=2, date="2026-11-27"))
    one_node = {"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALNRANKS": "2"}
    monkeypatch.delenv("MPI_COLLECTIVES_BIND_CPUS", raising=False)
    chosen = settings.read(tuning_file=path)
    assert library_settings.binding_for_this_process(chosen, one_node) == (
        2, "MPI_COLLECTIVES_BIND_CPUS=2 measured fastest by mpi-collectives tune on 2026-11-27")
    assert library_settings.binding_for_this_process(settings.read(tuning_file=path, bind_cpus=1), one_node) == (1, "")
    # Another shape (3 ranks here), or a file without a binding: the built-in.
    assert library_settings.binding_for_this_process(chosen, dict(one_node, PMI_SIZE="3", MPI_LOCALNRANKS="3")) == \
        (1, "")
    path = write(tmp_path, entry())
    assert library_settings.binding_for_this_process(settings.read(tuning_file=path), one_node) == (1, "")


@pytest.mark.parametrize("node", [{"mode": 2, "collectives": "all-reduce", "min": 0, "max": 0},
                                  {"mode": 1, "collectives": "all-reduce", "min": -1, "max": 0},
                                  {"mode": 1, "collectives": "broadcast", "min": 0, "max": 0},
                                  {"mode": 1, "min": 262144, "max": 0}, "on",
                                  {"mode": 1, "collectives": "all-reduce", "min": 0, "max": 0, "across_nodes": 2},
                                  {"mode": 1, "collectives": "all-reduce", "min": 0, "max": 0, "across": 1},
                                  {"mode": 1, "collectives": "", "min": 0, "max": 0, "direct": 2, "round": 0},
                                  {"mode": 1, "collectives": "", "min": 0, "max": 0, "direct": 1, "round": 65537},
                                  {"mode": 1, "collectives": "", "min": 0, "max": 0, "direct": 1, "round": "4096"}])
def test_a_file_with_node_path_limits_initialize_does_not_know_is_refused_whole(node, tmp_path):
    path = write(tmp_path, entry(node_path=node))
    chosen, line = decide(path=path)
    assert chosen == {"MPIR_CVAR_DEVICE_COLLECTIVES": "none"}  # the defaults, as if there were no file
    assert f"; tuning file ignored: {path} sets node_path={node!r}, which is not" in line, line


def test_the_node_path_tune_measured_is_taken_unless_you_chose_any_of_its_settings(tmp_path, monkeypatch):
    from mpi_collectives.base import mpi, settings
    from mpi_collectives.services import library_settings as s
    monkeypatch.setattr(mpi, "library_version", lambda: MPICH)
    monkeypatch.setattr(mpi, "library", lambda: LIB)
    monkeypatch.setattr(s, "node_cpus", lambda: 16)
    for name in s.NODE_PATH_TUNED:
        monkeypatch.delenv(name, raising=False)
    one_node = {"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALNRANKS": "2"}
    path = write(tmp_path, entry(node_path={"mode": 1, "collectives": "all-reduce,all-gather", "min": 1048576,
                                            "max": 16777216}, date="2026-11-27"))
    chosen = settings.read(tuning_file=path)
    assert not s.users_node_path(chosen, one_node)
    assert s.node_path_for_this_process(chosen, False, one_node) == (
        (1, "all-reduce,all-gather", 1048576, 16777216, 0, 1, 65536),  # no direct, no round: the settings' own
        "node-path: all-reduce,all-gather from 1048576 to 16777216 bytes (MPI_COLLECTIVES_NODE_PATH_COLLECTIVES="
        "all-reduce,all-gather, _MIN=1048576, _MAX=16777216: measured by mpi-collectives tune on 2026-11-27)")
    # Yours, in the environment or as a keyword: all four stay yours.
    assert s.users_node_path(chosen, dict(one_node, MPI_COLLECTIVES_NODE_PATH_MAX="0"))
    # an empty variable is the default, as for every setting: the file's entry stays (issue 81)
    assert not s.users_node_path(chosen, dict(one_node, MPI_COLLECTIVES_NODE_PATH="", MPI_COLLECTIVES_NODE_PATH_MIN=""))
    assert s.users_node_path(settings.read(tuning_file=path, node_path_min=4096), one_node)
    assert s.users_node_path(chosen, dict(one_node, MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES="0"))
    assert s.users_node_path(chosen, dict(one_node, MPI_COLLECTIVES_NODE_PATH_ROUND="65536"))
    assert s.users_node_path(settings.read(tuning_file=path, node_path_direct=0), one_node)
    assert s.node_path_for_this_process(chosen, True, one_node) == (None, "")
    # Measured slower everywhere: off, and said so.
    path = write(tmp_path, entry(node_path={"mode": 0, "collectives": "", "min": 0, "max": 0}, date="2026-11-27"))
    got = s.node_path_for_this_process(settings.read(tuning_file=path), False, one_node)
    assert got[0] == (0, "", 0, 0, 0, 1, 65536) and got[1].startswith("node-path: off (MPI_COLLECTIVES_NODE_PATH=0"), got
    # Measured over several nodes: the all-reduce composed across them.
    path = write(tmp_path, entry(node_path={"mode": 1, "collectives": "all-reduce", "min": 262144, "max": 0,
                                            "across_nodes": 1}, date="2026-11-28"))
    assert s.node_path_for_this_process(settings.read(tuning_file=path), False, one_node) == (
        (1, "all-reduce", 262144, 0, 1, 1, 65536),
        "node-path: all-reduce from 262144 bytes, all-reduces across nodes composed with each node's window "
        "(MPI_COLLECTIVES_NODE_PATH_COLLECTIVES=all-reduce, _MIN=262144, _MAX=0, _ACROSS_NODES=1: measured by "
        "mpi-collectives tune on 2026-11-28)")
    # Measured on one node: the window's copies where reading in place was slower, the round's limit.
    path = write(tmp_path, entry(node_path={"mode": 1, "collectives": "all-reduce", "min": 262144, "max": 0,
                                            "direct": 0, "round": 4096}, date="2026-11-29"))
    assert s.node_path_for_this_process(settings.read(tuning_file=path), False, one_node) == (
        (1, "all-reduce", 262144, 0, 0, 0, 4096),
        "node-path: all-reduce from 262144 bytes; every byte through the window, no reads in place "
        "(MPI_COLLECTIVES_NODE_PATH_DIRECT=0); small collectives in one round up to 4096 bytes of the peers' data "
        "(MPI_COLLECTIVES_NODE_PATH_ROUND=4096) (MPI_COLLECTIVES_NODE_PATH_COLLECTIVES=all-reduce, _MIN=262144, "
        "_MAX=0: measured by mpi-collectives tune on 2026-11-29)")
    # The library's large collectives faster, the round faster than its check and call: the round alone.
    path = write(tmp_path, entry(node_path={"mode": 1, "collectives": "", "min": 0, "max": 0, "direct": 1,
                                            "round": 65536}, date="2026-11-29"))
    assert s.node_path_for_this_process(settings.read(tuning_file=path), False, one_node) == (
        (1, "", 0, 0, 0, 1, 65536),
        "node-path: the library's own large collectives; small collectives in one round up to 65536 bytes of the "
        "peers' data (MPI_COLLECTIVES_NODE_PATH_ROUND=65536) (measured by mpi-collectives tune on 2026-11-29)")
    # Another shape, or an entry without it: the settings as they are.
    assert s.node_path_for_this_process(chosen, False, dict(one_node, PMI_SIZE="3", MPI_LOCALNRANKS="3")) == \
        (None, "")
    path = write(tmp_path, entry())
    assert s.node_path_for_this_process(settings.read(tuning_file=path), False, one_node) == (None, "")


INTEL = "Intel(R) MPI Library 2021.18 for Linux* OS"


def test_intel_takes_one_value_per_size_range_from_a_file(tmp_path):
    ranged = "1:0-724;8:725-2147483647"
    path = write(tmp_path, entry(implementation="impi", version=INTEL, settings={"I_MPI_ADJUST_ALLREDUCE": ranged}))
    chosen, line = decide(path=path, version=INTEL)
    assert chosen == {"I_MPI_ADJUST_ALLREDUCE": ranged}, line


@pytest.mark.parametrize("value", ["4:0-100", "1:100-50", "1:0-4294967295", "1:0-100;2:100-200", "1:0-100,2", "1:0-100;", "1:-5-7",
                                   "1:0-100;rm -rf"])
def test_size_ranges_that_are_not_the_librarys_own_are_refused(value, tmp_path):
    """An algorithm tune does not know, a range upside down, one past Intel MPI's int (which it
    rejects and then crashes on), ranges that overlap, anything else."""
    path = write(tmp_path, entry(implementation="impi", version=INTEL, settings={"I_MPI_ADJUST_ALLREDUCE": value}))
    chosen, line = decide(path=path, version=INTEL)
    assert chosen == {}, line
    assert f"sets I_MPI_ADJUST_ALLREDUCE={value!r}, which is not among the settings" in line, line


def test_size_ranges_only_where_the_library_takes_them(tmp_path):
    version = "Open MPI v5.0.11"
    path = write(tmp_path, entry(implementation="openmpi", version=version,
                                 settings={"OMPI_MCA_coll_tuned_allreduce_algorithm": "3:0-100"}))
    chosen, line = decide(path=path, version=version)
    assert chosen == {} and "which is not among the settings" in line, line


def test_a_file_others_can_write_is_refused(tmp_path):
    path = write(tmp_path, entry(), mode=0o622)
    _, line = decide(path=path)
    assert line.endswith(f"; tuning file ignored: {path} can be written by others (mode 622); fix: chmod go-w {path}")
    os.chmod(path, 0o600)
    os.chmod(tmp_path, 0o777)
    _, line = decide(path=path)
    assert f"tuning file ignored: {tmp_path} can be written by others (mode 777)" in line, line


def test_a_file_of_another_user_is_refused(tmp_path):
    path = write(tmp_path, entry())
    if os.geteuid() == 0:
        os.chown(path, 4242, 4242)  # CI runs as root: make it someone else's
    elif os.stat(path).st_uid == os.geteuid():
        pytest.skip("needs root to give the file to another user")
    _, line = decide(path=path)
    assert f"tuning file ignored: {path} belongs to uid 4242, not to you (uid {os.geteuid()})" in line, line


def test_a_file_that_is_not_json_is_refused(tmp_path):
    path = tmp_path / "tuning.json"
    path.write_text("{not json")
    os.chmod(tmp_path, 0o700)
    _, line = decide(path=str(path))
    assert f"tuning file ignored: {path} cannot be read as JSON" in line, line


def test_write_entry_replaces_the_same_shape_and_keeps_the_others(tmp_path):
    from mpi_collectives.services.library_settings import read_file, write_entry
    path = str(tmp_path / "sub" / "tuning.json")
    write_entry(path, entry(ranks_per_node=16))
    write_entry(path, entry(settings={"MPIR_CVAR_DEVICE_COLLECTIVES": "none"}))
    write_entry(path, entry(settings={}))
    got = read_file(path)
    assert [(e["ranks_per_node"], e["settings"]) for e in got] == [(16, {"MPIR_CVAR_DEVICE_COLLECTIVES": "all"}),
                                                                 (2, {})]
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert oct(os.stat(os.path.dirname(path)).st_mode & 0o777) == "0o700"


@pytest.mark.parametrize("environ, ranks", [
    ({"MPI_LOCALNRANKS": "4"}, 4), ({"OMPI_COMM_WORLD_LOCAL_SIZE": "8"}, 8),
    ({"SLURM_STEP_TASKS_PER_NODE": "16(x2),8", "SLURM_NODEID": "2"}, 8),
    ({"SLURM_STEP_TASKS_PER_NODE": "16(x2),8", "SLURM_NODEID": "1"}, 16), ({}, None)])
def test_ranks_per_node_come_from_the_launcher(environ, ranks):
    from mpi_collectives.services.library_settings import local_ranks
    assert local_ranks(environ) == ranks


PROGRAM = ("import os, mpi_collectives; from mpi_collectives.services import library_settings as s; "
           "info = mpi_collectives.initialize(); "
           "line = [t for t in info.tunings if t.startswith('mpi-settings')]; "
           "import sys; sys.stdout.write(f'RANK {info.rank} {line} ' + str(dict(sorted((k, os.environ.get(k)) "
           "for v in s.KNOWN.values() for x in v for k in (x.name,) + tuple(x.implies) if k in os.environ))) "
           "+ chr(10))")


def launch(env):
    proc = run([mpiexec_path(), "-n", "2", sys.executable, "-c", PROGRAM],
               env={"MPI_COLLECTIVES_INIT_TIMEOUT": "60", **env}, cwd=HERE)
    assert proc.returncode == 0, explain(proc)
    lines = sorted(line for line in proc.stdout.splitlines() if line.startswith("RANK"))
    assert len(lines) == 2, explain(proc)
    return lines


@pytest.mark.jax
def test_each_rank_starts_mpi_with_the_settings_of_its_tuning_file(tmp_path):
    """A tuning entry for this MPI and 2 ranks on this node: each rank's MPI_Init sees it."""
    info = json.loads(subprocess.check_output([sys.executable, "-m", "mpi_collectives", "info", "--json"],
                                              cwd=HERE, text=True))
    from mpi_collectives.services import library_settings as s
    impl = s.implementation(info["version"])
    if not impl:
        pytest.skip(f"{info['version']}: no settings known for it")
    variable = s.KNOWN[impl][0]
    path = write(tmp_path, entry(implementation=impl, version=info["version"],
                                 library=os.path.realpath(info["library"]), cpus=os.cpu_count(),
                                 settings={variable.name: variable.values[0]}))
    got = launch({"MPI_COLLECTIVES_TUNING_FILE": path})
    shown = f"{variable.name}={variable.values[0]}"
    expected = dict(sorted({**variable.implies, variable.name: variable.values[0]}.items()))
    for rank, line in enumerate(got):
        assert line == (f"RANK {rank} ['mpi-settings: {shown} (measured by mpi-collectives tune on 2026-11-25)'] "
                        f"{expected}"), got


@pytest.mark.jax
@pytest.mark.skipif(TEST_CONFIG != "impi", reason="size ranges are Intel MPI's alone")
def test_intel_mpi_runs_exact_with_the_size_ranges_tune_writes(tmp_path):
    """What tune writes for Intel MPI where different algorithms won different sizes: Intel MPI
    takes it (no "Incorrect adjust value") and JAX's psum through it is exact."""
    info = json.loads(subprocess.check_output([sys.executable, "-m", "mpi_collectives", "info", "--json"],
                                              cwd=HERE, text=True))
    ranged = "1:0-724;8:725-2147483647"
    path = write(tmp_path, entry(implementation="impi", version=info["version"],
                                 library=os.path.realpath(info["library"]), cpus=os.cpu_count(),
                                 settings={"I_MPI_ADJUST_ALLREDUCE": ranged}))
    proc = run([mpiexec_path(), "-n", "2", sys.executable, os.path.join(HERE, "programs", "init_cases.py"), "plain"],
               env={"MPI_COLLECTIVES_INIT_TIMEOUT": "60", "MPI_COLLECTIVES_TUNING_FILE": path}, cwd=HERE)
    assert proc.returncode == 0 and proc.stdout.count("PASS plain") == 2, explain(proc)
    assert f"mpi-settings: I_MPI_ADJUST_ALLREDUCE={ranged}" in proc.stdout, explain(proc)
    assert "Incorrect adjust value" not in proc.stderr, explain(proc)


@pytest.mark.jax
@pytest.mark.skipif(TEST_CONFIG not in ("mpich", "standard"), reason="MPICH's own default; the other "
                    "libraries have none (test_other_libraries_keep_their_defaults_without_a_tuning)")
def test_mpich_ranks_start_with_its_generic_collectives_unless_the_user_chose():
    assert EXPECTED_FAMILY in ("mpich", "standard")
    default = launch({"MPI_COLLECTIVES_TUNING_FILE": "/nonexistent/tuning.json"})
    assert all("MPIR_CVAR_DEVICE_COLLECTIVES=none" in line and
               line.endswith("{'MPIR_CVAR_DEVICE_COLLECTIVES': 'none'}") for line in default), default
    own = launch({"MPIR_CVAR_DEVICE_COLLECTIVES": "all"})
    assert all(line.endswith("['mpi-settings: not applied (left to your MPIR_CVAR_DEVICE_COLLECTIVES)'] "
                             "{'MPIR_CVAR_DEVICE_COLLECTIVES': 'all'}") for line in own), own


@pytest.mark.skipif(TEST_CONFIG not in ("mpich", "standard"), reason="MPICH's own library: the mpich wheel's")
def test_every_mpich_algorithm_tune_tries_is_one_its_library_offers():
    """The values come from the installed library's own help text for each variable (the lines
    `value - Force ...` under `Variable to select <collective> algorithm`), read here."""
    from mpi_collectives.services.library_settings import KNOWN
    info = json.loads(subprocess.check_output([sys.executable, "-m", "mpi_collectives", "info", "--json"],
                                              cwd=HERE, text=True))
    text = open(info["library"], "rb").read().decode("latin-1")
    for variable in KNOWN["mpich"][1:]:
        collective = variable.name.removeprefix("MPIR_CVAR_").removesuffix("_INTRA_ALGORITHM").lower()
        start = text.index(f"Variable to select {collective} algorithm")
        block = text[start:text.index("\0" + variable.name.replace("MPIR_CVAR_", "MPICH_"), start)]
        offered = {line.split(" - ", 1)[0].strip() for line in block.splitlines() if " - " in line}
        assert set(variable.values) <= offered, (variable.name, sorted(offered))

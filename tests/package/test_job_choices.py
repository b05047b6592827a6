"""One job, one set of choices: each rank chooses its MPI library's settings
before MPI_Init only from what every rank of the job shares
(library_settings.job_layout), and after MPI_Init the ranks compare what they
chose, point to point (services/job_choices.py): a job whose ranks differ
stops within seconds with one line on every rank, never a hang.

Uneven layouts across hosts, a tuning file one host sees and srun's layouts
run on the simulated cluster (tests/cluster/test_cluster.py)."""
import json
import os
import re
import sys
import time

import pytest

from helpers import (EXPECTED_FAMILY, HERE, ONCE, PROGRAMS, SAME_ON_EVERY_FAMILY, TEST_CONFIG, explain, mpiexec_path,
                     run)

MPICH = "MPICH Version:      5.0.2"
LIB = "/opt/mpich/lib/libmpi.so.12"


def layout(environ):
    from mpi_collectives.services.library_settings import job_layout
    return job_layout(environ)


# ---- what every rank can know before MPI starts

@pytest.mark.parametrize("environ, per_node", [
    # srun: every node's count, checked against the job's size and this node's own
    ({"PMI_SIZE": "4", "PMI_RANK": "0", "SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_NODEID": "0"}, (2, 2)),
    ({"PMI_SIZE": "3", "PMI_RANK": "2", "SLURM_STEP_TASKS_PER_NODE": "2,1", "SLURM_NODEID": "1"}, (2, 1)),
    ({"SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "3", "SLURM_STEP_TASKS_PER_NODE": "2,1(x2)",
      "SLURM_NODEID": "2"}, (2, 1, 1)),
    # Hydra's mpiexec inside an allocation: its proxies are the srun step, one per node
    ({"PMI_SIZE": "3", "PMI_RANK": "0", "MPI_LOCALNRANKS": "2", "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
      "SLURM_NODEID": "0"}, None),
    # even by Slurm's count, on nodes of different sizes
    ({"PMI_SIZE": "4", "PMI_RANK": "0", "SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_NODEID": "0",
      "SLURM_JOB_CPUS_PER_NODE": "16,32"}, None),
    # Hydra and Open MPI describe only this node: whole only when the job has one node
    ({"PMI_SIZE": "3", "PMI_RANK": "0", "MPI_LOCALNRANKS": "3"}, (3,)),
    ({"PMI_SIZE": "3", "PMI_RANK": "0", "MPI_LOCALNRANKS": "2"}, None),
    ({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, None),
    ({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, (4,)),
    ({}, None)])
def test_the_layout_is_what_every_rank_can_know(environ, per_node):
    assert layout(environ).per_node == per_node


def entry(**changes):
    out = {"implementation": "mpich", "version": MPICH, "library": LIB, "ranks_per_node": 2, "cpus": 16,
           "settings": {"MPIR_CVAR_DEVICE_COLLECTIVES": "all"}, "date": "2026-11-26"}
    out.update(changes)
    return out


def tuning_file(tmp_path, *entries):
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps({"format": 1, "entries": list(entries)}))
    os.chmod(path, 0o600)
    os.chmod(tmp_path, 0o700)
    return str(path)


def decide(path, environ):
    from mpi_collectives.services import library_settings
    return library_settings.decide(MPICH, LIB, {}, path=path, cpus=16, layout=layout(environ))


def test_an_even_job_uses_the_entry_for_its_ranks_per_node(tmp_path):
    path = tuning_file(tmp_path, entry())
    chosen, line = decide(path, {"PMI_SIZE": "4", "PMI_RANK": "0", "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
                                 "SLURM_NODEID": "1"})
    assert chosen == {"MPIR_CVAR_DEVICE_COLLECTIVES": "all"}, line
    assert "measured by mpi-collectives tune on 2026-11-26" in line


@pytest.mark.parametrize("environ, why", [
    ({"PMI_SIZE": "3", "PMI_RANK": "0", "SLURM_STEP_TASKS_PER_NODE": "2,1", "SLURM_NODEID": "0"},
     "this job's nodes hold different numbers of ranks (2,1, Slurm's SLURM_STEP_TASKS_PER_NODE)"),
    ({"PMI_SIZE": "3", "PMI_RANK": "0", "MPI_LOCALNRANKS": "2"},
     "the launcher describes only this node (2 of the job's 3 ranks)")])
def test_an_uneven_or_undescribed_job_takes_the_built_in_choice_on_every_rank(tmp_path, environ, why):
    """The issue's hang: 2 ranks on one node took the entry for 2 per node, the third rank the default."""
    path = tuning_file(tmp_path, entry())
    chosen, line = decide(path, environ)
    assert chosen == {"MPIR_CVAR_DEVICE_COLLECTIVES": "none"}, line
    assert line.endswith(f"; {path} not used: its entries are each for one number of ranks per node, and {why}, "
                         "so every rank takes the same built-in choice"), line


# ---- the comparison after MPI starts

def choices(**changes):
    out = {"MPI library": "MPICH 5.0.2", "MPI thread level": "multiple", "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "mpi",
           "MPI_COLLECTIVES_CHECK_COLLECTIVES": "1", "MPI_COLLECTIVES_ANY_THREAD": "1",
           "MPIR_CVAR_DEVICE_COLLECTIVES": "none", "why": "the built-in default"}
    out.update(changes)
    return {k: v for k, v in out.items() if v is not None}


def test_ranks_that_chose_alike_pass():
    from mpi_collectives.services.job_choices import difference
    assert difference([choices(), choices(why="the tuning file"), choices()], ["a", "b", "a"]) is None


def test_a_difference_names_the_setting_ranks_hosts_values_and_where_each_came_from():
    from mpi_collectives.services.job_choices import difference
    every = [choices(MPIR_CVAR_DEVICE_COLLECTIVES="all", why="the tuning file")] * 2 + [choices()]
    line = difference(every, ["hA", "hA", "hB"])
    assert line == (
        "the ranks of this job chose different settings, and MPI's collectives hang or fail when they differ: "
        "MPIR_CVAR_DEVICE_COLLECTIVES is all on ranks 0-1 on hA (the tuning file); none on rank 2 on hB (the "
        "built-in default). Fix: make every node read the same tuning file (MPI_COLLECTIVES_TUNING_FILE on a "
        "filesystem every node shares, and `mpi-collectives tune` for each kind of node the job uses), or set "
        "MPI_COLLECTIVES_MPI_SETTINGS=0 for the library's defaults on every rank."), line


def test_several_differences_are_one_line_with_one_fix_for_the_variables():
    from mpi_collectives.services.job_choices import difference
    every = [choices(), choices(), choices(MPI_COLLECTIVES_CHECK_COLLECTIVES="0",
                                           MPIR_CVAR_DEVICE_COLLECTIVES=None, MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM="ring",
                                           why="set by you"), choices()]
    line = difference(every, ["h"] * 4)
    assert "\n" not in line
    assert ("MPI_COLLECTIVES_CHECK_COLLECTIVES is 1 on ranks 0-1, 3; 0 on rank 2 | MPIR_CVAR_DEVICE_COLLECTIVES is "
            "none on ranks 0-1, 3 (the built-in default); unset on rank 2 (set by you) | "
            "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM is unset on ranks 0-1, 3 (the built-in default); ring on rank 2 "
            "(set by you). Fix: set MPI_COLLECTIVES_CHECK_COLLECTIVES and MPIR_CVAR_DEVICE_COLLECTIVES and "
            "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM each to one value for every rank") in line, line


def test_another_mpi_on_one_node_is_named():
    from mpi_collectives.services.job_choices import difference
    line = difference([choices(), choices(**{"MPI library": "MPICH 4.1.2"})], ["n1", "n2"])
    assert "MPI library is MPICH 5.0.2 on rank 0 on n1; MPICH 4.1.2 on rank 1 on n2" in line, line
    assert "run every rank with the same MPI installation" in line, line


# ---- the node path's five settings, compared as the native layer will hold them

NODE_PATH = "MPI_COLLECTIVES_NODE_PATH"
FIX_NODE_PATH_TUNING = (
    "Fix: make every node read the same tuning file (MPI_COLLECTIVES_TUNING_FILE on a filesystem every node shares, "
    "and `mpi-collectives tune` for each kind of node the job uses), or take the tuning file's node-path entry out "
    "of play on every rank: MPI_COLLECTIVES_NODE_PATH=0 (the MPI library's own collectives), or the node path's "
    "variables set by you to the same values for every rank.")


def node_choices(mode, source, **changes):
    return choices(**{NODE_PATH: mode, "node_path_source": source, **changes})


def test_node_path_entries_that_differ_name_the_tuning_file():
    """Nodes of two kinds sharing one tuning file, or a file of each rank's own: entries that differ
    in node_path alone. Before, the ranks compared their settings before initialize() took the
    file's node path, and the job hung in its first psum."""
    from mpi_collectives.services.job_choices import difference
    every = [node_choices("1", "the tuning file")] * 2 + [node_choices("0", "the tuning file")]
    line = difference(every, ["hA", "hA", "hB"])
    assert line == (
        "the ranks of this job chose different settings, and MPI's collectives hang or fail when they differ: "
        "MPI_COLLECTIVES_NODE_PATH is 1 on ranks 0-1 on hA (the tuning file); 0 on rank 2 on hB (the tuning "
        "file). " + FIX_NODE_PATH_TUNING), line


def test_a_node_path_one_rank_took_from_its_tuning_file_is_the_files_to_fix():
    """One rank found an entry, the other none (its default): setting the variable alike would not
    say why they differ; the tuning file's sentence does. Another setting's fix is said beside it."""
    from mpi_collectives.services.job_choices import difference
    every = [node_choices("1", "the tuning file", **{"MPI_COLLECTIVES_NODE_PATH_MIN": "0"}),
             node_choices("2", "the default", MPI_COLLECTIVES_CHECK_COLLECTIVES="0",
                          **{"MPI_COLLECTIVES_NODE_PATH_MIN": "262144"})]
    line = difference(every, ["h", "h"])
    assert ("MPI_COLLECTIVES_CHECK_COLLECTIVES is 1 on rank 0; 0 on rank 1 | MPI_COLLECTIVES_NODE_PATH is 1 on "
            "rank 0 (the tuning file); 2 on rank 1 (the default) | MPI_COLLECTIVES_NODE_PATH_MIN is 0 on rank 0 "
            "(the tuning file); 262144 on rank 1 (the default). Fix: set MPI_COLLECTIVES_CHECK_COLLECTIVES to one "
            "value for every rank (export it in the job script before the launcher: mpiexec -genv, mpirun -x and "
            "srun pass the environment on), or unset it everywhere; and " + FIX_NODE_PATH_TUNING[len("Fix: "):]
            ) in line, line


def test_a_node_path_from_the_environment_on_every_rank_is_the_variables_to_fix():
    from mpi_collectives.services.job_choices import difference
    line = difference([node_choices("2", "the default"), node_choices("0", "set by you")], ["h", "h"])
    assert line.endswith("MPI_COLLECTIVES_NODE_PATH is 2 on rank 0 (the default); 0 on rank 1 (set by you). Fix: "
                         "set MPI_COLLECTIVES_NODE_PATH to one value for every rank (export it in the job script "
                         "before the launcher: mpiexec -genv, mpirun -x and srun pass the environment on), or unset "
                         "it everywhere."), line


def test_a_rank_compares_the_node_path_the_native_layer_will_hold(monkeypatch):
    """The tuning file's entry where initialize() takes it, in the settings' own words (the
    collectives in the table's order, whatever the file's), else the settings."""
    from mpi_collectives.base import mpi, settings
    from mpi_collectives.services import job_choices, library_settings
    monkeypatch.setattr(mpi, "library_version", lambda: MPICH)
    for name in library_settings.NODE_PATH_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def node_path(chosen, **kwargs):
        mine = job_choices.this_rank(chosen, "multiple", "mpi", environ={}, **kwargs)
        return [mine[name] for name in library_settings.NODE_PATH_VARIABLES] + [mine["node_path_source"]]

    chosen = settings.read()
    assert node_path(chosen, node_path=(1, "all-gather,all-reduce", 4096, 0, 1)) == \
        ["1", "all-reduce,all-gather", "4096", "0", "1", "the tuning file"]
    assert node_path(chosen, node_path=(0, "", 0, 0, 0)) == ["0", "none", "0", "0", "0", "the tuning file"]
    assert node_path(chosen) == ["2", "all-reduce", "262144", "67108864", "0", "the default"]
    assert node_path(settings.read(node_path_min=4096)) == ["2", "all-reduce", "4096", "67108864", "0", "set by you"]
    # initialize() asks before it exports its settings, after which every one is in the environment
    assert node_path(chosen, users_node_path=True)[-1] == "set by you"


def test_choices_survive_the_message():
    from mpi_collectives.services.job_choices import decode, encode
    mine = choices(host="node7")
    assert decode(encode(mine)) == mine


# ---- under the family's own launcher: a rank with a setting of its own

# A collective variable of each library that initialize()'s choice does not set (or sets otherwise).
OWN_VARIABLE = {"mpich": "MPIR_CVAR_DEVICE_COLLECTIVES=all", "standard": "MPIR_CVAR_DEVICE_COLLECTIVES=all",
                "impi": "I_MPI_ADJUST_ALLREDUCE=1", "openmpi": "OMPI_MCA_coll_tuned_allreduce_algorithm=4"}


def launch(n, env, args=()):
    start = time.monotonic()
    proc = run([mpiexec_path(), "-n", str(n), sys.executable, os.path.join(PROGRAMS, "one_job.py")] + list(args),
               env={"MPI_COLLECTIVES_INIT_TIMEOUT": "60", "MPI_COLLECTIVES_TUNING_FILE": "/nonexistent/tuning.json",
                    **env}, cwd=HERE, timeout=120)
    proc.seconds = time.monotonic() - start
    return proc


@pytest.mark.jax
@pytest.mark.parametrize("case", ["check", "library", pytest.param("splits", marks=SAME_ON_EVERY_FAMILY)])
def test_a_rank_with_a_setting_of_its_own_stops_the_job_with_one_line(case):
    """The issue's two cases: the agreement check off on one rank (MPICH then said only "Message
    truncated"), and a library variable on one rank (a hang in the first all-reduce); and the split
    check off on one rank (a hang in XLA's first MPI_Comm_split, whose check is an allgather)."""
    assignment = {"check": "MPI_COLLECTIVES_CHECK_COLLECTIVES=0", "splits": "MPI_COLLECTIVES_CHECK_SPLITS=0"}.get(
        case) or OWN_VARIABLE[TEST_CONFIG if TEST_CONFIG in OWN_VARIABLE else EXPECTED_FAMILY]
    name, value = assignment.split("=")
    proc = launch(3, {"ONLY_ON": f"2:{assignment}"})
    text = explain(proc)
    assert proc.returncode != 0 and "EXACT" not in proc.stdout and "WRONG" not in proc.stdout, text
    # (an InitializeError nobody catches is its sentence alone: no traceback, no class name)
    lines = re.findall(r"mpi-collectives: error: the ranks of this job chose different settings.*?or unset it "
                       r"everywhere\.",
                       proc.stderr)
    assert len(lines) == 3, text  # every rank
    assert re.search(rf"{name} is [^;|]+ on ranks 0-1[^;|]*; {re.escape(value)} on rank 2", lines[0]), text
    assert f"Fix: set {name} to one value for every rank" in lines[0], text
    assert proc.seconds < 60, text


@pytest.mark.jax
@pytest.mark.skipif(not ONCE, reason="the comparison's Python and a tuning file's entry, the same on every "
                    "family: the mpich configuration runs it")
def test_ranks_whose_tuning_files_differ_in_the_node_path_stop_the_job_with_one_line(tmp_path):
    """Each rank its own MPI_COLLECTIVES_TUNING_FILE, whose entries for this MPI and shape differ in
    node_path's mode alone: rank 0's all-reduce would go through the node's window, rank 1's through
    the library. Before, the comparison ran before initialize() took the file's node path, and the
    job hung in its first psum."""
    info = json.loads(run([sys.executable, "-m", "mpi_collectives", "info", "--json"], cwd=HERE).stdout)
    from mpi_collectives.services import library_settings
    paths = []
    for mode in (1, 0):
        folder = tmp_path / f"mode{mode}"
        folder.mkdir()
        paths.append(tuning_file(folder, entry(
            implementation=library_settings.implementation(info["version"]), version=info["version"],
            library=os.path.realpath(info["library"]), cpus=os.cpu_count(), settings={},
            node_path={"mode": mode, "collectives": "all-reduce", "min": 0, "max": 0})))
    unset = {name: None for name in library_settings.NODE_PATH_VARIABLES}  # yours would take the file's out of play
    proc = launch(2, {**unset, "MPI_COLLECTIVES_TUNING_FILE": paths[0],
                      "ONLY_ON": f"1:MPI_COLLECTIVES_TUNING_FILE={paths[1]}"})
    text = explain(proc)
    assert proc.returncode != 0 and "EXACT" not in proc.stdout and "WRONG" not in proc.stdout, text
    lines = re.findall(r"mpi-collectives: error: the ranks of this job chose different settings.*?for every rank\.",
                       proc.stderr)
    assert len(lines) == 2, text  # every rank
    assert "differ: MPI_COLLECTIVES_NODE_PATH is 1 on rank 0 (the tuning file); 0 on rank 1 (the tuning file). " \
        + FIX_NODE_PATH_TUNING in lines[0], text
    assert proc.seconds < 60, text


@pytest.mark.jax
@pytest.mark.skipif(not ONCE, reason="a tuning file's entry handed to the native layer, the same on every family: "
                    "the mpich configuration runs it")
@pytest.mark.parametrize("node, said", [
    # the library's large collectives measured faster, the round not slower: the round alone
    ({"mode": 1, "collectives": "", "min": 0, "max": 0, "direct": 1, "round": 4096},
     ["the library's own large collectives; its window (", "checked collectives in one round through its window, "
      "data up to 4096 bytes"]),
    # the window's copies measured faster than reading in place, the round slower: neither
    ({"mode": 1, "collectives": "all-reduce", "min": 0, "max": 0, "direct": 0, "round": 0},
     ["all-reduce from 0 bytes through a shared window", "do not read each other's buffers in place (cross-memory "
      "attach): MPI_COLLECTIVES_NODE_PATH_DIRECT=0"])])
def test_the_windows_reads_and_the_rounds_limit_tune_measured_reach_the_native_layer(tmp_path, node, said):
    """tune's "direct" and "round" (a node path entry measured on one node) are what each window's
    ranks agree on, and the job's psum stays exact."""
    info = json.loads(run([sys.executable, "-m", "mpi_collectives", "info", "--json"], cwd=HERE).stdout)
    from mpi_collectives.services import library_settings
    path = tuning_file(tmp_path, entry(
        implementation=library_settings.implementation(info["version"]), version=info["version"],
        library=os.path.realpath(info["library"]), cpus=os.cpu_count(), settings={}, node_path=node))
    unset = {name: None for name in library_settings.NODE_PATH_TUNED}  # yours would take the file's out of play
    proc = launch(2, {**unset, "MPI_COLLECTIVES_TUNING_FILE": path, "MPI_COLLECTIVES_VERBOSE": "2"})
    text = explain(proc)
    assert proc.returncode == 0 and proc.stdout.count("EXACT rank") == 2, text
    for words in said:
        assert words in proc.stderr, text
    if not node["round"]:
        assert "in one round" not in proc.stderr, text


# Every setting of the package, by what a rank with a value of its own gets: compared after MPI_Init
# (the job stops with one line), or acting on that rank alone (the job runs), with the value the
# launch below gives one rank; a new setting must be placed here.
COMPARED = {"MPI_COLLECTIVES_CHECK_COLLECTIVES", "MPI_COLLECTIVES_ANY_THREAD", "MPI_COLLECTIVES_CHECK_SPLITS",
            "MPI_COLLECTIVES_THREAD_LEVEL",  # (the thread level MPI granted)
            "MPI_COLLECTIVES_MPI_SETTINGS", "MPI_COLLECTIVES_TUNING_FILE",  # (the library variables they give)
            "MPI_COLLECTIVES_NODE_PATH", "MPI_COLLECTIVES_NODE_PATH_COLLECTIVES", "MPI_COLLECTIVES_NODE_PATH_MIN",
            "MPI_COLLECTIVES_NODE_PATH_MAX", "MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES"}
ALONE = {"MPI_COLLECTIVES_BIND_CPUS": "0", "MPI_COLLECTIVES_WATCH_PEERS": "0", "MPI_COLLECTIVES_KEEP_MEMORY": "0",
         "MPI_COLLECTIVES_STALL_REPORT": "0", "MPI_COLLECTIVES_STALL_TIMEOUT": "300",
         "MPI_COLLECTIVES_EXIT_TIMEOUT": "10", "MPI_COLLECTIVES_PREEMPTION_GRACE": "0",
         "MPI_COLLECTIVES_ABORT_ON_EXCEPTION": "0", "MPI_COLLECTIVES_DEVICES_TIMEOUT": "30",
         "MPI_COLLECTIVES_INIT_TIMEOUT": "100", "MPI_COLLECTIVES_VERBOSE": "1", "MPI_COLLECTIVES_INTERFACE": "lo",
         "MPI_COLLECTIVES_LAYOUT_NOTE": "0", "MPI_COLLECTIVES_NOT_INITIALIZED": "quiet",
         # the window's ranks agree on the way when it is made (the least of theirs: the window's copies)
         "MPI_COLLECTIVES_NODE_PATH_DIRECT": "0",
         # a communicator's ranks agree on the round's size at their first checked call (the least of theirs)
         "MPI_COLLECTIVES_NODE_PATH_ROUND": "0"}
# Not given here: which MPI library a rank loads (another library: test_another_mpi_on_one_node_is_named),
# where a rank writes its flight record, the coordinator's address and port (rank 0's are the job's;
# a fixed port could be taken on a shared machine), and GPUs (tests/package/test_gpus.py).
ELSEWHERE = {"MPI_COLLECTIVES_LIBMPI", "MPI_COLLECTIVES_ABI", "MPI_COLLECTIVES_PREFIXES", "MPI_COLLECTIVES_TRACE_DIR",
             "MPI_COLLECTIVES_COORDINATOR", "MPI_COLLECTIVES_PORT", "JAX_LOCAL_DEVICE_IDS"}


def test_every_setting_is_known_as_compared_or_acting_on_one_rank():
    from mpi_collectives.base.settings import TABLE
    from mpi_collectives.services.job_choices import WIRE_SETTINGS
    assert {row.var for row in TABLE.values()} == COMPARED | set(ALONE) | ELSEWHERE
    assert set(WIRE_SETTINGS) <= COMPARED


@pytest.mark.jax
@SAME_ON_EVERY_FAMILY
@pytest.mark.parametrize("odd", [0, 2])
def test_a_rank_with_every_setting_that_acts_on_it_alone_runs_exact(odd):
    """Settings that act on one rank alone may differ, on the coordinator's rank too: their start-up
    exchanges (binding's, the peers watcher's) run on every rank whatever the setting. Before, a rank
    with MPI_COLLECTIVES_BIND_CPUS=0 or MPI_COLLECTIVES_WATCH_PEERS=0 of its own skipped an allgather
    the others made: "Message truncated", or a hang."""
    proc = launch(3, {"ONLY_ON": f"{odd}:" + ";".join(f"{k}={v}" for k, v in ALONE.items())})
    assert proc.returncode == 0 and proc.stdout.count("EXACT rank") == 3, explain(proc)


@pytest.mark.jax
@pytest.mark.skipif(TEST_CONFIG != "mpich", reason="only MPICH 5.0.2 crashes inside MPI_Init on these settings (the other libraries "
                    "reach the ranks' comparison, tested above); under the standard ABI it is the same MPICH, run "
                    "in the mpich configuration")
def test_a_crash_inside_mpi_init_from_settings_that_differ_is_named():
    """MPICH crashes inside MPI_Init (SIGSEGV) when one rank has an all-reduce algorithm of its own
    and the other the built-in generic collectives: before any comparison can run. The crashed rank
    names what it started MPI with, and the fix, instead of the launcher's "signal 11" alone."""
    proc = launch(2, {"ONLY_ON": "0:MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring"})
    text = explain(proc)
    assert proc.returncode != 0 and "EXACT" not in proc.stdout, text
    said = re.findall(r"mpi-collectives: error: rank (\d)/2: the MPI library crashed inside MPI_Init, before the "
                      r"ranks could compare their settings\..*this rank started it with (.*?)\. Fix: give every "
                      r"rank the same MPI library variables", proc.stderr)
    assert said and set(said) <= {("1", "MPIR_CVAR_DEVICE_COLLECTIVES=none (the built-in default)"),
                                  ("0", "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring (set by you)")}, text


# A rank that stops before MPI_Init, on a value of its own that initialize() refuses or a library it
# cannot load: its sentence, and the job ends within seconds. Before, under Hydra and srun the other
# ranks waited in MPI_Init until MPI_COLLECTIVES_INIT_TIMEOUT (300 s by default): a process that exits
# before it spoke to the launcher is not a failure to them (native base/launcher_abort.c).
BEFORE_INIT = {
    "setting": ("MPI_COLLECTIVES_BIND_CPUS=7",
                r"mpi-collectives: error: MPI_COLLECTIVES_BIND_CPUS=7 is not a whole number from 0 to 2"),
    "library": ("MPI_COLLECTIVES_LIBMPI=/nonexistent/libmpi.so",
                r"mpi-collectives: error: no MPI library could be loaded \(/nonexistent/libmpi\.so"),
    # An Open MPI library where the machine has one (the launcher's family then differs), else none
    "abi": ("MPI_COLLECTIVES_ABI=openmpi", r"mpi-collectives: error: (process 1 of 3 was started by a Hydra mpiexec"
                                           r"|no MPI library could be loaded \(no libmpi\.so\.40 )")}


@pytest.mark.jax
@pytest.mark.parametrize("case", ["setting", "library",
                                  pytest.param("abi", marks=pytest.mark.skipif(
                                      EXPECTED_FAMILY != "mpich", reason="the wrong family on one rank is tested where "
                                      "an MPICH-family library runs under Hydra; under Open MPI's mpirun any process that "
                                      "fails ends the job already, as the other two cases show"))])
def test_a_rank_that_stops_before_mpi_init_ends_the_job_at_once(case):
    assignment, sentence = BEFORE_INIT[case]
    proc = launch(3, {"ONLY_ON": f"1:{assignment}", "MPI_COLLECTIVES_INIT_TIMEOUT": "100"})
    text = explain(proc)
    assert proc.returncode != 0 and "EXACT" not in proc.stdout, text
    assert len(re.findall(sentence, proc.stderr)) == 1, text  # the rank that stopped, and only it
    assert proc.seconds < 30, text  # not the other ranks' MPI_COLLECTIVES_INIT_TIMEOUT


@pytest.mark.jax
def test_the_same_setting_on_every_rank_runs_exact():
    name, value = OWN_VARIABLE[TEST_CONFIG if TEST_CONFIG in OWN_VARIABLE else EXPECTED_FAMILY].split("=")
    proc = launch(3, {name: value, "MPI_COLLECTIVES_CHECK_COLLECTIVES": "0"})
    assert proc.returncode == 0 and proc.stdout.count("EXACT rank") == 3, explain(proc)
    assert proc.stdout.count(f"mpi-settings: not applied (left to your {name})") == 3, explain(proc)


@pytest.mark.jax
def test_info_init_shows_the_job_wide_choice_or_the_difference():
    cmd = [mpiexec_path(), "-n", "2", sys.executable, "-m", "mpi_collectives", "info", "--init", "--json"]
    proc = run(cmd, env={"MPI_COLLECTIVES_TUNING_FILE": "/nonexistent/tuning.json"}, cwd=HERE, timeout=120)
    assert proc.returncode == 0, explain(proc)
    job = json.loads(proc.stdout)["job"]
    assert job.startswith("the same on all 2 ranks: MPI library=") and "MPI_COLLECTIVES_CHECK_COLLECTIVES=1" in job, job
    differ = run([mpiexec_path(), "-n", "2", sys.executable, "-c",
                  "import os; from mpi_collectives.base.launchers import launcher_rank_size as r\n"
                  "if r()[0] == 1: os.environ['MPI_COLLECTIVES_ANY_THREAD'] = '0'\n"
                  "import sys; from mpi_collectives.__main__ import main; sys.exit(main(['info', '--init', '--json']))"],
                 env={"MPI_COLLECTIVES_TUNING_FILE": "/nonexistent/tuning.json"}, cwd=HERE, timeout=120)
    assert differ.returncode == 0, explain(differ)
    job = json.loads(differ.stdout)["job"]
    assert job.startswith("the ranks of this job chose different settings") and \
        "MPI_COLLECTIVES_ANY_THREAD is 1 on rank 0; 0 on rank 1" in job, job

"""Ranks per node (issue 52): the layout report of doctor and info --init, initialize()'s note
where a node holds more ranks than sockets or NUMA domains, and `mpi-collectives layouts`, which
times a program at several layouts."""
import json
import os
import re
import sys

import pytest

from helpers import ONCE, ROOT, explain, mpirun, run

PY = sys.executable
EXAMPLE = os.path.join(ROOT, "examples", "train_data_parallel.py")
once = pytest.mark.skipif(not ONCE, reason="Python over MPI's allgather of bytes, the same on every family: "
                                           "the mpich configuration runs it (CI time)")


def placement(host, cpus, cpus_on_node=32, cores=16, sockets=2, numa=2):
    from mpi_collectives.services.layout import Placement
    return Placement(host, frozenset(cpus), {"cpus": cpus_on_node, "cores": cores, "sockets": sockets, "numa": numa})


def test_a_placement_crosses_the_exchange_whole():
    from mpi_collectives.services import layout
    mine = placement("node-a.cluster", [0, 5, 4095], 4096, 2048, 8, 16)
    assert layout._parse(layout._record(mine.host, mine.cpus, mine.node)) == mine


def test_one_rank_per_socket_is_the_advised_layout_and_says_nothing():
    from mpi_collectives.services import layout
    every = [placement(f"n{i // 2}", range(16 * (i % 2), 16 * (i % 2) + 16)) for i in range(4)]
    assert layout.advice(every) == ""
    assert layout.describe(every) == ["2 nodes (n0, n1): 2 ranks, 16 CPUs each; node of 32 CPUs, 16 cores, "
                                      "2 sockets, 2 NUMA domains"]


def test_a_crowded_node_gets_one_sentence_naming_the_advised_layout():
    from mpi_collectives.services import layout
    every = [placement("n0", range(32)) for _ in range(8)] + [placement("n1", range(32)) for _ in range(8)]
    line = layout.advice(every)
    assert line.startswith("8 ranks share node n0 (16 cores, 2 sockets, 2 NUMA domains), as on 1 other node: "), line
    assert "one rank per socket (2 on n0) with all its cores" in line and "`mpi-collectives layouts`" in line, line
    assert "\n" not in line
    # Advice by class of program, each with what was measured: not one rule for every program.
    assert ": the faster layout depends on the program: a dense data-parallel step ran 3-10x faster as " in line, line
    assert ("(a 16-core node: 32 ms a step as 1 rank, 99-336 ms as 2-16 ranks), Monte Carlo sampling 1.55x faster as "
            "one rank per core (NetKet's VMC on 2 cores: 20 ms an iteration as 2 ranks, 31 as 1); measure yours with "
            "`mpi-collectives layouts` (docs/layout.md)") in line, line
    one_socket = [placement("w", range(4), 4, 4, 1, 1) for _ in range(2)]
    assert "as one rank per node with all its cores" in layout.advice(one_socket)
    assert layout.describe(one_socket) == ["w: 2 ranks, 4 CPUs each (the same set for all: the launcher bound none); "
                                           "node of 4 CPUs, 4 cores, 1 socket, 1 NUMA domain"]


def test_a_job_of_many_nodes_reads_in_one_line():
    from mpi_collectives.services import layout
    every = [placement(f"c{i:03d}", range(32)) for i in range(64)]
    assert layout.advice(every) == ""
    (line,) = layout.describe(every)
    assert line.startswith("64 nodes (c000, c001, c002, c003, c004, c005, c006, c007 and 56 more): 1 rank, 32 CPUs;")


@once
@pytest.mark.jax
def test_initialize_notes_a_crowded_node_once_and_can_be_silenced():
    program = [PY, "-c", "import mpi_collectives; mpi_collectives.initialize(); print('PASS')"]
    crowded = mpirun(2, program, env={"MPI_COLLECTIVES_LAYOUT_NOTE": "1"})
    assert crowded.returncode == 0 and crowded.stdout.count("PASS") == 2, explain(crowded)
    notes = [line for line in crowded.stderr.splitlines() if line.startswith("mpi-collectives: note: ")]
    assert len(notes) == 1, explain(crowded)  # once a job, from rank 0
    assert re.match(r"mpi-collectives: note: 2 ranks share node \S+ \(\d+ (cores|CPUs)\): the faster layout depends "
                    r"on the program: a dense data-parallel step ran 3-10x faster as one rank per node with all its "
                    r"cores \(.*\), Monte Carlo sampling 1\.55x faster as one rank per core \(.*\); measure yours with "
                    r"`mpi-collectives layouts` \(docs/layout\.md\)\. ", notes[0]), notes[0]
    assert notes[0].endswith("MPI_COLLECTIVES_LAYOUT_NOTE=0 silences this line."), notes[0]
    silenced = mpirun(2, program, env={"MPI_COLLECTIVES_LAYOUT_NOTE": "0"})
    assert silenced.returncode == 0 and "note:" not in silenced.stderr, explain(silenced)
    alone = mpirun(1, program, env={"MPI_COLLECTIVES_LAYOUT_NOTE": "1"})
    assert alone.returncode == 0 and "note:" not in alone.stderr, explain(alone)
    keyword = mpirun(2, [PY, "-c", "import mpi_collectives; mpi_collectives.initialize(layout_note=0)"],
                     env={"MPI_COLLECTIVES_LAYOUT_NOTE": "1"})
    assert keyword.returncode == 0 and "note:" not in keyword.stderr, explain(keyword)
    bad = mpirun(2, program, env={"MPI_COLLECTIVES_LAYOUT_NOTE": "yes"})
    assert bad.returncode != 0 and "MPI_COLLECTIVES_LAYOUT_NOTE=yes is not 0 or 1" in bad.stderr, explain(bad)


@once
def test_info_init_and_doctor_report_the_layout():
    info = mpirun(2, [PY, "-m", "mpi_collectives", "info", "--init", "--json"])
    assert info.returncode == 0, explain(info)
    data = json.loads(info.stdout)
    cpus = len(os.sched_getaffinity(0))
    assert re.fullmatch(rf"\S+: 2 ranks, {cpus} CPUs each \(the same set for all: the launcher bound none\); "
                        rf"node of {cpus} CPUs, \d+ cores, 1 socket, 1 NUMA domain", data["layout"][0]), data["layout"]
    assert data["layout_advice"].startswith("2 ranks share node "), data
    doctor = mpirun(2, [PY, "-m", "mpi_collectives", "doctor"], env={"MPI_COLLECTIVES_LAYOUT_NOTE": "1"})
    assert doctor.returncode == 0, explain(doctor)
    assert re.search(r"^  \[ok\] layout: \S+: 2 ranks, ", doctor.stdout, re.M), explain(doctor)
    assert re.search(r"^  \[note\] 2 ranks share node ", doctor.stdout, re.M), explain(doctor)
    assert "note:" not in doctor.stderr, explain(doctor)  # said once, in the report: not again by initialize()


def layouts(*args, timeout=600):
    return run([PY, "-m", "mpi_collectives", "layouts", *args], env={"JAX_PLATFORMS": "cpu"}, timeout=timeout)


@once
@pytest.mark.jax
def test_layouts_times_a_program_at_each_layout(tmp_path):
    out = tmp_path / "layouts.json"
    proc = layouts("--per-node", "1,2", "--time", r"median step ([0-9.]+) ms", "--out", str(out), "--",
                   PY, EXAMPLE, "--global-batch", "64", "--steps", "12", "--tag", "{ranks}/{per_node}/{cpus}")
    # --tag is not the example's: the example says so and exits 2, so every layout fails, named
    assert proc.returncode == 1 and proc.stdout.count("FAILED (exit 2: ") == 2, explain(proc)
    proc = layouts("--per-node", "1,2", "--time", r"median step ([0-9.]+) ms", "--out", str(out), "--",
                   PY, EXAMPLE, "--global-batch", "64", "--steps", "12")
    assert proc.returncode == 0, explain(proc)
    rows = re.findall(r"^ +(\d) +(\d) +(\d+) +([\d.]+) +([\d.]+) +([\d.]+)$", proc.stdout, re.M)
    cpus = len(os.sched_getaffinity(0))
    assert [r[:3] for r in rows] == [("1", "1", str(cpus)), ("2", "2", str(cpus // 2))], explain(proc)
    assert min(float(r[5]) for r in rows) == 1.0, rows
    assert re.search(r"^fastest: [12] ranks? per node, \d+ CPUs each \(by the printed time\)$", proc.stdout, re.M)
    data = json.loads(out.read_text())
    assert [r["ranks"] for r in data["rows"]] == [1, 2] and all(len(r["time"]) == 1 for r in data["rows"]), data
    assert data["rows"][1]["command"][-5:] == [EXAMPLE, "--global-batch", "64", "--steps", "12"]


@once
@pytest.mark.jax
def test_layouts_without_time_warns_when_start_up_decides():
    """A run of about a second judged by wall-clock time: start-up is most of it, and it says so."""
    proc = layouts("--per-node", "1,2", "--", PY, "-c", "import mpi_collectives; mpi_collectives.initialize()")
    assert proc.returncode == 0, explain(proc)
    assert re.search(r"^ranks/node +ranks +CPUs/rank +wall s +start-up s +/fastest$", proc.stdout, re.M), explain(proc)
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("mpi-collectives layouts: warning: ")]
    assert len(warnings) == 1, explain(proc)
    assert re.match(r"mpi-collectives layouts: warning: start-up alone \(launching the ranks, Python, jax and "
                    r"initialize\(\), timed by a launch of each layout that does only that\) took [\d.-]+ s of the "
                    r"launches' [\d.-]+ s \(up to \d+%\): the wall-clock times compare start-ups more than your "
                    r"program's work", warnings[0]), warnings[0]
    assert "Time the work instead: --time REGEX on a time your program prints" in warnings[0], warnings[0]


@once
@pytest.mark.jax
def test_layouts_tries_one_rank_with_a_device_per_cpu_and_says_compilation_is_not_apart():
    """Issue 74: the third candidate of docs/netket.md (one process, JAX_NUM_CPU_DEVICES=N) was never
    tried, and without --time the start-up line (8%) hid compilation (85% of a NetKet run)."""
    program = ("import mpi_collectives; mpi_collectives.initialize(); import jax; "
               "assert jax.local_device_count() == int(__import__('os').environ.get('JAX_NUM_CPU_DEVICES', 1))")
    proc = layouts("--per-node", "1", "--devices", "2", "--", PY, "-c", program)
    assert proc.returncode == 0, explain(proc)
    assert re.search(r"^ +1 x2dev +1 +\d+ +[\d.]+ +[\d.]+ +[\d.]+$", proc.stdout, re.M), explain(proc)
    assert "1 rank per node with 2 CPU devices" in proc.stderr, explain(proc)
    assert "also hold your program's own JIT compilation" in proc.stderr, explain(proc)
    proc = layouts("--devices", "9", "--", "true", timeout=60)
    assert proc.returncode == 2 and "argument --devices: from 0 to 8" in proc.stderr, explain(proc)


def test_the_start_up_warning_speaks_only_when_start_up_weighs():
    from mpi_collectives.tools.layouts import startup_warning

    def row(per_node, wall, startup):
        return {"per_node": per_node, "failed": None, "median": wall, "startup_s": startup}
    # minutes of work: start-up is a few per cent, and the order stands
    assert startup_warning([row(1, 120.0, 3.0), row(2, 200.0, 4.0)]) == ""
    # a short run: start-up is most of each launch
    said = startup_warning([row(1, 6.0, 3.0), row(2, 6.5, 4.4)])
    assert "took 3.0-4.4 s of the launches' 6.0-6.5 s (up to 68%)" in said, said
    assert "; less start-up, 2 ranks per node would be the fastest (2.1 s against 3.0 s)" in said, said
    # start-up a small share, but it alone orders the layouts
    said = startup_warning([row(1, 100.0, 2.0), row(2, 101.0, 4.0)])
    assert "(up to 4%)" in said and "less start-up, 2 ranks per node would be the fastest" in said, said
    assert startup_warning([dict(row(1, 6.0, 3.0), failed="exit 1"), row(2, 6.0, None)]) == ""


def test_layouts_fills_in_the_layout_for_programs_that_ask():
    from mpi_collectives.tools import layouts as tool
    line = tool.launch_line(["srun"], "srun", 2, 4, 8, ["python", "t.py", "--ranks={ranks}", "{per_node}x{cpus}"])
    assert line == ["srun", "--nodes=2", "--ntasks=8", "--ntasks-per-node=4", "--cpus-per-task=8",
                    "python", "t.py", "--ranks=8", "4x8"]
    assert tool.launch_line(["mpirun"], "openmpi", 1, 2, 8, ["p"]) == [
        "mpirun", "-n", "2", "--map-by", "ppr:2:node", "--bind-to", "none", "p"]
    assert tool.launch_line(["mpiexec"], "hydra", 1, 2, 8, ["p"]) == ["mpiexec", "-n", "2", "-ppn", "2", "p"]
    assert tool.default_counts(16, 1) == [1, 2, 4, 8, 16] and tool.default_counts(48, 2) == [1, 2, 4, 8, 16, 32]
    assert tool.default_counts(24, 3) == [1, 2, 3, 4, 8, 16]


@pytest.mark.parametrize("args, code, said", [
    ([], 2, "no program: give it after --"),
    (["--per-node", "0", "--", "true"], 2, "every count must be at least 1"),
    (["--per-node", "two", "--", "true"], 2, "is not a list of ranks per node like 1,2,4"),
    (["--time", "(", "--", "true"], 2, "argument --time: not a regular expression"),
    (["--launcher", "no-such-launcher", "--", "true"], 2, "the launcher no-such-launcher was not found"),
    (["--per-node", "1,100000", "--", "true"], 1, "100000 ranks per node is more than the node's"),
])
def test_layouts_refuses_bad_input_in_one_line(args, code, said):
    proc = layouts(*args, timeout=60)
    assert proc.returncode == code and said in proc.stderr, explain(proc)
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == "", explain(proc)


@once
def test_layouts_names_a_time_it_cannot_find():
    proc = layouts("--per-node", "1", "--time", r"no such line (\d+)", "--", PY, "-c", "print('hello')")
    assert proc.returncode == 1, explain(proc)
    assert "FAILED (--time 'no such line (\\\\d+)' matched nothing in its output)" in proc.stdout, explain(proc)


def test_the_node_paths_line_says_what_it_will_do():
    from mpi_collectives.base.settings import read
    from mpi_collectives.services.layout import Placement
    from mpi_collectives.services.node_path import describe

    two = [Placement("a", frozenset({0}), {}), Placement("a", frozenset({1}), {})]
    on = read(node_path=1, node_path_min=262144, node_path_max=0)
    assert describe(two, on, free=1 << 30) == (
        "on: all-reduce of at least 262144 bytes among ranks of one node through a shared window of MPI's "
        "(3336 KiB of shared memory for 2 ranks, per communicator); every checked collective's check, and its "
        "data up to 65536 bytes, in one round through it (MPI_COLLECTIVES_NODE_PATH_ROUND)")
    assert "one round" not in describe(two, read(node_path=1, node_path_round=0), free=1 << 30)
    assert "one round" not in describe(two, read(node_path=1, check_collectives=0), free=1 << 30)
    short = describe(two + [Placement("b", frozenset({0}), {})], on, free=3 << 20)
    assert short.endswith("communicators that span nodes keep the library's (MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1 "
                          "composes their all-reduces); but /dev/shm has 3072 KiB free here, "
                          "less than twice that: each communicator will use the library's own (a larger /dev/shm, "
                          "or MPI_COLLECTIVES_NODE_PATH=0)"), short
    across = read(node_path=1, node_path_min=262144, node_path_max=0, node_path_across_nodes=1)
    even = two + [Placement("b", frozenset({0}), {}), Placement("b", frozenset({1}), {})]
    assert describe(even, across, free=1 << 30).endswith(
        "; all-reduces of communicators that span nodes: each node's window, the library between nodes "
        "(MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1)")
    assert "the nodes hold different numbers of ranks" in describe(two + [even[2]], across, free=1 << 30)
    assert describe([Placement("a", frozenset({0}), {}), Placement("b", frozenset({0}), {})], on).startswith("not used")
    assert describe(two, read(node_path=0)).startswith("off (MPI_COLLECTIVES_NODE_PATH=0)")

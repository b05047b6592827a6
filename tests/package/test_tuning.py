"""tuning.py: CPU binding and keeping freed memory, decided per rank by
initialize(); a binding or malloc setting of the user's is never changed."""
import ast
import os
import re
import shutil
import sys

import pytest

from helpers import HERE, ONCE, PROGRAMS, explain, mpiexec_path, run

PROGRAM = os.path.join(PROGRAMS, "init_cases.py")


def records(*ranks):
    return [(host, frozenset(cpus)) for host, cpus in ranks]


def one_socket(cpus: int, cores: int = None):
    """A one-socket, one-domain node: CPU c on core c % cores (Linux numbers second hardware
    threads after every first one)."""
    from mpi_collectives.base.topology import Topology
    cores = cores or cpus
    return Topology.described({c: (0, c % cores, 0) for c in range(cpus)})


def test_ranks_that_share_one_cpu_set_get_disjoint_slices(monkeypatch):
    from mpi_collectives.services import tuning
    monkeypatch.setattr(tuning.Topology, "read", classmethod(lambda cls, root="/sys": one_socket(8)))
    every = records(("a", range(8)), ("a", range(8)), ("b", range(4)), ("a", range(8)))
    chosen = [tuning.binding_for(r, every) for r in range(4)]
    assert chosen[2] == (None, "one rank on this node")
    # 8 cores for 3 ranks: 3, 3 and 2 (none left unused)
    assert [chosen[r] for r in (0, 1, 3)] == [({0, 1, 2}, "3 ranks on this node"),
                                              ({3, 4, 5}, "3 ranks on this node"),
                                              ({6, 7}, "3 ranks on this node")]


def test_a_binding_made_by_the_launcher_is_kept():
    from mpi_collectives.services.tuning import binding_for
    chosen, why = binding_for(0, records(("a", {0}), ("a", {1})))
    assert chosen is None and "bound the ranks already" in why


def test_more_ranks_than_cpus_are_not_bound():
    from mpi_collectives.services.tuning import binding_for
    chosen, why = binding_for(1, records(("a", {0, 1}), ("a", {0, 1}), ("a", {0, 1})))
    assert chosen is None and why == "3 ranks share 2 CPUs"


def test_slices_keep_hardware_threads_of_a_core_together():
    from mpi_collectives.services import tuning
    # CPUs 0-3 are cores 0-3, CPUs 4-7 their second hardware threads (Linux's usual numbering).
    node = one_socket(8, cores=4)
    assert tuning.slices(range(8), 4, node) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert tuning.slices(range(8), 3, node) == [[0, 1, 4, 5], [2, 6], [3, 7]]  # 4 cores: 2, 1, 1


def test_fewer_cores_than_ranks_are_cut_by_hardware_thread():
    from mpi_collectives.base.topology import Topology
    from mpi_collectives.services import tuning
    # 4 cores, 8 hardware threads, 6 ranks: by single CPUs, the first two ranks taking two
    assert tuning.slices(range(8), 6, one_socket(8, cores=4)) == [[0, 4], [1, 5], [2], [6], [3], [7]]
    unknown = Topology.described({c: (-1, -1, -1) for c in range(5)})  # no topology: CPU by CPU
    assert tuning.slices(range(5), 2, unknown) == [[0, 1, 2], [3, 4]]


def two_sockets(root, numa_per_socket=1):
    """A folder laid out as /sys for a two-socket node of 16 cores, 2 hardware threads each (32
    CPUs): CPUs 0-7 are socket 0's cores, 8-15 socket 1's, 16-31 their second threads, Linux's
    numbering on two-socket Xeons; each socket one NUMA domain, or two (sub-NUMA clustering)."""
    cpu_dir = root / "devices" / "system" / "cpu"
    nodes = {}
    for cpu in range(32):
        core = cpu % 16
        package, core_id = core // 8, core % 8
        topo = cpu_dir / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{package}\n")
        (topo / "core_id").write_text(f"{core_id}\n")
        nodes.setdefault(package * numa_per_socket + core_id * numa_per_socket // 8, []).append(cpu)
    for node, cpus in nodes.items():
        folder = root / "devices" / "system" / "node" / f"node{node}"
        folder.mkdir(parents=True)
        runs = []
        for c in cpus:
            if runs and runs[-1][1] == c - 1:
                runs[-1][1] = c
            else:
                runs.append([c, c])
        (folder / "cpulist").write_text(",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs) + "\n")
    return root


def test_the_topology_is_read_as_sysfs_describes_it(tmp_path):
    from mpi_collectives.base.topology import Topology
    node = Topology.read(str(two_sockets(tmp_path)))
    assert node.summary() == {"cpus": 32, "cores": 16, "sockets": 2, "numa": 2}
    assert node.place(9) == node.place(25) and node.place(9).package == 1 and node.place(9).node == 1
    assert [sorted(c for core in d for c in core) for d in node.domains(range(32))] == [
        sorted(list(range(0, 8)) + list(range(16, 24))), sorted(list(range(8, 16)) + list(range(24, 32)))]
    assert Topology.read(str(tmp_path / "nothing")).summary() == {"cpus": 0, "cores": 0, "sockets": 0, "numa": 0}


@pytest.mark.parametrize("numa_per_socket", [1, 2])
def test_one_rank_per_socket_or_numa_domain_gets_exactly_one(tmp_path, numa_per_socket):
    """Issue 52: with as many ranks on a node as it has sockets or NUMA domains, each rank's slice
    is one domain, never a split across two; fewer ranks take whole domains, more split each one."""
    from mpi_collectives.base.topology import Topology
    from mpi_collectives.services import tuning
    node = Topology.read(str(two_sockets(tmp_path, numa_per_socket)))
    socket = lambda s: set(range(8 * s, 8 * s + 8)) | set(range(16 + 8 * s, 24 + 8 * s))  # noqa: E731
    domain = lambda d: {c for c in range(32) if node.place(c).node == d}  # noqa: E731
    assert [set(s) for s in tuning.slices(range(32), 2, node)] == [socket(0), socket(1)]
    domains = 2 * numa_per_socket
    slices = [set(s) for s in tuning.slices(range(32), domains, node)]
    assert slices == [domain(d) for d in range(domains)], slices
    # 8 ranks: each within one domain, whole cores (a CPU with its sibling thread)
    for s in tuning.slices(range(32), 8, node):
        assert len({node.place(c).node for c in s}) == 1 and all((c + 16) % 32 in s for c in s), s
    # The same cut through binding_for, from the ranks' shared CPU set
    every = records(*[("a", range(32))] * domains)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(tuning.Topology, "read", classmethod(lambda cls, root="/sys": node))
        assert [tuning.binding_for(r, every)[0] for r in range(domains)] == [domain(d) for d in range(domains)]


def test_a_cpu_set_that_spans_sockets_unevenly_still_gives_each_rank_one(tmp_path):
    """A launcher's set of 12 CPUs of socket 0 and 4 of socket 1, 2 ranks: one socket's part
    each, uneven, never a slice across both (memory stays local)."""
    from mpi_collectives.base.topology import Topology
    from mpi_collectives.services import tuning
    node = Topology.read(str(two_sockets(tmp_path)))
    cpus = list(range(0, 6)) + list(range(16, 22)) + [8, 9, 24, 25]
    assert [set(s) for s in tuning.slices(cpus, 2, node)] == [set(range(0, 6)) | set(range(16, 22)), {8, 9, 24, 25}]
    # 3 ranks on 2 sockets cannot avoid a split: the node is cut evenly by cores (8 cores: 3, 3, 2)
    assert [len(s) for s in tuning.slices(cpus, 3, node)] == [6, 6, 4]


@pytest.mark.parametrize("variable, value", [("MALLOC_ARENA_MAX", "2"), ("MALLOC_MMAP_THRESHOLD_", "65536"),
                                             ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0")])
def test_a_malloc_setting_of_the_user_wins(variable, value):
    from mpi_collectives.services.tuning import keep_freed_memory
    line = keep_freed_memory(apply=False, environ={variable: value})
    assert line == f"keep-memory: not applied (left to your {variable})"


def test_keep_memory_is_applied_only_to_glibc_malloc():
    from mpi_collectives.services.tuning import keep_freed_memory
    line = keep_freed_memory(apply=False, environ={"GLIBC_TUNABLES": "glibc.rtld.nns=2"})
    assert line.startswith("keep-memory: would set M_MMAP_MAX=0"), line  # CI's Python: glibc's malloc


DECIDE = ("import ctypes; from mpi_collectives.services import tuning; "
          "own = ctypes.cast(ctypes.CDLL(None).malloc, ctypes.c_void_p).value; "
          "libc = ctypes.cast(ctypes.CDLL('libc.so.6').malloc, ctypes.c_void_p).value; "
          "print('SAME' if own == libc else 'DIFFERENT'); "
          "print(tuning.keep_freed_memory(apply=False, environ={}))")
PRELOADED = {"jemalloc": "libjemalloc.so.2", "tcmalloc": "libtcmalloc_minimal.so.4"}


@pytest.fixture(scope="module")
def nonpie_python(tmp_path_factory):
    """tests/programs/nonpie_launcher.c built as Ubuntu's and Debian's /usr/bin/python3 are: not
    position-independent, its own code taking malloc's address, Python embedded; with the
    environment that finds this Python's standard library and site-packages."""
    import sysconfig
    import site
    if not shutil.which("gcc"):
        pytest.skip("needs gcc to build the non-PIE launcher (scripts/setup_env.sh needs it too)")
    libdir, version = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDVERSION")
    exe = str(tmp_path_factory.mktemp("nonpie") / "python-nonpie")
    build = run(["gcc", "-no-pie", "-fno-pic", "-O1", os.path.join(PROGRAMS, "nonpie_launcher.c"),
                 "-o", exe, f"-L{libdir}", f"-lpython{version}", f"-Wl,-rpath,{libdir}"]
                + sysconfig.get_config_var("LIBS").split() + sysconfig.get_config_var("SYSLIBS").split())
    assert build.returncode == 0, explain(build)
    return exe, {"PYTHONHOME": sys.base_prefix, "PYTHONPATH": os.pathsep.join(site.getsitepackages())}


# A thread (as XLA's pool threads do) holds 48 MiB and allocates three 16 MiB blocks in its own glibc
# arena (they take a second heap), writes them and frees them, three times; the page faults of
# the last two rounds are printed.
THREAD_BLOCKS = r"""
import ctypes, resource, sys, threading
from mpi_collectives.services import tuning
tuning.TOP_PAD = int(sys.argv[1])
tuning.ONE_ARENA_UP_TO = 0  # a rank that keeps several arenas, whatever this machine's CPUs: the pad's case
print(tuning.keep_freed_memory(), file=sys.stderr)
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
faults = []
def rounds():
    kept = libc.malloc(48 << 20)  # what the thread holds meanwhile: the blocks below need a heap of their own
    for r in range(3):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        blocks = [libc.malloc(16 << 20) for _ in range(3)]
        for b in blocks:
            ctypes.memset(b, 1, 16 << 20)
        for b in blocks:
            libc.free(b)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
t = threading.Thread(target=rounds)
t.start(); t.join()
print(sum(faults[1:]))
"""


@pytest.mark.parametrize("top_pad", [64 << 20, 0])
def test_freed_blocks_of_a_threads_arena_are_kept(top_pad):
    """keep-memory's M_TOP_PAD, on a rank that keeps several arenas: without it glibc unmaps a thread
    arena's heap each time it empties (the control, top_pad=0), and every round page-faults its
    48 MiB (12,288 pages) afresh."""
    from mpi_collectives.services import tuning
    if tuning.keep_memory_reason({}) is not None:
        pytest.skip(f"keep-memory cannot apply here: {tuning.keep_memory_reason({})}")
    proc = run([sys.executable, "-c", THREAD_BLOCKS, str(top_pad)], cwd=HERE, timeout=60)
    assert proc.returncode == 0, explain(proc)
    faults = int(proc.stdout.split()[-1])
    pages = 2 * 3 * (16 << 20) // os.sysconf("SC_PAGE_SIZE")
    if top_pad:
        assert faults < pages // 10, f"{faults} page faults in two rounds of 48 MiB\n" + explain(proc)
    else:
        assert faults > pages // 2, f"the control: only {faults} page faults without the pad\n" + explain(proc)


def test_glibc_malloc_is_recognised_behind_a_non_pie_launcher(nonpie_python):
    exe, env = nonpie_python
    proc = run([exe, "-c", DECIDE], env=env, cwd=HERE)
    assert proc.returncode == 0, explain(proc)
    # The launcher's own PLT entry is malloc's address there, not libc's: the case to decide.
    pad = f", M_TOP_PAD={64 << 20}" if len(os.sched_getaffinity(0)) > 4 else ""  # only where arenas stay several
    assert proc.stdout.splitlines() == [
        "DIFFERENT", f"keep-memory: would set M_MMAP_MAX=0, M_TRIM_THRESHOLD={1 << 30}{pad}"], explain(proc)


def preloaded(name):
    path = f"/usr/lib/{os.uname().machine}-linux-gnu/{PRELOADED[name]}"
    if not os.path.exists(path):
        pytest.skip(f"{PRELOADED[name]} is not installed (Debian: libjemalloc2, libtcmalloc-minimal4; "
                    "scripts/test.sh installs both)")
    return path


@pytest.mark.parametrize("name", sorted(PRELOADED))
@pytest.mark.parametrize("launcher", ["python", "non-PIE launcher"])
def test_a_preloaded_malloc_is_left_alone(name, launcher, request):
    if launcher == "python":
        exe, env = sys.executable, {}
    else:
        exe, env = request.getfixturevalue("nonpie_python")
    proc = run([exe, "-c", DECIDE], env={**env, "LD_PRELOAD": preloaded(name)}, cwd=HERE)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.splitlines() == ["DIFFERENT", "keep-memory: not applied (malloc is not glibc's)"], \
        explain(proc)


def init_ranges(cpus) -> str:
    """{0, 1, 2, 5} -> '0-2,5', as /proc's Cpus_allowed_list writes a set."""
    from mpi_collectives.services.tuning import _ranges
    return _ranges(cpus)


def launch_and_read_tunings(env, per_rank_prefix="", threads=False):
    """Two ranks of init_cases.py 'plain'; {rank: (cpus, [tuning lines])}, and with threads
    (threads moved by the wrapper, {CPU set: threads}) third."""
    command = f"exec {per_rank_prefix}{sys.executable} {PROGRAM} plain"
    proc = run([mpiexec_path(), "-n", "2", "bash", "-c", command],
               env={"MPI_COLLECTIVES_INIT_TIMEOUT": "60", **env})
    assert proc.returncode == 0, explain(proc)
    out = {}
    line = r"TUNINGS rank (\d) cpus (\[[\d, ]*\]) \| (.*?)(?=TUNINGS rank|THREADS rank|\n|$)"  # ranks' lines may interleave
    for rank, cpus, lines in re.findall(line, proc.stdout):
        out[int(rank)] = (set(ast.literal_eval(cpus)), lines.split(" | "))
    assert sorted(out) == [0, 1], explain(proc)
    if threads:
        for rank, moved, sets in re.findall(r"THREADS rank (\d) moved (\d+) sets (\{[^}]*\})", proc.stdout):
            out[int(rank)] += ((int(moved), ast.literal_eval(sets)),)
        assert all(len(v) == 3 for v in out.values()), explain(proc)
    return out


# MPICH's Hydra binds nothing unless asked; Open MPI's mpirun and Intel MPI's mpiexec bind by default.
hydra_only = pytest.mark.skipif(not ONCE, reason="MPICH's Hydra binds nothing by default; the other "
                                "launchers bind, which test_a_binding_made_by_the_launcher_is_kept covers")


@pytest.mark.jax
@hydra_only
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to give each rank its own")
def test_unbound_ranks_are_bound_to_their_own_cpus_and_memory_is_kept():
    got = launch_and_read_tunings({})
    (cpus0, lines0), (cpus1, lines1) = got[0], got[1]
    assert cpus0 and cpus1 and not cpus0 & cpus1, got
    for lines in (lines0, lines1):
        assert lines[0].startswith("keep-memory: mallopt M_MMAP_MAX=0"), got
        assert lines[-1].startswith("bind-cpus: CPUs ") and lines[-1].endswith("(2 ranks on this node)"), got
        assert lines[1] == f"one-arena: mallopt M_ARENA_MAX=1 ({len(os.sched_getaffinity(0))} CPUs)", got
        assert "M_TOP_PAD" not in lines[0], got  # one arena: the main heap's trim threshold keeps its top


@pytest.mark.jax
@hydra_only
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to give each rank its own")
def test_binding_only_the_threads_that_call_mpi_leaves_xlas_other_threads_the_whole_set():
    whole = init_ranges(os.sched_getaffinity(0))
    got = launch_and_read_tunings({"MPI_COLLECTIVES_BIND_CPUS": "2"}, threads=True)
    slices = []
    for rank, (cpus, lines, (moved, sets)) in got.items():
        said = re.fullmatch(r"bind-cpus: threads that call MPI to CPUs (\S+) of (\S+), XLA's other threads on all "
                            r"\(2 ranks on this node\)", lines[-1])
        assert said and said[2] == whole, got
        mine = said[1]
        # The psum's thread moved onto the slice at its first call; the main thread (which
        # created JAX's backend) and XLA's pool threads kept the whole set.
        assert moved >= 1 and sets.get(mine) == moved, got
        assert init_ranges(cpus) == whole and sets.get(whole, 0) >= 2 and set(sets) == {mine, whole}, got
        slices.append(mine)
    assert slices[0] != slices[1], got


@pytest.mark.jax
@hydra_only
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to bind ranks differently")
def test_ranks_the_launcher_bound_differently_keep_their_cpus():
    first, second = sorted(os.sched_getaffinity(0))[:2]
    prefix = f'taskset -c $(( ${{PMI_RANK:-0}} == 0 ? {first} : {second} )) '
    got = launch_and_read_tunings({}, prefix)
    assert got[0][0] == {first} and got[1][0] == {second}, got
    assert got[0][1][-1] == "bind-cpus: not applied (the launcher or you bound the ranks already)", got


@pytest.mark.jax
@hydra_only
def test_every_tuning_can_be_switched_off():
    got = launch_and_read_tunings({"MPI_COLLECTIVES_BIND_CPUS": "0", "MPI_COLLECTIVES_KEEP_MEMORY": "0",
                                   "MPI_COLLECTIVES_MPI_SETTINGS": "0"})
    assert got[0][0] == got[1][0] == os.sched_getaffinity(0), got
    assert got[0][1] == ["keep-memory: off (MPI_COLLECTIVES_KEEP_MEMORY=0)",
                         "mpi-settings: off (MPI_COLLECTIVES_MPI_SETTINGS=0)",
                         "bind-cpus: off (MPI_COLLECTIVES_BIND_CPUS=0)"], got


@pytest.mark.jax
@hydra_only
def test_a_binding_tune_measured_is_applied_and_said():
    """A tuning entry for this MPI and shape that says "unbound" (what tune keeps where binding made
    a step slower): each rank keeps its CPU set and says why."""
    import json
    import tempfile

    from mpi_collectives.services import library_settings
    info = json.loads(run([sys.executable, "-m", "mpi_collectives", "info", "--json"], cwd=HERE).stdout)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "tuning.json")
        library_settings.write_entry(path, {
            "implementation": library_settings.implementation(info["version"]), "version": info["version"],
            "library": os.path.realpath(info["library"]), "ranks_per_node": 2, "cpus": os.cpu_count(),
            "nodes": 1, "settings": {}, "bind_cpus": 0, "date": "2026-11-27"})
        got = launch_and_read_tunings({"MPI_COLLECTIVES_TUNING_FILE": path})
    for cpus, lines in got.values():
        assert cpus == os.sched_getaffinity(0), got
        assert lines[-1] == "bind-cpus: off (MPI_COLLECTIVES_BIND_CPUS=0 measured fastest by mpi-collectives tune " \
                            "on 2026-11-27)", got

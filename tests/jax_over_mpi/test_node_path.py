"""The node's own data path (native/src/services/node/, issue 55): all-reduces of
ranks that share a node go through MPI's shared-memory windows, exact, the same
bits on every rank, on every family; off with one setting; with no room in
/dev/shm one line and the library's own; a rank stalled or killed while the
others wait in it named as in the library's."""
import os
import re
import shutil
import sys

import pytest

from helpers import ONCE, PROGRAMS, explain, extended, mpiexec_path, mpirun, run

from mpi_collectives.integration.jax_compat import LOCAL_DEVICES_JAX, installed_jax, version_tuple

pytestmark = pytest.mark.jax
PROGRAM = os.path.join(PROGRAMS, "node_path.py")
EVERY = "all-reduce,all-gather,reduce-scatter,all-to-all"
TAKEN = f"{EVERY} from 262144 bytes through a shared window"
# On with every library (the default, 2, leaves Intel MPI its own) for every collective it can take
# (the default takes all-reduce alone), and its log line.
ON = {"MPI_COLLECTIVES_NODE_PATH": "1", "MPI_COLLECTIVES_NODE_PATH_COLLECTIVES": EVERY, "MPI_COLLECTIVES_VERBOSE": "2"}


def digests(proc, n):
    found = re.findall(r"PASS node path rank (\d+) digest ([0-9a-f]+)", proc.stdout)
    assert proc.returncode == 0 and sorted(int(r) for r, _ in found) == list(range(n)), explain(proc)
    assert len({d for _, d in found}) == 1, explain(proc)  # every rank the same bits
    return found[0][1]


# Its two ways: the ranks reading each other's buffers in place (direct.c, where the kernel allows it:
# it does here), or every byte through the window.
DIRECT = "its ranks on this node read each other's buffers in place"


# 3 ranks both ways on every family (uneven slices, each family's arithmetic); 2 ranks once (CI time)
@pytest.mark.parametrize("n, way", [pytest.param(2, "direct", marks=pytest.mark.skipif(
    not ONCE, reason="2 ranks take the same steps as 3, once, in the mpich configuration (CI time)")),
    (3, "direct"), pytest.param(3, "window", marks=pytest.mark.skipif(
        not ONCE, reason="the window's copies are the wrapper's own and its window is made as in the direct "
                         "way: once, in the mpich configuration (CI time; the fuzzer runs both ways on each "
                         "family)"))])
def test_all_reduces_through_the_node_path_are_exact_on_every_rank(n, way):
    env = {**ON, "MPI_COLLECTIVES_NODE_PATH_DIRECT": "1" if way == "direct" else "0"}
    proc = mpirun(n, [sys.executable, PROGRAM], env=env, timeout=300)
    digests(proc, n)
    assert proc.stderr.count(TAKEN) >= n, explain(proc)  # each rank's communicator has its window
    assert "Error" not in proc.stderr, explain(proc)  # (Open MPI's osc/ucx printed one per window)
    assert (DIRECT in proc.stderr) == (way == "direct"), explain(proc)


@pytest.mark.skipif(not ONCE, reason="on each other family the fuzzer (tests/native/test_fuzz.py) compares the node path "
                                      "with the library alone, step by step: once here, in the mpich configuration "
                                      "(CI time, 18 s a family)")
def test_off_the_library_gives_the_same_results():
    on = digests(mpirun(2, [sys.executable, PROGRAM], env=ON, timeout=300), 2)
    proc = mpirun(2, [sys.executable, PROGRAM], env={"MPI_COLLECTIVES_NODE_PATH": "0", "MPI_COLLECTIVES_VERBOSE": "2"},
                  timeout=300)
    assert digests(proc, 2) == on  # small integers: every order of the sums gives the same bits
    assert TAKEN not in proc.stderr, explain(proc)


@pytest.mark.skipif(not ONCE or version_tuple(installed_jax()) < LOCAL_DEVICES_JAX,
                    reason="once (the mpich configuration), with jax 0.6 or newer (several devices per process)")
def test_two_devices_per_process():
    proc = mpirun(2, [sys.executable, PROGRAM], env={**ON, "JAX_NUM_CPU_DEVICES": "2"}, timeout=300)
    digests(proc, 2)
    assert TAKEN in proc.stderr, explain(proc)  # the process communicator of the devices' group


@pytest.mark.skipif(not ONCE or os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="once (the mpich configuration), as root (a mount namespace with a small /dev/shm)")
def test_no_room_in_dev_shm_is_one_line_and_the_library():
    """A container's small /dev/shm: MPICH would die of SIGBUS touching a window that does not fit,
    so the room is looked at first."""
    proc = run(["env", "MPI_COLLECTIVES_NODE_PATH=1", "unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=3m tmpfs /dev/shm && exec "$@"', "sh",
                mpiexec_path(), "-n", "2", sys.executable, PROGRAM], timeout=300)
    digests(proc, 2)
    lines = [line for line in proc.stderr.splitlines() if "no room for the node path" in line]
    assert len(lines) == 1 and "/dev/shm has" in lines[0] and "MPI_COLLECTIVES_NODE_PATH=0" in lines[0], explain(proc)


MESHES = os.path.join(PROGRAMS, "node_path_meshes.py")


@pytest.mark.version_dependent
def test_communicators_over_the_same_ranks_end_cleanly():
    """Two meshes over the same two ranks ([d0, d1] and [d1, d0]: two communicators, a window each),
    then a normal exit. jax 0.4's XLA frees its communicators at exit in a hash order of its own on
    each rank, and a free that waited for the window's ranks hung in up to half of such runs
    (issue 60): six launches, each must end."""
    for attempt in range(6):
        proc = mpirun(2, [sys.executable, MESHES, "orders", "2"], env=ON, timeout=120)
        assert proc.returncode == 0 and proc.stdout.count("EXACT rank") == 2, explain(proc)
        assert proc.stdout.count("DONE rank") == 2, explain(proc)
        # both meshes' windows (each rank says so; the two ranks' lines may interleave mid-line, so
        # a communicator counts once any rank's line about it survived whole to its colon)
        windows = set(re.findall(r"communicator (\d+): 2 ranks on one node: ", proc.stderr))
        assert len(windows) == 2, explain(proc)


@pytest.mark.skipif(not ONCE or os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="once (the mpich configuration), as root (a mount namespace with a small /dev/shm)")
def test_a_mesh_per_device_order_in_dockers_dev_shm_is_exact():
    """Docker's default /dev/shm (64 MiB), 4 ranks, a mesh per order of the devices (24
    communicators), 2 MiB psums: a rank died of SIGBUS where each window's room was looked at
    before the earlier windows had touched their pages (issue 60). Now each window's pages are
    touched when it is made, so the later ones see the room left, and say when there is none."""
    proc = run(["env", *[f"{k}={v}" for k, v in ON.items()], "unshare", "-m", "sh", "-c",
                'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$@"', "sh", mpiexec_path(), "-n", "4",
                sys.executable, MESHES, "orders", "24"], timeout=600)
    assert proc.returncode == 0 and proc.stdout.count("EXACT rank") == 4, explain(proc)
    assert "no room for the node path" in proc.stderr, explain(proc)


def test_a_rank_stalled_before_a_node_path_all_reduce_is_named():
    """Rank 1 sleeps before a 4 MiB psum that rank 0 waits in, in the node path's barrier: the
    report names the all-reduce as it does one waiting in the library, and the job finishes exact."""
    proc = mpirun(2, [sys.executable, os.path.join(PROGRAMS, "stall.py"), "8", "1048576"],
                  env={**ON, "MPI_COLLECTIVES_STALL_REPORT": "3"}, timeout=180)
    assert proc.returncode == 0 and proc.stdout.count("PASS stall rank") == 2, explain(proc)
    assert re.search(r"mpi-collectives: stall: rank 0/2 has waited \d+ s in all-reduce sum f32 x1048576 "
                     r"\(#\d+ on communicator \d+\); not arrived: rank 1 \(outside MPI", proc.stderr), explain(proc)
    assert "in away_from_the_collective" in proc.stderr, explain(proc)


def test_a_rank_killed_while_the_others_wait_in_the_node_path_is_named(monkeypatch):
    """failures.py's psums are 256 KiB, through the window with the path on: rank 1 killed
    while ranks 0 and 2 wait in the path's barrier ends the job soon, rank 1 named, nothing
    left behind (test_failures.py's bounds)."""
    import test_failures as failures
    for name, value in {**ON, "MPI_COLLECTIVES_NODE_PATH_COLLECTIVES": "all-reduce"}.items():
        monkeypatch.setenv(name, value)
    rc, out, err, seconds, alive = failures.launch_failing_job("kill")
    text = failures.check_ended(rc, out, err, seconds, alive)
    assert "all-reduce from 262144 bytes through a shared window" in err, text
    assert failures.named_dead_rank(1, out, err), text
    assert not [r for r in (0, 2) if failures.named_dead_rank(r, out, err)], text


def test_a_rank_stalled_before_a_node_path_all_to_all_is_named():
    """The same before a 4 MiB all-to-all, whose exchange rank 0 waits in: in the node path's message
    that the peer's piece is in its slot (XLA sends the all-to-all's parts as bytes)."""
    proc = mpirun(2, [sys.executable, os.path.join(PROGRAMS, "stall.py"), "8", "1048576", "all_to_all"],
                  env={**ON, "MPI_COLLECTIVES_STALL_REPORT": "3"}, timeout=180)
    assert proc.returncode == 0 and proc.stdout.count("PASS stall rank") == 2, explain(proc)
    assert re.search(r"mpi-collectives: stall: rank 0/2 has waited \d+ s in all-to-all \w+ x\d+ "
                     r"\(#\d+ on communicator \d+\); not arrived: rank 1 \(outside MPI", proc.stderr), explain(proc)


def test_the_default_leaves_intel_mpi_its_own_and_takes_the_others():
    proc = mpirun(2, [sys.executable, PROGRAM], env={"MPI_COLLECTIVES_VERBOSE": "2"}, timeout=300)
    digests(proc, 2)
    if "Intel(R) MPI" in mpi_library_name():
        assert "through a shared window" not in proc.stderr and "Intel MPI's own collectives" in proc.stderr, \
            explain(proc)
    else:  # all-reduce alone by default (MPI_COLLECTIVES_NODE_PATH_COLLECTIVES)
        assert "all-reduce from 262144 bytes through a shared window" in proc.stderr, explain(proc)


def mpi_library_name():
    from mpi_collectives.base import mpi
    return mpi.library_version() or ""


# Every collective the node path takes, at every size that carries data (MPI_COLLECTIVES_NODE_PATH_MIN=0:
# from a few bytes, so that pieces of one element per rank, uneven slices and every dtype go through it).
EVERY_SIZE = {"MPI_COLLECTIVES_NODE_PATH": "1", "MPI_COLLECTIVES_NODE_PATH_COLLECTIVES": EVERY,
              "MPI_COLLECTIVES_NODE_PATH_MIN": "0"}


def test_the_dtype_matrix_through_the_node_path_is_exact(jax_env):
    """tests/programs/collectives.py (every collective, seven dtypes, shard_map, pmap and jit over a global
    mesh, each result against NumPy) at 3 ranks with everything above the check's block in the window."""
    proc = mpirun(3, [sys.executable, os.path.join(PROGRAMS, "collectives.py")],
                  env={**jax_env, **EVERY_SIZE, "MPI_COLLECTIVES_VERBOSE": "2"}, timeout=600)
    assert proc.returncode == 0 and "ALL OK" in proc.stdout, explain(proc)
    assert f"{EVERY} from 0 bytes through a shared window" in proc.stderr, explain(proc)


@pytest.mark.skipif(not ONCE, reason="the path's code is the same on every family, whose arithmetic and handles "
                                      "the dtype matrix above checks: the soak runs once, in the mpich "
                                      "configuration (CI time)")
@extended  # (46 s; the fuzzer's seeds and the dtype matrix run in CI)
def test_the_soak_through_the_node_path_has_no_wrong_result(jax_env):
    """The random mixed soak (tests/programs/soak.py: integer sums that wrap, 8 dtypes, 11 sizes) at 3
    ranks, every small call through the one round and everything larger through the window, and the same
    with the check off (then every size is the window's or the library's)."""
    env = {k: v for k, v in jax_env.items() if k != "MPITRAMPOLINE_LIB"}  # the program calls initialize()
    for extra in ({}, {"MPI_COLLECTIVES_CHECK_COLLECTIVES": "0"}):
        proc = mpirun(3, [sys.executable, os.path.join(PROGRAMS, "soak.py"), "--impl", "mpi", "--count", "200"],
                      env={**env, **EVERY_SIZE, **extra}, timeout=600)
        lines = re.findall(r"SOAK rank (\d+)/\d+ impl mpi: (\d+) collectives, (\d+) wrong", proc.stdout)
        assert proc.returncode == 0 and sorted(int(r) for r, _, _ in lines) == [0, 1, 2], explain(proc)
        assert all(int(c) == 200 and int(w) == 0 for _, c, w in lines), (extra, explain(proc))

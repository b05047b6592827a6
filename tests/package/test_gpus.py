"""gpus.py: on a GPU node initialize() gives each rank its local rank's GPU(s), as JAX's own start
does, says in one sentence when the ranks must share them, and leaves the user's choice alone.
Tested without a GPU: the decision from local rank, GPU count and settings, and that the choice
reaches jax.distributed.initialize."""
import sys

import pytest

from helpers import HERE, ONCE, explain, mpiexec_path, run

from mpi_collectives.integration import gpus
from mpi_collectives.base.errors import InitializeError


@pytest.mark.parametrize("local_rank, local_size, count, ids, line", [
    (1, 4, 4, [1], "gpus: GPU 1 of 4 (local rank 1 of 4, as JAX's own start gives)"),
    (0, 1, 1, [0], "gpus: GPU 0 of 1 (local rank 0 of 1, as JAX's own start gives)"),
    (1, 2, 8, [4, 5, 6, 7], "gpus: GPUs 4-7 of 8 (local rank 1 of 2, as JAX's own start gives)"),
    (0, 4, 0, None, ""),
])
def test_each_rank_takes_its_local_ranks_share(local_rank, local_size, count, ids, line):
    assert gpus.choose(local_rank, local_size, count) == (ids, line)


@pytest.mark.parametrize("local_size, count", [(2, 1), (4, 6), (3, 2)])
def test_ranks_that_must_share_gpus_are_told_so(local_size, count):
    ids, line = gpus.choose(0, local_size, count)
    assert ids is None
    assert line == (f"gpus: not assigned: {local_size} ranks on this node and {count} GPU(s), which they do not "
                    "divide, so every rank sees every GPU and they share them. Fix: as many ranks per node as GPUs "
                    "(or a divisor), or choose with local_device_ids= / JAX_LOCAL_DEVICE_IDS")


@pytest.mark.parametrize("chosen, ids", [("2", [2]), ("0,3", [0, 3]), ([1, 2], [1, 2]), (5, [5])])
def test_the_users_choice_wins(chosen, ids):
    got, line = gpus.choose(0, 4, 4, chosen)
    assert got == ids and line == f"gpus: local_device_ids={','.join(map(str, ids))} (yours)"


@pytest.mark.parametrize("bad", ["gpu0", "0;1", "-1", ""])
def test_a_wrong_choice_is_one_sentence(bad):
    with pytest.raises(InitializeError, match=r"local_device_ids / JAX_LOCAL_DEVICE_IDS is .*, not a "
                                              r"comma-separated list of GPU numbers. Fix: "):
        gpus.choose(0, 2, 2, bad)


def test_gpus_are_counted_without_starting_cuda(tmp_path):
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia2"):
        (tmp_path / name).write_text("")
    pattern = str(tmp_path / "nvidia[0-9]*")
    count = lambda environ, plugin=True: gpus.visible_gpus(environ, pattern, plugin)  # noqa: E731
    assert count({}) == 3  # nvidia0-2, not the control devices
    assert count({"CUDA_VISIBLE_DEVICES": "1,2"}) == 2
    assert count({"CUDA_VISIBLE_DEVICES": ""}) == count({"CUDA_VISIBLE_DEVICES": "-1"}) == 0
    assert count({"JAX_PLATFORMS": "cpu"}) == 0 and count({"JAX_PLATFORMS": "cuda,cpu"}) == 3
    assert count({}, plugin=False) == 0  # jax without its CUDA plugin uses no GPU


# (jax.distributed.initialize wrapped to see its arguments: a CPU-only jax keeps no trace of them)
PROGRAM = ("import mpi_collectives, jax, sys; real = jax.distributed.initialize; seen = {}; "
           "jax.distributed.initialize = lambda **kw: (seen.update(kw), real(**kw))[1]; "
           "info = mpi_collectives.initialize(); line = [t for t in info.tunings if t.startswith('gpus')]; "
           "sys.stdout.write(f'RANK {info.rank} {line} {seen.get(\"local_device_ids\", \"none\")}' + chr(10))")


@pytest.mark.jax
@pytest.mark.version_dependent
def test_the_choice_reaches_jax_distributed_initialize():
    """JAX_LOCAL_DEVICE_IDS, JAX's own variable: initialize() passes it on as JAX's keyword;
    without it, on a node with no GPU, nothing is said or passed."""
    proc = run([mpiexec_path(), "-n", "2", sys.executable, "-c", PROGRAM],
               env={"JAX_LOCAL_DEVICE_IDS": "0", "JAX_PLATFORMS": "cpu"}, cwd=HERE)
    assert proc.returncode == 0, explain(proc)
    got = sorted(line for line in proc.stdout.splitlines() if line.startswith("RANK"))
    assert got == [f"RANK {r} ['gpus: local_device_ids=0 (yours)'] [0]" for r in range(2)], explain(proc)
    proc = run([mpiexec_path(), "-n", "2", sys.executable, "-c", PROGRAM],
               env={"JAX_LOCAL_DEVICE_IDS": None, "JAX_PLATFORMS": "cpu"}, cwd=HERE)
    assert proc.returncode == 0, explain(proc)
    got = sorted(line for line in proc.stdout.splitlines() if line.startswith("RANK"))
    assert got == [f"RANK {r} [] none" for r in range(2)], explain(proc)


GLOO = ("import os, mpi_collectives, jax, sys; os.environ.pop('MPITRAMPOLINE_LIB', None); "
        "jax.config.update('jax_cpu_collectives_implementation', 'gloo'); "
        "rank = int(os.environ.get('PMI_RANK') or os.environ['OMPI_COMM_WORLD_RANK']); "
        "size = int(os.environ.get('PMI_SIZE') or os.environ['OMPI_COMM_WORLD_SIZE']); "
        "jax.distributed.initialize(f\"127.0.0.1:{os.environ['MPI_COLLECTIVES_TEST_PORT']}\", size, rank); "
        "from mpi_collectives.base import mpi; n = jax.device_count(); "
        "sys.stdout.write(f'RANK {rank} devices {n} mpi {mpi.is_initialized()}' + chr(10))")


@pytest.mark.jax
@pytest.mark.skipif(not ONCE, reason="JAX's question and our cluster environment's answer do not depend on the "
                    "MPI family: runs once, in the mpich configuration")
def test_jax_asking_the_local_process_id_starts_nothing(jax_env):
    """JAX asks every cluster environment for the local process id whenever local_device_ids is
    unset, even of a program that passes its own coordinator, rank and size: ours answers only
    from a start-up it already ran, so that a gloo program with the package imported never starts
    MPI (the bench's gloo path once did)."""
    proc = run([mpiexec_path(), "-n", "2", sys.executable, "-c", GLOO],
               env={"MPI_COLLECTIVES_TEST_PORT": jax_env["MPI_COLLECTIVES_TEST_PORT"], "JAX_PLATFORMS": "cpu"},
               cwd=HERE)
    assert proc.returncode == 0, explain(proc)
    got = sorted(line for line in proc.stdout.splitlines() if line.startswith("RANK"))
    assert got == [f"RANK {r} devices 2 mpi False" for r in range(2)], explain(proc)

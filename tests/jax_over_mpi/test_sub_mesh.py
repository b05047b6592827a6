"""A collective over part of the mesh (tests/programs/sub_mesh.py): some processes run a program
with a collective, the others none of it. Over gloo every case runs, exact; over MPI none can
start (XLA's MPI_Comm_split of the world, and the device groups' exchange, need every process:
docs/devices.md, Limits), and the waiting ranks name the collective and the absent rank within
the stall report time, then end the job once the absent rank has finished its program. No result
ever reaches Python over MPI.

Over MPI, the one-device case (XLA's split) and a process's own devices (the device groups) run on
every family; the 2-D meshes and gloo's run once (the mpich configuration)."""
import os
import re
import sys
import time

import pytest

from helpers import ONCE, PROGRAMS, TEST_CONFIG, explain, free_port, mpirun
from mpi_collectives.integration.jax_compat import LOCAL_DEVICES_JAX, installed_jax, version_tuple

PROGRAM = os.path.join(PROGRAMS, "sub_mesh.py")
CASES = {"1d-1dev": (3, 1), "2d-1dev": (3, 1), "own-2dev": (2, 2), "2d-2dev": (3, 2)}  # processes, devices
EVERY_FAMILY = ("1d-1dev", "own-2dev")
SEVERAL = version_tuple(installed_jax()) >= LOCAL_DEVICES_JAX


def launch(backend, case, env=None):
    processes, devices = CASES[case]
    if devices > 1 and not SEVERAL:
        pytest.skip("several devices per process need jax 0.6 or newer")
    full = {"JAX_NUM_CPU_DEVICES": str(devices), "MPI_COLLECTIVES_TEST_PORT": str(free_port())}
    if backend == "gloo":
        full.update({"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None})
    full.update(env or {})
    start = time.monotonic()
    proc = mpirun(processes, [sys.executable, PROGRAM, backend, case], env=full, timeout=180)
    proc.seconds = time.monotonic() - start
    return proc


@pytest.mark.jax
@pytest.mark.skipif(not ONCE, reason="gloo's behaviour does not depend on the MPI family: the mpich configuration")
@pytest.mark.parametrize("case", list(CASES))
def test_over_gloo_every_case_runs_exact(case):
    proc = launch("gloo", case)
    members = [1] if case == "own-2dev" else [1, 2]
    assert proc.returncode == 0, explain(proc)
    assert sorted(re.findall(r"RESULT rank (\d)", proc.stdout)) == [str(r) for r in members], explain(proc)
    assert proc.stdout.count("DONE rank") == CASES[case][0] and "WRONG" not in proc.stdout, explain(proc)


@pytest.mark.jax
@pytest.mark.parametrize("case", list(CASES))
def test_over_mpi_the_waiting_ranks_name_it_and_the_job_ends(case):
    if case not in EVERY_FAMILY and not ONCE:
        pytest.skip("the 2-D cases wait where the 1-D ones do: once, in the mpich configuration")
    if case != "1d-1dev" and TEST_CONFIG == "standard":
        pytest.skip("the device groups' exchange is the package's, over MPICH's library as in the mpich configuration")
    proc = launch("mpi", case, {"MPI_COLLECTIVES_STALL_REPORT": "4", "MPI_COLLECTIVES_EXIT_TIMEOUT": "8"})
    assert proc.returncode != 0, explain(proc)
    assert "RESULT" not in proc.stdout and "WRONG" not in proc.stdout, "a result came back\n" + explain(proc)
    where = "device groups' exchange" if CASES[case][1] > 1 else "communicator creation"
    assert re.search(rf"stall: rank [12]/{CASES[case][0]} has waited \d+ s in {where}; not arrived: rank 0 "
                     r"\([^)]*\) \(if they do not run this program at all, a collective over part of the mesh, it "
                     r"can never start over MPI", proc.stderr), explain(proc)
    assert re.search(r"rank\(s\) 0 finished the program while rank [12] has waited \d+ s", proc.stderr), explain(proc)
    assert proc.seconds < 90, explain(proc)

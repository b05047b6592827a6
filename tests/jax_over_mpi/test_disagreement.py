"""Ranks that disagree about a collective (tests/programs/mismatch.py): no
value reaches Python, and the job ends non-zero with one line naming what
each rank called, on every MPI family. With the check turned off the wrong
numbers come back (so the check is what stops them), and gloo behaves as the
README says: it stops a size mismatch but returns wrong numbers for a dtype
mismatch, with exit 0."""
import os
import re
import sys

import pytest

from helpers import EXPECTED_FAMILY, ONCE, PROGRAMS, explain, free_port, mpirun

PROGRAM = os.path.join(PROGRAMS, "mismatch.py")
PY = sys.executable

# mode -> what the line must say (every MPI library)
CASES = {
    "shape": r"the ranks disagree about a collective: rank 0 all-reduce sum f32 x4; rank 1 all-reduce sum f32 x5",
    "carried": r"the ranks disagree about a collective: rank 0 all-reduce sum f32 x4; rank 1 all-reduce sum f32 x1000",
    "large": r"the ranks disagree about a collective: rank 0 all-reduce sum f32 x1000; rank 1 all-reduce sum f32 x1001",
    "dtype": r"the ranks disagree about a collective: rank 0 all-reduce sum f32 x4; rank 1 all-reduce sum s32 x4",
    "x64": (r"the ranks disagree about a collective: rank 0 all-reduce sum f32 x4; rank 1 all-reduce sum f64 x4\. "
            r".*or JAX's 64-bit mode on some ranks only: JAX_ENABLE_X64"),
    "op": r"the ranks disagree about a collective: rank 0 all-reduce sum f32 x4; rank 1 all-reduce max f32 x4",
    "kind": r"the ranks disagree about a collective: rank 0 all-reduce sum f32 x4; rank 1 all-gather f32 x4",
    "gather": r"the ranks disagree about a collective: rank 0 all-gather f32 x4; rank 1 all-gather f32 x5",
    "scatter": (r"the ranks disagree about a collective: "
                r"rank 0 reduce-scatter sum f32 x4; rank 1 reduce-scatter sum f32 x6"),
    # The larger side's receive is truncated (the MPI library's own words);
    # the smaller side receives less than it expected (ours).
    "permute": (r"(a collective permute expected 20 bytes from rank 0 of XLA's communicator but received 16"
                r"|rank 0: MPI_Wait failed in a collective XLA runs: .*truncat)"),
    "alltoall": (r"(an all-to-all expected 12 bytes from rank 0 of XLA's communicator but received 8"
                 r"|rank 0: MPI_Sendrecv failed in a collective XLA runs: .*truncat)"),
}
# The standard ABI is MPICH underneath: two cases there keep CI short.
RUN_HERE = list(CASES) if EXPECTED_FAMILY != "standard" else ["shape", "permute"]


def launch(mode, *args, env=None):
    return mpirun(2, [PY, PROGRAM, mode, *args], env=env, timeout=120)


@pytest.mark.jax
@pytest.mark.parametrize("mode", RUN_HERE)
def test_disagreeing_ranks_stop_with_one_line(mode):
    proc = launch(mode)
    text = explain(proc)
    assert proc.returncode != 0, text
    assert "RESULT" not in proc.stdout, "a value reached Python\n" + text
    ours = [line for line in proc.stderr.splitlines() if line.startswith("mpi-collectives: error:")]
    assert ours, text
    assert any(re.search(CASES[mode], line, re.I) for line in ours), text
    # Named as what it is, never as a killed rank.
    assert "killed" not in " ".join(ours), text


@pytest.mark.jax
def test_ranks_that_agree_are_exact_with_the_check_on():
    proc = launch("agree")
    assert proc.returncode == 0, explain(proc)
    assert sorted(re.findall(r"AGREE rank (\d)", proc.stdout)) == ["0", "1"], explain(proc)


@pytest.mark.jax
@pytest.mark.skipif(not ONCE, reason="the same on every family; once is enough (the mpich configuration)")
def test_without_the_check_the_wrong_numbers_come_back():
    proc = launch("dtype", env={"MPI_COLLECTIVES_CHECK_COLLECTIVES": "0"})
    text = explain(proc)
    assert proc.returncode == 0, text
    # float32 bits summed as int32 on one rank, and the other way round on the other.
    assert "RESULT rank 1: [1065353216" in proc.stdout, text


@pytest.mark.jax
@pytest.mark.skipif(not ONCE, reason="gloo does not depend on the MPI family (run in the mpich configuration)")
def test_gloo_stops_a_size_mismatch_but_not_a_dtype_mismatch():
    env = {"MPI_COLLECTIVES_TEST_PORT": str(free_port()), "MPITRAMPOLINE_LIB": None,
           "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}
    shape = launch("shape", "gloo", env=env)
    assert shape.returncode != 0, explain(shape)
    assert "collective mismatch" in shape.stderr, explain(shape)
    env["MPI_COLLECTIVES_TEST_PORT"] = str(free_port())
    dtype = launch("dtype", "gloo", env=env)
    assert dtype.returncode == 0, explain(dtype)
    assert "RESULT rank 1: [1065353216" in dtype.stdout, explain(dtype)

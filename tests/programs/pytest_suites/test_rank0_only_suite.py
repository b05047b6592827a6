"""Issue 72: tests for rank 0 alone, as mpi4py and pytest-mpi suites write them
(`skipif(rank > 0)`: a file rank 0 writes, a result only rank 0 holds). One process, rank 0, would
run each and report it passed (or failed); the ranks that skip it in setup leave it to rank 0. A
test skipped on a rank in its call (pytest.skip inside) is still skipped (the issue suite's test_6).
One process would report: test_a passed, test_b failed, test_c passed, test_d skipped, test_e passed."""
import jax
import pytest

from common import expected, psum_of

RANK = jax.process_index()


def test_a_psum():
    assert psum_of(1.0) == expected(1.0)


@pytest.mark.skipif(RANK > 0, reason="rank 0 alone")
def test_b_rank0_only_fails():
    assert RANK == 1, "rank 0's own failure"


@pytest.mark.skipif(RANK > 0, reason="rank 0 alone")
def test_c_rank0_only_passes():
    assert RANK == 0


@pytest.mark.skipif(RANK == 0, reason="the other ranks alone")
def test_d_on_the_other_ranks_alone():
    assert RANK > 0


@pytest.mark.skipif(RANK > 0, reason="rank 0 alone")
def test_e_rank0_only_calls_a_collective_the_others_skipped():
    assert psum_of(4.0) == expected(4.0)  # given up: the others never call it (skipped, as test_6 of the issue suite)


def test_f_psum_after():
    assert psum_of(5.0) == expected(5.0)

"""Issue 72: a suite that imports JAX late. The plugin starts MPI before the conftests and JAX at the
suite's first `import jax`, here inside test_3 on every rank, so that tests before it pay nothing
for JAX. One process would report: test_1 passed, test_2 failed (rank 1's own failure), test_3
passed, test_4 passed; the psums are exact, and rank 1's failure before JAX started changes nothing
after it."""
import sys

import pytest


def test_1_no_jax_yet(mpi_rank, mpi_size):
    assert "jax" not in sys.modules and "jaxlib" not in sys.modules
    assert 0 <= mpi_rank < mpi_size


def test_2_rank1_fails_before_jax(mpi_rank):
    assert mpi_rank != 1, "rank 1's own failure, before JAX started"


def test_3_jax_starts_in_this_test(mpi_rank, mpi_size):
    import jax

    from common import expected, psum_of

    assert (jax.process_index(), jax.process_count()) == (mpi_rank, mpi_size)
    assert psum_of(2.0) == expected(2.0)


@pytest.mark.parametrize("value", [1.0, 3.0])
def test_4_psums_after(value):
    from common import expected, psum_of

    assert psum_of(value) == expected(value)

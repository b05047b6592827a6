"""A wait no rank can give up: rank 0 leaves before a ppermute its peers wait in (point to point).
The job ends within seconds, naming the test; the report of the tests already run is kept."""
import jax

from common import expected, ppermute_of, psum_of


def test_before_passes():
    assert psum_of(1.0) == expected(1.0)


def test_before_fails():
    assert jax.process_index() != 0, "rank 0 fails"
    assert psum_of(2.0) == expected(2.0)


def test_rank0_leaves_before_a_ppermute():
    assert jax.process_index() != 0, "rank 0 leaves before the ppermute"
    ppermute_of(1.0)


def test_never_runs():
    pass

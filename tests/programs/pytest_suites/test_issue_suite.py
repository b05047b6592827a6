"""The suite of issue 64: eight tests of one or two psums, some failing on one rank only.
Outcomes one process would report: 1 passed, 2 failed, 3 passed, 4 failed, 5 failed, 6 skipped,
7 passed, 8 failed; never a wrong number in 3 or 7."""
import jax
import pytest

from common import expected, last_rank, psum_of


def test_1_passes():
    assert psum_of(1.0) == expected(1.0)


def test_2_rank0_fails_before_its_psum():
    assert jax.process_index() != 0, "rank 0 fails before its psum"
    assert psum_of(2.0) == expected(2.0)


def test_3_same_shape_as_2_passes():
    assert psum_of(3.0) == expected(3.0)


def test_4_last_rank_raises_before_a_psum_of_another_shape():
    if last_rank():
        raise RuntimeError("the last rank raises before a psum of another shape")
    assert psum_of(4.0, n=8) == expected(4.0)


def test_5_rank0_fails_after_the_psums():
    first, second = psum_of(5.0), psum_of(5.5)
    assert jax.process_index() != 0, f"rank 0 fails after its psums ({first}, {second})"


def test_6_skipped_on_rank1_only():
    if jax.process_index() == 1:
        pytest.skip("rank 1 skips")
    assert psum_of(6.0) == expected(6.0)


def test_7_passes():
    assert psum_of(7.0) == expected(7.0)


def test_8_rank0_fails_before_the_last_psum():
    assert jax.process_index() != 0, "rank 0 fails before the suite's last psum"
    assert psum_of(8.0) == expected(8.0)

"""Runs after its conftest called jax.distributed.initialize() itself."""
import jax

from common import expected, psum_of


def test_joined():
    assert jax.process_count() > 1
    assert psum_of(1.0) == expected(1.0)


def test_rank0_fails():
    assert jax.process_index() != 0
    assert psum_of(2.0) == expected(2.0)


def test_after():
    assert psum_of(3.0) == expected(3.0)

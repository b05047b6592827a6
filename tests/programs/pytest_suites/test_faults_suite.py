"""Failures of other kinds on one rank. Outcomes one process would report: first failed, fixture
error, raises failed, sys_exit failed, fixtures passed, min_size skipped, xfail xfailed,
after passed; a rank that waits past --mpi-timeout: failed (only with --mpi-timeout)."""
import os
import sys
import time

import jax
import pytest

from common import expected, last_rank, psum_of


def test_first_fails_on_rank0_before_the_first_psum():
    assert jax.process_index() != 0
    assert psum_of(1.0) == expected(1.0)


@pytest.fixture
def fails_on_last_rank():
    if last_rank():
        raise ValueError("the fixture fails on the last rank")
    return 1


def test_fixture_error(fails_on_last_rank):
    assert psum_of(2.0) == expected(2.0)


def test_raises_catches_on_rank0_only():
    with pytest.raises(ZeroDivisionError):
        if jax.process_index() == 0:
            1 / 0
    assert psum_of(3.0) == expected(3.0)


def test_sys_exit_on_last_rank():
    if last_rank():
        sys.exit(3)
    assert psum_of(4.0) == expected(4.0)


def test_fixtures(mpi_rank, mpi_size, mpi_mesh, mpi_shared_path):
    assert (mpi_rank, mpi_size) == (jax.process_index(), jax.process_count())
    assert mpi_mesh.devices.size == jax.device_count()
    (mpi_shared_path / f"rank-{mpi_rank}").write_text(str(mpi_rank))
    assert psum_of(5.0) == expected(5.0)
    assert sorted(p.name for p in mpi_shared_path.iterdir()) == [f"rank-{r}" for r in range(mpi_size)]


@pytest.mark.mpi(min_size=64)
def test_needs_64_ranks():
    assert psum_of(6.0) == expected(6.0)


@pytest.mark.xfail(reason="known to fail everywhere", strict=True)
def test_xfail():
    assert psum_of(7.0) == expected(7.0) + 1


@pytest.mark.skipif(not os.environ.get("SUITE_TIMEOUT"), reason="run with --mpi-timeout")
def test_last_rank_sleeps_past_the_timeout():
    if last_rank():
        time.sleep(60)
    assert psum_of(8.0) == expected(8.0)


def test_after_passes():
    assert psum_of(9.0) == expected(9.0)

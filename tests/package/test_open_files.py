"""open_files.make_room (mpi_collectives/services/open_files.py): the soft limit of open files raised
to the hard one on every rank, and on rank 0, JAX's coordinator's, one sentence that ends the job
where even the hard limit cannot hold a connection a rank, with the numbers and the fix."""
import pytest

from mpi_collectives.services import open_files


class Limits:
    """resource's getrlimit/setrlimit for RLIMIT_NOFILE, on numbers of the test's own."""

    def __init__(self, monkeypatch, soft, hard, opened=40, refuse=False):
        self.soft, self.hard, self.refuse = soft, hard, refuse
        monkeypatch.setattr(open_files.resource, "getrlimit", lambda which: (self.soft, self.hard))
        monkeypatch.setattr(open_files.resource, "setrlimit", self.set)
        monkeypatch.setattr(open_files, "open_now", lambda: opened)

    def set(self, which, limits):
        if self.refuse:
            raise ValueError("not allowed")
        self.soft, self.hard = limits


def test_the_soft_limit_is_raised_to_the_hard_one_on_every_rank(monkeypatch):
    limits = Limits(monkeypatch, 1024, 65536)
    line, warning, error = open_files.make_room(5, 4096)
    assert (limits.soft, limits.hard) == (65536, 65536)
    assert line == "open files: soft limit 1024 raised to 65536 (the hard limit)"
    assert (warning, error) == ("", "")


def test_rank_0_under_a_hard_limit_below_one_connection_a_rank_ends_the_job_with_the_fix(monkeypatch):
    Limits(monkeypatch, 1024, 1024, opened=40)
    line, warning, error = open_files.make_room(0, 4096)
    assert line == "" and warning == ""
    assert error.startswith("rank 0 hosts JAX's coordinator, which holds a connection to each of the 4096 ranks")
    assert "may open only 1024 files" in error and "ulimit -n 12360" in error  # 40 open + 32 of JAX + 3 x 4096
    assert open_files.make_room(1, 4096)[2] == ""  # the other ranks hold no connection a rank


def test_rank_0_between_one_and_three_a_rank_is_warned_not_ended(monkeypatch):
    Limits(monkeypatch, 4096, 4096, opened=40)
    line, warning, error = open_files.make_room(0, 2000)
    assert error == ""
    assert warning.startswith("rank 0 may open 4096 files, and 2000 ranks need about 6072 there")


def test_a_limit_that_cannot_be_raised_is_said_and_still_checked(monkeypatch):
    Limits(monkeypatch, 256, 4096, refuse=True)
    line, warning, error = open_files.make_room(0, 512)
    assert line == "open files: the soft limit 256 could not be raised to 4096: not allowed"
    assert "may open only 256 files" in error


@pytest.mark.parametrize("soft,hard", [(1024, None), (None, None)])
def test_unlimited_limits(monkeypatch, soft, hard):
    inf = open_files.resource.RLIM_INFINITY
    limits = Limits(monkeypatch, inf if soft is None else soft, inf)
    line, warning, error = open_files.make_room(0, 100000)
    if soft is None:
        assert (line, warning, error) == ("", "", "")
    else:
        assert limits.soft == 1 << 20 and error == ""  # Linux's nr_open, not "unlimited", which it refuses

"""Lists of ranks at scale (issue 82): the stall report's line at 64 ranks, one readable line."""
from mpi_collectives.base.rank_ranges import ranges, ranks_text, span


def test_ranges():
    assert ranges([]) == ""
    assert ranges([3]) == "3"
    assert ranges([0, 1, 2, 3, 5, 7, 8, 9, 9]) == "0-3, 5, 7-9"
    assert ranges([4, 1, 2]) == "1, 2, 4"
    assert ranges(list(range(1, 64))) == "1-63"
    assert ranks_text([17]) == "rank 17" and ranks_text(list(range(1, 17)) + list(range(18, 64))) == "ranks 1-16, 18-63"
    assert span([5.2, 6.9, 5.0]) == "5-7 s" and span([12.2, 11.8]) == "12 s"


def test_the_stall_line_at_64_ranks_is_one_readable_line():
    """Rank 0 waits in a collective; ranks 1-16 and 18-63 compute (outside MPI), rank 17 has published
    nothing yet: it listed sixteen ranks one by one and "and 47 more", hiding rank 17."""
    from mpi_collectives.services.stall import State, _missing_text
    now = 1000.0
    states = {r: State(False, now - 12 - (r % 3) * 0.4) for r in range(1, 64) if r != 17}
    missing = list(range(1, 64))
    text = _missing_text(missing, states, now)
    assert text == "ranks 1-16, 18-63 (outside MPI for 12-13 s); rank 17 (busy, or not yet seen)", text
    assert len(text) < 120

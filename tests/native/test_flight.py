"""The flight record's tickets (native/src/services/flight.c), compiled here with a
small harness, without MPI: ending a collective whose ring slot 32 newer collectives
have taken since stamps nothing (a slot number would stamp the newest entry finished,
and the stall report would then pass over the collective a rank really waits in)."""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "native", "src")


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("flight") / "flight_harness")
    includes = [f"-I{os.path.join(SRC, d)}" for d in ("base", "services")] + [f"-I{os.path.join(ROOT, 'native', 'generated')}"]
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", *includes, "-o", exe,
                    os.path.join(ROOT, "tests", "programs", "flight_harness.c"),
                    os.path.join(SRC, "services", "flight.c"), os.path.join(SRC, "base", "terminal.c")],
                   check=True, capture_output=True, text=True)
    out = subprocess.run([exe], check=True, capture_output=True, text=True, timeout=30).stdout
    return dict(re.findall(r"== ([^\n]+)\n((?:  #[^\n]*\n)*)", out)), out


def entries(text):
    return {int(n): ("not finished" not in rest) for n, rest in re.findall(r"#(\d+) call x\d+ [^:]*: ([^\n]*)", text)}


def test_a_late_end_stamps_no_newer_entry(record):
    cases, out = record
    late = entries(cases["late end"])
    assert sorted(late) == list(range(2, 34)), out  # the ring's last 32
    assert not any(late.values()), out  # #1's end found its slot taken by #33: nothing stamped


def test_an_entry_ends_by_its_own_ticket(record):
    cases, out = record
    own = entries(cases["own end"])
    assert [n for n, done in own.items() if done] == [33], out
    assert re.search(r"#33 call x33 on communicator 1 \(its #33\): \d+\.\d{3} ms", cases["own end"]), out


def test_the_current_collective_is_the_newest_unfinished(record):
    _, out = record
    assert "== current 1 x32" in out, out

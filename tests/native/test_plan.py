"""The devices' plan (native/src/services/devices/plan.c, steps 2 and 3 of an
event) is pure: compiled here with its one dependency, split_plan.c, and run
on the entries every process would exchange, without MPI. The answers are
worked out by hand from the design in devices.h."""
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "native", "src", "services")


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("plan") / "plan_harness")
    subprocess.run(["cc", "-O1", "-Wall", "-Werror", "-I", os.path.join(SRC, "devices"), "-I", SRC, "-o", exe,
                    os.path.join(ROOT, "tests", "programs", "plan_harness.c"),
                    os.path.join(SRC, "devices", "plan.c"), os.path.join(SRC, "split_plan.c")],
                   check=True, capture_output=True, text=True)
    return exe


def plan(harness, size, L, me, entries):
    args = [str(v) for entry in entries for v in entry]
    out = subprocess.run([harness, str(size), str(L), str(me)] + args, check=True, capture_output=True,
                         text=True, timeout=30).stdout.splitlines()
    if out[0].startswith("wrong: "):
        return out[0][len("wrong: "):]
    _, ng, _, rounds = out[0].split()
    return int(rounds), [tuple(map(int, line.split())) for line in out[1:1 + int(ng)]]


def test_one_group_of_all_devices(harness):
    # 2 processes x 2 devices, one psum over all four: keys 0..3, one split of both processes.
    entries = [(0, 0, 0), (0, 1, 0), (0, 2, 1), (0, 3, 1)]
    assert plan(harness, 2, 2, 0, entries) == (1, [(0, 4, 2, 0, 2)])


def test_groups_across_processes_need_a_round_each(harness):
    # A mesh axis over processes: {p0d0, p1d0} and {p0d1, p1d1}. Both groups hold
    # both processes, so they cannot share a split: two rounds.
    entries = [(0, 0, 0), (0, 1, 1), (1, 0, 0), (1, 1, 1)]
    assert plan(harness, 2, 2, 1, entries) == (2, [(0, 2, 2, 0, 1), (1, 2, 2, 1, 1)])


def test_groups_inside_one_process_need_no_split(harness):
    entries = [(0, 0, 0), (0, 1, 0), (2048, 0, 1), (2048, 1, 1)]
    assert plan(harness, 2, 2, 0, entries) == (0, [(0, 2, 1, -1, 2), (2048, 2, 1, -1, 0)])


def test_disjoint_process_pairs_share_a_round(harness):
    # 4 processes x 1 device in groups {0,1} and {2,3}: one round serves both.
    entries = [(0, 0, 0), (0, 1, 1), (2, 0, 2), (2, 1, 3)]
    assert plan(harness, 4, 1, 3, entries) == (1, [(0, 2, 2, 0, 0), (2, 2, 2, 0, 1)])


def test_entries_in_any_order_give_the_same_plan(harness):
    entries = [(1, 1, 1), (0, 1, 1), (1, 0, 0), (0, 0, 0)]
    assert plan(harness, 2, 2, 0, entries) == (2, [(0, 2, 2, 0, 1), (1, 2, 2, 1, 1)])


def test_keys_that_are_not_one_group_are_wrong(harness):
    entries = [(0, 0, 0), (0, 2, 0), (0, 2, 1), (0, 3, 1)]
    assert plan(harness, 2, 2, 0, entries) == "the 4 devices with color 0 have keys that are not 0..3"


def test_groups_of_two_sizes_are_wrong(harness):
    # Splits of two collectives in one event (a process running programs in another order).
    entries = [(0, 0, 0), (0, 1, 0), (0, 2, 1), (0, 3, 1), (9, 0, 1), (9, 1, 1)]
    assert plan(harness, 2, 2, 0, entries) == "groups of 4 and of 2 devices in one collective"


def test_a_process_with_splits_missing_is_wrong(harness):
    # Process 1 made no split (its devices' groups repeat an earlier collective's).
    entries = [(0, 0, 0), (0, 1, 0)]
    assert plan(harness, 2, 2, 0, entries) == "2 device splits where 2 processes with 2 devices each make 4"

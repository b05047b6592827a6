"""The check's block reduction (native/src/services/check_block.c) is pure:
compiled here with a small harness and run on two blocks, without MPI.

It is what a small collective's data go through instead of the library's own
reduction, so every answer is compared with NumPy's, and with the operands
swapped: the library applies it in an order that differs between ranks, so
both orders must give the same bits."""
import os
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "native", "src", "services")
PAYLOAD = 1024  # MPIC_BLOCK_PAYLOAD
REDUCE, PLACE = 1, 2  # MPIC_CARRY_
KINDS = {"all-reduce": 1, "all-gather": 2}
OPS = {"sum": 1, "prod": 2, "max": 3, "min": 4}
TYPES = {np.float32: 1, np.float64: 2, np.int8: 3, np.int16: 4, np.int32: 5, np.int64: 6,
         np.uint8: 7, np.uint16: 8, np.uint32: 9, np.uint64: 10}


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("block") / "check_block_harness")
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-I", SRC, "-o", exe,
                    os.path.join(ROOT, "tests", "programs", "check_block_harness.c"),
                    os.path.join(SRC, "check_block.c"), "-lm"], check=True, capture_output=True, text=True)
    return exe


def signature(kind, op, dtype, count):
    return KINDS[kind] << 56 | (OPS[op] if op else 0) << 48 | TYPES[dtype] << 40 | count


def combine(harness, a, b, small=False):
    """a and b: (signature, carry, payload bytes). Returns (agreed, payload bytes). small: the small
    block's reduction (MPIC_BLOCK_SMALL_PAYLOAD bytes of data)."""
    args = [x for sig, carry, data in (a, b) for x in (str(sig), str(carry), data.hex())]
    env = dict(os.environ, CHECK_BLOCK_SMALL="1" if small else "0")
    out = subprocess.run([harness] + args, check=True, capture_output=True, text=True, timeout=30,
                         env=env).stdout.split()
    return out[1] == "1", bytes.fromhex(out[3])


def reduce_both_ways(harness, op, x, y):
    sig = signature("all-reduce", op, x.dtype.type, x.size)
    one = combine(harness, (sig, REDUCE, x.tobytes()), (sig, REDUCE, y.tobytes()))
    other = combine(harness, (sig, REDUCE, y.tobytes()), (sig, REDUCE, x.tobytes()))
    assert one == other, f"{op} of {x} and {y} depends on the order"
    assert one[0]
    return np.frombuffer(one[1][:x.nbytes], x.dtype)


@pytest.mark.parametrize("dtype", list(TYPES), ids=lambda t: t.__name__)
@pytest.mark.parametrize("op", list(OPS))
def test_every_type_and_reduction_is_numpys(harness, dtype, op):
    rng = np.random.default_rng(7)
    n = PAYLOAD // np.dtype(dtype).itemsize
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        y = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    else:
        x = (rng.standard_normal(n) * 1e3).astype(dtype)
        y = (rng.standard_normal(n) * 1e3).astype(dtype)
    with np.errstate(over="ignore"):
        want = {"sum": x + y, "prod": x * y, "max": np.maximum(x, y), "min": np.minimum(x, y)}[op]
    assert reduce_both_ways(harness, op, x, y).tobytes() == want.tobytes()


def test_integer_sums_wrap(harness):
    got = reduce_both_ways(harness, "sum", np.array([127, -128], np.int8), np.array([1, -1], np.int8))
    assert got.tolist() == [-128, 127]


@pytest.mark.parametrize("op", ["max", "min"])
def test_nan_wins_and_zeros_are_ordered_whatever_the_order(harness, op):
    x = np.array([np.nan, 1.0, -0.0, 0.0, np.nan], np.float32)
    y = np.array([2.0, np.nan, 0.0, -0.0, -np.nan], np.float32)
    got = reduce_both_ways(harness, op, x, y)
    assert np.isnan(got[:2]).all() and np.isnan(got[4])
    assert np.signbit(got[2:4]).tolist() == ([False, False] if op == "max" else [True, True])


def test_a_gather_joins_the_places(harness):
    sig = signature("all-gather", None, np.int32, 2)
    left = np.array([1, 2, 0, 0], np.int32).tobytes()
    right = np.array([0, 0, 3, 4], np.int32).tobytes()
    agreed, data = combine(harness, (sig, PLACE, left), (sig, PLACE, right))
    assert agreed and np.frombuffer(data[:16], np.int32).tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("other", ["count", "carry"])
def test_blocks_that_disagree_never_mix_their_data(harness, other):
    x = np.array([1, 2, 3, 4], np.float32)
    sig = signature("all-reduce", "sum", np.float32, 4)
    theirs = (sig + 1, REDUCE) if other == "count" else (sig, PLACE)
    agreed, data = combine(harness, (theirs[0], theirs[1], x.tobytes()), (sig, REDUCE, x.tobytes()))
    assert not agreed
    assert np.frombuffer(data[:16], np.float32).tolist() == [1, 2, 3, 4]  # untouched
    # The same in the other order.
    bad = combine(harness, (sig, REDUCE, x.tobytes()), (theirs[0], theirs[1], x.tobytes()))
    assert not bad[0]


def test_the_same_call_in_two_phases_never_mixes(harness):
    """A collective of one phase of the program (a test of a pytest suite) meeting the same
    collective of another: a wrong number without the phase in the block (3 + 2 = 5 where each
    test wants its own), told apart with it; the same phase reduces as before."""
    x, y = np.array([3, 3, 3, 3], np.float32), np.array([2, 2, 2, 2], np.float32)
    sig = signature("all-reduce", "sum", np.float32, 4)
    agreed, data = combine(harness, (sig, f"{REDUCE}@3", x.tobytes()), (sig, f"{REDUCE}@2", y.tobytes()))
    assert not agreed and np.frombuffer(data[:16], np.float32).tolist() == [2, 2, 2, 2]
    agreed, data = combine(harness, (sig, f"{REDUCE}@3", x.tobytes()), (sig, f"{REDUCE}@3", y.tobytes()))
    assert agreed and np.frombuffer(data[:16], np.float32).tolist() == [5, 5, 5, 5]


SMALL = 64  # MPIC_BLOCK_SMALL_PAYLOAD


def test_the_small_block_reduces_what_fits(harness):
    """The small block (agreement.c uses it once a communicator's calls carried at most 64 bytes
    for a while): the same reduction on its 64 bytes; a call whose data would not fit is never
    reduced in it (its signature says more than 64 bytes: the data move in their own call)."""
    x, y = np.arange(16, dtype=np.float32), np.arange(16, dtype=np.float32) * 3
    sig = signature("all-reduce", "sum", np.float32, 16)
    agreed, data = combine(harness, (sig, REDUCE, x.tobytes()), (sig, REDUCE, y.tobytes()), small=True)
    assert agreed and len(data) == SMALL and np.array_equal(np.frombuffer(data, np.float32), x + y)
    big = signature("all-reduce", "sum", np.float32, 17)  # 68 bytes: more than the small block holds
    x17 = np.arange(17, dtype=np.float32)
    agreed, data = combine(harness, (big, REDUCE, x17.tobytes()), (big, REDUCE, x17.tobytes()), small=True)
    assert agreed and np.array_equal(np.frombuffer(data, np.float32), x17[:16])  # untouched

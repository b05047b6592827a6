"""Our host helpers against jax.experimental.multihost_utils, same inputs, same answers."""
import time

import numpy as np

import mpi_collectives

info = mpi_collectives.initialize()
import jax  # noqa: E402
from jax.experimental import multihost_utils as mhu  # noqa: E402

from mpi_collectives.integration.jax_compat import version_tuple  # noqa: E402

rank, size = info.rank, info.size
tree = {"w": np.arange(6, dtype=np.float32).reshape(2, 3) + rank, "step": np.int32(10 * rank),
        "flags": np.array([rank % 2 == 0, True])}


# Before jax 0.4.31 multihost_utils' broadcast returned bool and 8- and 16-bit
# integer leaves widened to int32; ours keep the dtype they were given, as
# multihost_utils does since.
OLD_JAX_BOOL = version_tuple(jax.__version__) < (0, 4, 31)


def same(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)

    def same_dtype(x, y):
        narrow = x.dtype == bool or (x.dtype.kind in "iu" and x.dtype.itemsize < 4)
        return x.dtype == y.dtype or (OLD_JAX_BOOL and narrow and y.dtype == np.int32)
    return len(la) == len(lb) and all(np.array_equal(np.asarray(x), np.asarray(y)) and
                                     same_dtype(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb))


checks = {
    "broadcast_one_to_all": (mpi_collectives.broadcast_one_to_all(tree), mhu.broadcast_one_to_all(tree)),
    "broadcast_from_last": (mpi_collectives.broadcast_one_to_all(tree, is_source=rank == size - 1),
                            mhu.broadcast_one_to_all(tree, is_source=rank == size - 1)),
    "process_allgather": (mpi_collectives.process_allgather(tree), mhu.process_allgather(tree)),
    "process_allgather_tiled": (mpi_collectives.process_allgather(tree, tiled=True),
                                mhu.process_allgather(tree, tiled=True)),
}
# Past one slot of packed bytes (256), a tree travels in a second call after its signature.
big = {"w": np.arange(1000, dtype=np.float32) * (rank + 1), "tag": np.int8(rank), "m": np.ones((7, 3), np.int16)}
checks["broadcast_large"] = (mpi_collectives.broadcast_one_to_all(big), mhu.broadcast_one_to_all(big))
checks["process_allgather_large"] = (mpi_collectives.process_allgather(big), mhu.process_allgather(big))
for name, (ours, theirs) in checks.items():
    assert same(ours, theirs), f"{name}: ours {ours} theirs {theirs}"
    print(f"ok {name}", flush=True)

expected_sum = sum(np.arange(6, dtype=np.float32).reshape(2, 3) + r for r in range(size))
assert np.array_equal(mpi_collectives.allreduce(tree["w"]), expected_sum)
assert mpi_collectives.allreduce(np.int32(rank), "max") == size - 1
mpi_collectives.assert_equal({"same": np.arange(3)}, "equal trees")
try:
    mpi_collectives.assert_equal({"x": np.array([rank])}, "differing trees")
    raise SystemExit("assert_equal did not raise")
except AssertionError as e:
    assert "differing trees" in str(e) and "rank(s) [1" in str(e), str(e)
mpi_collectives.sync_global_devices("here")
mpi_collectives.barrier()
try:
    mpi_collectives.process_allgather(np.zeros(rank + 1))
    raise SystemExit("mismatched shapes were not noticed")
except ValueError as e:
    assert "differ" in str(e), str(e)
try:  # one rank's tree fits a slot, the others' do not: still a ValueError, not MPI's truncation error
    mpi_collectives.process_allgather(np.zeros(4 if rank == 0 else 100))
    raise SystemExit("mismatched sizes across the slot were not noticed")
except ValueError as e:
    assert "rank(s) [1" in str(e), str(e)
mpi_collectives.assert_equal({"same": np.arange(1000.0)}, "equal large trees")
if size > 1:
    try:
        mpi_collectives.assert_equal({"x": np.arange(500) * (rank == size - 1)}, "differing large trees")
        raise SystemExit("assert_equal on large trees did not raise")
    except AssertionError as e:
        assert f"rank(s) [{size - 1}]" in str(e), str(e)
print("ok allreduce assert_equal sync barrier mismatch", flush=True)

# Timing: a small pytree, medians of many calls, ours against multihost_utils.
def median_time(fn, n=30):
    fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


for name, ours, theirs in [("broadcast_one_to_all", lambda: mpi_collectives.broadcast_one_to_all(tree),
                            lambda: mhu.broadcast_one_to_all(tree)),
                           ("process_allgather", lambda: mpi_collectives.process_allgather(tree),
                            lambda: mhu.process_allgather(tree))]:
    t_ours, t_theirs = median_time(ours), median_time(theirs)
    if rank == 0:
        print(f"time {name}: ours {t_ours * 1e6:.1f} us, multihost_utils {t_theirs * 1e6:.1f} us, "
              f"ratio {t_theirs / t_ours:.0f}x", flush=True)
print(f"PASS host helpers rank {rank}", flush=True)

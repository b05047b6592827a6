"""Checks of the wrapper's policies; run as `python policy.py CASE` (under mpiexec or not).

Prints "PASS <case>" and exits 0, or exits non-zero with the reason.
"""
import ctypes
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
import mpiabi  # noqa: E402

case = sys.argv[1]

if case == "thread-level":
    # XLA asks for FUNNELED; the wrapper asks MPI for MULTIPLE unless told otherwise.
    lib = mpiabi.load()
    want = sys.argv[2]
    provided = mpiabi.init_thread(lib, mpiabi.const_int(lib, "THREAD_FUNNELED"))
    assert provided == mpiabi.const_int(lib, want), (provided, want)
    flag = ctypes.c_int(-1)
    mpiabi.check(lib.MPIABI_Is_thread_main(ctypes.byref(flag)), "MPI_Is_thread_main")
    assert flag.value == 1
    mpiabi.check(lib.MPIABI_Finalize(), "MPI_Finalize")
    fin = ctypes.c_int(0)
    lib.MPIABI_Finalized(ctypes.byref(fin))
    assert fin.value == 1, "MPI_Finalize did not finalize what the wrapper initialized"

elif case == "mpi4py-first":
    # mpi4py initialized MPI: the wrapper must not initialize or finalize it.
    from mpi4py import MPI
    lib = mpiabi.load()
    provided = mpiabi.init_thread(lib, mpiabi.const_int(lib, "THREAD_FUNNELED"))
    assert provided == MPI.Query_thread(), (provided, MPI.Query_thread())
    from mpi_collectives._mpiabi import lib as native
    assert native.mpic_we_initialized() == 0
    world = mpiabi.const_handle(lib, "COMM_WORLD")
    rank, size = mpiabi.rank_size(lib, world)
    assert (rank, size) == (MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size())
    mpiabi.check(lib.MPIABI_Finalize(), "MPI_Finalize")
    assert not MPI.Is_finalized(), "the wrapper finalized MPI that mpi4py owns"
    total = MPI.COMM_WORLD.allreduce(rank + 1)
    assert total == size * (size + 1) // 2, total

elif case == "free-after-finalize":
    # XLA frees its communicators after its atexit MPI_Finalize: no error, no output.
    lib = mpiabi.load()
    mpiabi.init_thread(lib, mpiabi.const_int(lib, "THREAD_FUNNELED"))
    world = mpiabi.const_handle(lib, "COMM_WORLD")
    dup = ctypes.c_uint64(0)
    mpiabi.check(lib.MPIABI_Comm_dup(ctypes.c_uint64(world), ctypes.byref(dup)), "MPI_Comm_dup")
    mpiabi.check(lib.MPIABI_Finalize(), "MPI_Finalize")
    mpiabi.check(lib.MPIABI_Finalize(), "second MPI_Finalize")
    mpiabi.check(lib.MPIABI_Comm_free(ctypes.byref(dup)), "MPI_Comm_free after MPI_Finalize")
    assert dup.value == mpiabi.const_handle(lib, "COMM_NULL")

elif case == "split":
    # XLA's convention: the key is the rank the new communicator must give.
    lib = mpiabi.load()
    mpiabi.init_thread(lib, mpiabi.const_int(lib, "THREAD_FUNNELED"))
    world = mpiabi.const_handle(lib, "COMM_WORLD")
    rank, size = mpiabi.rank_size(lib, world)
    # "devices": the keys one split per process would carry if each process had
    # two devices in a group over all of them (XLA with devices initialize() was not told of)
    key = {"reversed": size - 1 - rank, "zero": 0, "devices": 2 * rank + 1}[sys.argv[2]]
    new = ctypes.c_uint64(0)
    mpiabi.check(lib.MPIABI_Comm_split(ctypes.c_uint64(world), 0, key, ctypes.byref(new)), "MPI_Comm_split")
    newrank, newsize = mpiabi.rank_size(lib, new.value)
    expected = size - 1 - rank if sys.argv[2] == "reversed" else rank
    assert (newrank, newsize) == (expected, size), (newrank, newsize)
    mpiabi.check(lib.MPIABI_Comm_free(ctypes.byref(new)), "MPI_Comm_free")
    mpiabi.check(lib.MPIABI_Finalize(), "MPI_Finalize")

elif case == "records-reused":
    # XLA frees a communicator when its programs go (jax.clear_caches()): the record's slot is free
    # again, so more splits over a run than the wrapper keeps records of at once (4,096) are fine,
    # and the last is still checked: a disagreement on it ends the job with the check's line.
    lib = mpiabi.load()
    mpiabi.init_thread(lib, mpiabi.const_int(lib, "THREAD_FUNNELED"))
    world = mpiabi.const_handle(lib, "COMM_WORLD")
    rank, size = mpiabi.rank_size(lib, world)
    new = ctypes.c_uint64(0)
    for _ in range(5000):
        mpiabi.check(lib.MPIABI_Comm_split(ctypes.c_uint64(world), 0, rank, ctypes.byref(new)), "MPI_Comm_split")
        mpiabi.check(lib.MPIABI_Comm_free(ctypes.byref(new)), "MPI_Comm_free")
    mpiabi.check(lib.MPIABI_Comm_split(ctypes.c_uint64(world), 0, rank, ctypes.byref(new)), "MPI_Comm_split")
    out = ctypes.c_float(0)
    count = 1 if sys.argv[2] == "agree" else 1 + rank  # "disagree": a rank-dependent size
    send = (ctypes.c_float * 2)(rank + 1.0, 0.0)
    mpiabi.check(lib.MPIABI_Allreduce(send, ctypes.byref(out), count, ctypes.c_uint64(
        mpiabi.const_handle(lib, "FLOAT")), ctypes.c_uint64(mpiabi.const_handle(lib, "SUM")), new), "MPI_Allreduce")
    assert out.value == size * (size + 1) / 2, out.value
    mpiabi.check(lib.MPIABI_Comm_free(ctypes.byref(new)), "MPI_Comm_free")
    mpiabi.check(lib.MPIABI_Finalize(), "MPI_Finalize")

else:
    raise SystemExit(f"unknown case {case}")
print(f"PASS {case}", flush=True)

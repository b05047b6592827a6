"""`python -m mpi_collectives doctor`: check the whole set-up, on every rank.

Besides the set-up (native layer, MPI library, jaxlib's interface, thread
level, launcher), it checks that the MPI library gives right answers for
every reduction and dtype XLA sends to it: an MPI can be wrong (Debian 12's
MPICH 4.0.2 gives wrong MPI_MAX/MPI_MIN on MPI_UINT8_T with 3 ranks).
It reports where the ranks sit (per node: ranks, CPUs each, sockets and
NUMA domains) and, where a node holds more ranks than sockets or NUMA
domains, what docs/layout.md measured for each class of program (initialize()'s note). On several ranks it
then runs one JAX psum across them, set up by
mpi_collectives.initialize() as a user's program is, and checks it exactly;
on one rank it says how to launch it on several instead.
"""
import ctypes
import os
import re
import sys

import numpy as np

from ..base import mpi
from ..base._paths import libpath
from ..base.settings import THREAD_LEVELS
from ..services import layout

# The dtypes XLA's MPI collectives use, and the reductions it asks for.
XLA_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
              "float32", "float64", "complex64", "complex128"]
NUMPY_OPS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


def _inputs(dtype: np.dtype, op: str, rank: int, size: int) -> np.ndarray:
    """Values that tell a right reduction from a wrong one and never overflow."""
    i = np.arange(16)
    if op == "sum":
        v = (i + 3 * rank) % 7
    elif op == "prod":
        v = 1 + ((i + rank) % 2)  # at most 2**size
    else:  # spread over the whole range, signed values below zero, unsigned above 127
        info = np.iinfo(dtype) if dtype.kind in "iu" else None
        hi = min(info.max, 250) if info else 250
        v = (i * 37 + rank * 101) % hi
        if dtype.kind == "i" or dtype.kind == "f":
            v = v - hi // 2
    out = v.astype(dtype)
    if dtype.kind == "c":
        out = out + 1j * out[::-1]
    return out


def reduction_self_check(rank: int, size: int):
    """[(dtype, op, ok)] for every XLA dtype and reduction, checked on every rank."""
    results = []
    for name in XLA_DTYPES:
        dtype = np.dtype(name)
        for op, np_op in NUMPY_OPS.items():
            if dtype.kind == "c" and op in ("max", "min"):
                continue  # not defined for complex numbers
            x = _inputs(dtype, op, rank, size)
            got = mpi.allreduce(x, op)
            everyone = mpi.allgather(x)
            expected = np_op(everyone, axis=0).astype(dtype)
            results.append((name, op, _everywhere(np.array_equal(got, expected))))
        if dtype.kind in "iu" and size > 1:
            # XLA's integers wrap around on overflow; Open MPI's op/avx saturates 8- and 16-bit sums.
            x = np.full(16, np.iinfo(dtype).max, dtype) - np.arange(16, dtype=dtype) - dtype.type(rank % 64)
            expected = mpi.allgather(x).sum(axis=0, dtype=dtype)
            results.append((name, "sum past its maximum", _everywhere(np.array_equal(mpi.allreduce(x, "sum"), expected))))
    return results


def _everywhere(ok: bool) -> bool:
    return bool(mpi.allreduce(np.array([0 if ok else 1], np.int32), "max")[0] == 0)


def _jaxlib_interface_missing():
    from ..integration.jax_compat import jaxlib_trampoline_library
    try:
        path = jaxlib_trampoline_library()
    except (ImportError, FileNotFoundError):
        return None
    data = open(path, "rb").read()
    wanted = {m.decode() for m in re.findall(rb"(?<=\0)MPIX?ABI_[A-Za-z0-9_]+(?=\0)", data)}
    lib = ctypes.CDLL(libpath(), mode=os.RTLD_LAZY | os.RTLD_LOCAL | 0x8)
    return sorted(n for n in wanted if not hasattr(lib, n))


NOTE = "note"  # say()'s third answer: not a problem, advice (the layout's)

# How to launch the doctor on several ranks, for the line it prints on one.
LAUNCH_HINT = ("checked on 1 rank only: launch it on several to check JAX's collectives across them, "
               "e.g. `mpiexec -n 2 python -m mpi_collectives doctor` or "
               "`srun -n 2 --mpi=pmi2 python -m mpi_collectives doctor`")


def _reduce(jax, x, axis):
    """The collective the doctor checks (a test program puts a wrong one here)."""
    return jax.lax.psum(x, axis)


def jax_psum(rank: int, size: int):
    """One JAX psum over every device of every rank, through initialize():
    (what this rank got, what it should get, how many devices). Every rank
    gives rank + 1 on each of its devices, so the sum tells a missing or a
    doubled rank from the right answer."""
    from ..integration.jax_compat import process_local_array, shard_map
    from ..integration.jax_setup import initialize

    initialize(layout_note=0)  # the doctor has said the layout already
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("x",))
    local = jax.local_device_count()
    f = jax.jit(shard_map()(lambda v: _reduce(jax, v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
    x = process_local_array(NamedSharding(mesh, P("x")), np.full((local, 4), rank + 1, np.float32))
    got = np.asarray(f(x).addressable_data(0))
    expected = np.full((1, 4), local * size * (size + 1) // 2, np.float32)
    return got, expected, len(jax.devices())


def _psum_check(rank: int, size: int, say) -> None:
    """Run jax_psum, check it on every rank, and say the result (rank 0's words for all)."""
    what = f"JAX psum across {size} ranks through initialize()"
    try:
        got, expected, devices = jax_psum(rank, size)
    except Exception as e:  # this rank alone, maybe: the others may be inside the collective
        from ..base.ending import end_job
        first = str(e).splitlines()[0].removeprefix("mpi-collectives: ") if str(e) else ""
        end_job(f"rank {rank}/{size}: doctor: {what} failed: {type(e).__name__}: {first}")
    right = got.shape == expected.shape and bool(np.array_equal(got, expected))
    shown = np.unique(got).tolist() if got.size else got.tolist()
    value = f"{expected.flat[0]:g}"
    if not right:  # every rank says so, on its stderr; rank 0 also in the report
        print(f"mpi-collectives: rank {rank}/{size}: doctor: {what} gave {shown}, expected {value} on "
              "every element: WRONG", file=sys.stderr, flush=True)
    everywhere = _everywhere(right)
    say(everywhere, f"{what}: " + (f"{value} on {devices} devices, exact" if everywhere else
                                   f"WRONG, expected {value} on {devices} devices, rank {rank} got {shown} "
                                   "(every rank's answer is on its stderr)"),
        "JAX's collectives give wrong answers over this MPI; report it with the output of "
        "`python -m mpi_collectives info` and of this doctor")


def doctor() -> int:
    problems = []
    lines = []

    def say(ok, what, fix=None):
        lines.append(f"  [{'note' if ok == NOTE else 'ok' if ok else 'PROBLEM'}] {what}")
        if not ok:
            problems.append(f"{what}. Fix: {fix}")

    say(True, f"native layer: {libpath()}")
    family = mpi.family()
    if family == "none":
        print("mpi-collectives doctor:\n  [PROBLEM] " + mpi.not_loaded_message())
        return 1
    say(True, f"MPI library: {mpi.library()} ({family} ABI)")
    missing = _jaxlib_interface_missing()
    if missing is None:
        say(False, "jaxlib is not installed", "pip install jax jaxlib")
    else:
        say(not missing, f"jaxlib's MPIABI interface: {'complete' if not missing else 'missing ' + ', '.join(missing[:5])}",
            "this jaxlib asks for functions this build lacks; install the mpi-collectives made for it")
    level = mpi.thread_level_name(mpi.init())  # a launcher of another MPI ends the job here, with a message
    rank, size = mpi.rank_size()
    say(level == THREAD_LEVELS[-1], f"thread level: {level}",
        "XLA calls MPI from several threads; unset MPI_COLLECTIVES_THREAD_LEVEL, or use an MPI built "
        "with MPI_THREAD_MULTIPLE support")
    say(True, f"ranks: {size}")
    placements = layout.gather(size, mpi.allgather)  # as the launcher started them: before initialize() binds
    for line in layout.describe(placements):
        say(True, f"layout: {line}")
    advice = layout.advice(placements)
    if advice:
        say(NOTE, advice)
    results = reduction_self_check(rank, size)
    wrong = [f"{d} {o}" for d, o, ok in results if not ok]
    fix = (f"{mpi.library()} gives wrong answers for reductions XLA uses; use another MPI "
           "(`pip install mpich`, or your site's current MPI module)")
    if family == "openmpi" and any("past its maximum" in w for w in wrong):
        fix = ("Open MPI's op/avx component saturates 8- and 16-bit integer sums; unset OMPI_MCA_op "
               "(the wrapper then sets OMPI_MCA_op=^avx) or set OMPI_MCA_op=^avx yourself")
    say(not wrong, f"MPI_Allreduce self-check, {len(results)} dtype/op pairs: "
        + ("all right" if not wrong else "WRONG for " + ", ".join(wrong)), fix)
    if size > 1 and missing == []:  # (without jaxlib's interface there is no JAX collective to run)
        _psum_check(rank, size, say)
    if rank == 0:
        print("mpi-collectives doctor:")
        print("\n".join(lines))
        for p in problems:
            print("mpi-collectives: " + p)
        if problems:
            print(f"{len(problems)} problem(s)")
        else:
            print("all good" if size > 1 else LAUNCH_HINT)
    sys.stdout.flush()
    return 1 if problems else 0

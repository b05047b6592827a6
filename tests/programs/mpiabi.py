"""Load the wrapper the way MPItrampoline does and call MPIABI functions.

Used by test programs that check the wrapper's policies without JAX.
"""
import ctypes
import os

import mpi_collectives  # noqa: F401  (tells the native layer where the venv's MPI is)

RTLD_DEEPBIND = 0x8


def load():
    path = os.environ.get("MPITRAMPOLINE_LIB") or mpi_collectives.libpath()
    return ctypes.CDLL(path, mode=os.RTLD_LAZY | os.RTLD_LOCAL | RTLD_DEEPBIND)


def const_int(lib, name):
    return ctypes.c_int.in_dll(lib, "MPIABI_" + name).value


def const_handle(lib, name):
    return ctypes.c_uint64.in_dll(lib, "MPIABI_" + name).value


def check(ret, what):
    if ret != 0:
        raise SystemExit(f"{what} returned {ret}")


def init_thread(lib, required):
    provided = ctypes.c_int(-1)
    check(lib.MPIABI_Init_thread(None, None, required, ctypes.byref(provided)), "MPI_Init_thread")
    return provided.value


def rank_size(lib, comm):
    r, s = ctypes.c_int(), ctypes.c_int()
    check(lib.MPIABI_Comm_rank(ctypes.c_uint64(comm), ctypes.byref(r)), "MPI_Comm_rank")
    check(lib.MPIABI_Comm_size(ctypes.c_uint64(comm), ctypes.byref(s)), "MPI_Comm_size")
    return r.value, s.value

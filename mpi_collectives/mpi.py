"""MPI from Python through the native layer (the same library jaxlib uses, so
MPI is initialized once and shared), for initialize() and the host helpers.

Only what those need: init, rank/size, barrier, bcast, allgather, allreduce.
"""
import numpy as np

_DTYPES = {
    "int8": "INT8_T", "int16": "INT16_T", "int32": "INT32_T", "int64": "INT64_T",
    "uint8": "UINT8_T", "uint16": "UINT16_T", "uint32": "UINT32_T", "uint64": "UINT64_T",
    "float32": "FLOAT", "float64": "DOUBLE", "complex64": "C_COMPLEX", "complex128": "C_DOUBLE_COMPLEX",
    "bool": "C_BOOL",
}
_OPS = {"sum": "SUM", "prod": "PROD", "max": "MAX", "min": "MIN",
        "land": "LAND", "lor": "LOR", "band": "BAND", "bor": "BOR", "bxor": "BXOR"}


class MPIError(RuntimeError):
    pass


_NATIVE = None


def native():
    """(ffi, lib) of the native layer; loading it loads MPI."""
    global _NATIVE
    if _NATIVE is None:
        from . import _mpiabi
        _NATIVE = _mpiabi.ffi, _mpiabi.lib
    return _NATIVE


def _str(p) -> str:
    return native()[0].string(p).decode(errors="replace")


def family() -> str:
    """The ABI family of the loaded MPI library, or "none"."""
    return _str(native()[1].mpic_family_name())


def library() -> str:
    return _str(native()[1].mpic_library_path())


def load_report() -> str:
    return _str(native()[1].mpic_load_report())


def _check(ret: int, what: str) -> None:
    if ret != 0:
        ffi, lib = native()
        buf = ffi.new("char[]", 1024)
        n = ffi.new("int *")
        text = ffi.string(buf).decode() if lib.MPIABI_Error_string(ret, buf, n) == 0 else ""
        raise MPIError(f"mpi-collectives: {what} failed with MPI error {ret}: {text}")


_FINALIZE_REGISTERED = False


def _finalize_at_exit() -> None:
    # The wrapper finalizes only what it initialized, and only once (JAX's own
    # atexit MPI_Finalize may have run first). A process that leaves MPI
    # unfinalized is reported by the launcher as a failure.
    native()[1].MPIABI_Finalize()


def init() -> int:
    """Initialize MPI (once; the wrapper's policy picks the thread level). Returns the level."""
    global _FINALIZE_REGISTERED
    ffi, lib = native()
    provided = ffi.new("int *")
    _check(lib.MPIABI_Init_thread(ffi.NULL, ffi.NULL, lib.MPIABI_THREAD_FUNNELED, provided), "MPI_Init_thread")
    if not _FINALIZE_REGISTERED:
        import atexit
        atexit.register(_finalize_at_exit)
        _FINALIZE_REGISTERED = True
    return provided[0]


def thread_level_name(level: int) -> str:
    lib = native()[1]
    names = {lib.MPIABI_THREAD_SINGLE: "single", lib.MPIABI_THREAD_FUNNELED: "funneled",
             lib.MPIABI_THREAD_SERIALIZED: "serialized", lib.MPIABI_THREAD_MULTIPLE: "multiple"}
    return names.get(level, str(level))


def rank_size():
    ffi, lib = native()
    r, s = ffi.new("int *"), ffi.new("int *")
    _check(lib.MPIABI_Comm_rank(lib.MPIABI_COMM_WORLD, r), "MPI_Comm_rank")
    _check(lib.MPIABI_Comm_size(lib.MPIABI_COMM_WORLD, s), "MPI_Comm_size")
    return r[0], s[0]


def barrier() -> None:
    lib = native()[1]
    _check(lib.MPIABI_Barrier(lib.MPIABI_COMM_WORLD), "MPI_Barrier")


def _buffer(array: np.ndarray):
    ffi = native()[0]
    return ffi.from_buffer(array, require_writable=False)


def bcast(array: np.ndarray, root: int) -> np.ndarray:
    """Broadcast a contiguous array in place from root (same shape on every rank)."""
    lib = native()[1]
    array = np.ascontiguousarray(array)
    _check(lib.MPIABI_Bcast(_buffer(array), array.nbytes, lib.MPIABI_BYTE, root, lib.MPIABI_COMM_WORLD),
           "MPI_Bcast")
    return array


def allgather(array: np.ndarray, size: int = None) -> np.ndarray:
    """Every rank's array (same shape everywhere), stacked along a new axis 0."""
    lib = native()[1]
    size = size or rank_size()[1]
    array = np.ascontiguousarray(array)
    out = np.empty((size,) + array.shape, array.dtype)
    _check(lib.MPIABI_Allgather(_buffer(array), array.nbytes, lib.MPIABI_BYTE, _buffer(out), array.nbytes,
                                lib.MPIABI_BYTE, lib.MPIABI_COMM_WORLD), "MPI_Allgather")
    return out


def allreduce(array: np.ndarray, op: str = "sum") -> np.ndarray:
    lib = native()[1]
    array = np.asarray(array, order="C")  # (keeps 0-d shapes, unlike ascontiguousarray)
    kind = _DTYPES.get(array.dtype.name)
    if kind is None:
        raise TypeError(f"mpi-collectives: allreduce does not support dtype {array.dtype}; "
                        f"supported: {', '.join(_DTYPES)}")
    if op not in _OPS:
        raise ValueError(f"mpi-collectives: unknown reduction {op!r}; known: {', '.join(_OPS)}")
    out = np.empty_like(array)
    _check(lib.MPIABI_Allreduce(_buffer(array), _buffer(out), array.size, getattr(lib, "MPIABI_" + kind),
                                getattr(lib, "MPIABI_" + _OPS[op]), lib.MPIABI_COMM_WORLD), "MPI_Allreduce")
    return out


def abort(code: int = 1) -> None:
    lib = native()[1]
    lib.MPIABI_Abort(lib.MPIABI_COMM_WORLD, code)


def isend(array: np.ndarray, dest: int, tag: int):
    """Start sending a contiguous array; keep the returned (request, array) until done."""
    ffi, lib = native()
    array = np.ascontiguousarray(array)
    req = ffi.new("uintptr_t *")
    _check(lib.MPIABI_Isend(_buffer(array), array.nbytes, lib.MPIABI_BYTE, dest, tag, lib.MPIABI_COMM_WORLD, req),
           "MPI_Isend")
    return req, array


def irecv(array: np.ndarray, source: int, tag: int):
    ffi, lib = native()
    req = ffi.new("uintptr_t *")
    _check(lib.MPIABI_Irecv(ffi.from_buffer(array), array.nbytes, lib.MPIABI_BYTE, source, tag,
                            lib.MPIABI_COMM_WORLD, req), "MPI_Irecv")
    return req, array


def test(request) -> bool:
    ffi, lib = native()
    flag = ffi.new("int *")
    _check(lib.MPIABI_Test(request, flag, lib.MPIABI_STATUS_IGNORE), "MPI_Test")
    return bool(flag[0])

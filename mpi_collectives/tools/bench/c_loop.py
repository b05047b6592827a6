"""The floor: a C loop timing one MPI collective per iteration, compiled with
cffi when first needed (a C compiler, as the package's own build needs; no
MPI header). It calls MPI through function pointers, so the same loop runs
through this package's wrapper (MPIABI_*, pointer-sized handles) and
directly against the MPI library (MPI_*, with that family's handles): the
difference is what the wrapper adds."""
import ctypes
import os
import tempfile

import numpy as np

from ...base import mpi

OPS = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ppermute"]
FUNCTIONS = ["Allreduce", "Allgather", "Reduce_scatter", "Alltoall", "Sendrecv"]

# The MPICH ABI's handles (native/abi/mpich_constants.txt; tests/package/test_bench.py checks them).
MPICH_HANDLES = {"COMM_WORLD": 0x44000000, "FLOAT": 0x4C00040A, "SUM": 0x58000003, "STATUS_IGNORE": 1}
# Open MPI's handles are the addresses of these symbols (native/abi/openmpi_constants.txt); STATUS_IGNORE is NULL.
OPENMPI_SYMBOLS = {"COMM_WORLD": "ompi_mpi_comm_world", "FLOAT": "ompi_mpi_float", "SUM": "ompi_mpi_op_sum"}

_LOOP = r"""
#define LOOP(NAME, H)                                                                              \
int NAME(int op, void **fn, H dtype, H sum, H comm, void *status_ignore, int rank, int size,       \
         const float *send, float *recv, int count, int iters, double *times) {                   \
  typedef int (*allreduce_t)(const void *, void *, int, H, H, H);                                \
  typedef int (*allgather_t)(const void *, int, H, void *, int, H, H);                           \
  typedef int (*reduce_scatter_t)(const void *, void *, const int *, H, H, H);                   \
  typedef int (*alltoall_t)(const void *, int, H, void *, int, H, H);                            \
  typedef int (*sendrecv_t)(const void *, int, H, int, int, void *, int, H, int, int, H, void *); \
  typedef double (*wtime_t)(void);                                                                \
  typedef int (*barrier_t)(H);                                                                    \
  int part = count / size, counts[4096];                                                          \
  for (int i = 0; i < size && i < 4096; i++) counts[i] = part;                                    \
  if (((barrier_t)fn[6])(comm)) return -1;                                                        \
  for (int it = 0; it < iters; it++) {                                                            \
    double t = ((wtime_t)fn[5])();                                                                \
    int err = 0;                                                                                  \
    switch (op) {                                                                                 \
    case 0: err = ((allreduce_t)fn[0])(send, recv, count, dtype, sum, comm); break;               \
    case 1: err = ((allgather_t)fn[1])(send, count, dtype, recv, count, dtype, comm); break;      \
    case 2: err = ((reduce_scatter_t)fn[2])(send, recv, counts, dtype, sum, comm); break;         \
    case 3: err = ((alltoall_t)fn[3])(send, part, dtype, recv, part, dtype, comm); break;         \
    case 4: err = ((sendrecv_t)fn[4])(send, count, dtype, (rank + 1) % size, 7, recv, count,      \
                                      dtype, (rank + size - 1) % size, 7, comm, status_ignore);   \
      break;                                                                                      \
    }                                                                                             \
    times[it] = ((wtime_t)fn[5])() - t;                                                           \
    if (err) return err;                                                                          \
  }                                                                                               \
  return 0;                                                                                       \
}
"""
_CDEF = """
int loop_pointer_handles(int op, void **fn, uintptr_t dtype, uintptr_t sum, uintptr_t comm, void *status_ignore,
                         int rank, int size, const float *send, float *recv, int count, int iters, double *times);
int loop_int_handles(int op, void **fn, int dtype, int sum, int comm, void *status_ignore,
                     int rank, int size, const float *send, float *recv, int count, int iters, double *times);
"""
_MODULE = None


def _module():
    global _MODULE
    if _MODULE is None:
        import importlib.util

        import cffi

        ffi = cffi.FFI()
        ffi.cdef(_CDEF)
        ffi.set_source("_mpic_bench_loop", "#include <stdint.h>\n" + _LOOP +
                       "LOOP(loop_pointer_handles, uintptr_t)\nLOOP(loop_int_handles, int)\n",
                       extra_compile_args=["-O2"])
        # One build per rank, in a folder of its own: ranks compile at the same time.
        where = tempfile.mkdtemp(prefix=f"mpic-bench-{os.getpid()}-")
        path = ffi.compile(tmpdir=where)
        spec = importlib.util.spec_from_file_location("_mpic_bench_loop", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _MODULE = module
    return _MODULE


class Target:
    """One way of calling MPI: its functions and handles."""

    def __init__(self, name, functions, dtype, sum_op, comm, status_ignore, int_handles):
        self.name, self.functions = name, functions
        self.dtype, self.sum, self.comm, self.status_ignore = dtype, sum_op, comm, status_ignore
        self.int_handles = int_handles


def _address(lib, symbol):
    return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value


def through_wrapper() -> Target:
    wrapper = ctypes.CDLL(ffi_path(), mode=os.RTLD_NOW | os.RTLD_LOCAL | 0x4)  # RTLD_NOLOAD: already loaded
    names = [f"MPIABI_{f}" for f in FUNCTIONS] + ["MPIABI_Wtime", "MPIABI_Barrier"]
    return Target("C via wrapper", [_address(wrapper, n) for n in names], mpi.handle("FLOAT"), mpi.handle("SUM"),
                  mpi.handle("COMM_WORLD"),
                  ctypes.c_void_p.in_dll(wrapper, "MPIABI_STATUS_IGNORE").value or 0,  # NULL reads as None
                  False)


def ffi_path():
    from ...base._paths import libpath
    return libpath()


def direct() -> Target:
    """The MPI library itself, or None for a family whose handles we do not hard-code (the standard ABI)."""
    family = mpi.family()
    real = ctypes.CDLL(mpi.library(), mode=os.RTLD_NOW | os.RTLD_LOCAL | 0x4)
    names = [f"MPI_{f}" for f in FUNCTIONS] + ["MPI_Wtime", "MPI_Barrier"]
    fns = [_address(real, n) for n in names]
    if family == "mpich":
        h = MPICH_HANDLES
        return Target("C direct", fns, h["FLOAT"], h["SUM"], h["COMM_WORLD"], h["STATUS_IGNORE"], True)
    if family == "openmpi":
        h = {k: ctypes.addressof(ctypes.c_char.in_dll(real, s)) for k, s in OPENMPI_SYMBOLS.items()}
        return Target("C direct", fns, h["FLOAT"], h["SUM"], h["COMM_WORLD"], 0, False)
    return None


def run(target: Target, op: str, send: np.ndarray, recv: np.ndarray, iters: int) -> np.ndarray:
    """Seconds per iteration of `op` on float32 buffers, through `target`."""
    module = _module()
    ffi = module.ffi
    rank, size = mpi.rank_size()
    times = np.zeros(iters)
    fns = ffi.new("void *[]", [ffi.cast("void *", a) for a in target.functions])
    loop = module.lib.loop_int_handles if target.int_handles else module.lib.loop_pointer_handles
    err = loop(OPS.index(op), fns, target.dtype, target.sum, target.comm, ffi.cast("void *", target.status_ignore),
               rank, size, ffi.from_buffer("float[]", send), ffi.from_buffer("float[]", recv, require_writable=True),
               send.size, iters, ffi.from_buffer("double[]", times, require_writable=True))
    if err:
        raise RuntimeError(f"mpi-collectives bench: {target.name} {op} failed with MPI error {err}")
    return times

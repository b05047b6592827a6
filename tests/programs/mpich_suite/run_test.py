"""Runs one of MPICH's tests, built as a shared library with its main renamed conformance_main
(scripts/mpich_test_suite.py), inside this Python process, over the wrapper:

    run_test.py TEST.so WRAPPER.so [the test's arguments]

The wrapper is loaded first and global, so that the test's MPI_<name> calls (mpi.h: the wrapper's
MPIABI_<name>) bind to it as they would to MPItrampoline's; inside Python, because the wrapper is a
CPython extension (conformance_runner.py says why)."""
import ctypes
import os
import sys

ctypes.CDLL(sys.argv[2], mode=os.RTLD_GLOBAL | os.RTLD_NOW)
test = ctypes.CDLL(sys.argv[1])
args = [os.path.basename(sys.argv[1]).encode()] + [a.encode() for a in sys.argv[3:]]
test.conformance_main.restype = ctypes.c_int
test.conformance_main.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
sys.stdout.flush()
sys.exit(test.conformance_main(len(args), (ctypes.c_char_p * len(args))(*args)))

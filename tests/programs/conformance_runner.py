"""Runs tests/programs/conformance_harness.c, built as a shared library with its main renamed
conformance_main, inside this Python process:

    conformance_runner.py HARNESS.so WRAPPER.so TMPDIR

The wrapper (_mpiabi.abi3.so) is a CPython extension: the Py* functions it refers to come from
the process that loads it. A C program of its own has none, which fails where the linker binds
every symbol at load time (Ubuntu's default) and where libpython is static (Ubuntu's and Debian's
system Pythons). Inside Python the harness still loads the wrapper the way MPItrampoline does
(dlopen with RTLD_DEEPBIND, everything through dlsym), and that is where MPItrampoline loads it
too: inside jaxlib, in a Python process."""
import ctypes
import os
import sys

if os.environ.get("CONFORMANCE_LOAD_WRAPPER_FIRST") == "1":
    # As the package's own import loads it before MPItrampoline does (no RTLD_DEEPBIND): bound to a
    # preloaded library's functions (tests/programs/yama_shim.c), which RTLD_DEEPBIND would pass over.
    ctypes.CDLL(sys.argv[2])
harness = ctypes.CDLL(sys.argv[1])
args = [a.encode() for a in sys.argv[1:]]
harness.conformance_main.restype = ctypes.c_int
harness.conformance_main.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
sys.stdout.flush()
code = harness.conformance_main(len(args), (ctypes.c_char_p * len(args))(*args))
sys.exit(code)  # through the C library's exit: its atexit handlers flush the harness's output and end MPI

"""Uncaught exceptions end the whole job (MPI_COLLECTIVES_ABORT_ON_EXCEPTION).

A rank that dies of an exception would leave the others waiting in their
next collective (and JAX's shutdown waits for them too): print the
traceback, say which rank failed, then end the whole job.
"""
import os
import sys
import threading
import traceback

from ..base.ending import end_job


def abort_on_uncaught_exceptions(rank: int, size: int) -> None:
    """Install the hooks for the main thread (sys.excepthook) and other threads (threading.excepthook)."""

    rank_process = os.getpid()

    def die(kind, exc, tb, where="the main thread"):  # (SystemExit never reaches an excepthook)
        traceback.print_exception(kind, exc, tb)
        if os.getpid() != rank_process:  # a process forked from the rank: its failure is its own (issue 81)
            return
        end_job(f"rank {rank}/{size} stopped on an uncaught {kind.__name__} in {where} (above); ending the "
                "whole job with MPI_Abort so that no rank waits for it. (MPI_COLLECTIVES_ABORT_ON_EXCEPTION=0 "
                "turns this off.)")

    sys.excepthook = die
    threading.excepthook = lambda a: die(a.exc_type, a.exc_value, a.exc_traceback, f"thread {a.thread.name}")


def before_atexit(function) -> None:
    """Run `function` when the main thread has finished, before the atexit handlers (JAX's
    shutdown and MPI_Finalize among them) and before Python abandons daemon threads: where the
    watchers stop, so that none is inside a C++ call of JAX's when the process ends."""
    rank_process = os.getpid()

    def in_the_rank():
        # A process forked from the rank (multiprocessing's fork, a test's os.fork) runs these too at its
        # end (threading's shutdown, or atexit): the rank's watchers would say the rank finished, and its
        # peers end the job 30 s later (issue 81). Only the rank's own end is the rank's.
        if os.getpid() == rank_process:
            function()

    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(in_the_rank)
    else:  # (a Python without it: the atexit handler, last registered so first run)
        import atexit
        atexit.register(in_the_rank)


def wait_for_computations_at_exit(backend_exists) -> None:
    """JAX dispatches asynchronously, so a program's main thread can end while its last jitted
    computations, collectives and all, still run on XLA's threads; JAX's shutdown and MPI_Finalize
    (atexit handlers) then pull MPI from under them. 2 ranks, the mpich wheel, a program that
    dispatched three jits with a collective and ended without waiting: 5 runs of 5 ended with
    exit status 11 (a segfault) or 5 (MPICH's "Fatal error in internal_Comm_split: Invalid
    communicator"), after its last line. So at the end of the main thread every live array is
    waited for (the watchers still run meanwhile: a rank that waits for one that is gone is named
    as in any other wait). `backend_exists()`: whether JAX has made its backend; when it has not,
    nothing runs, and asking for the live arrays would make it, joining the other ranks in JAX's
    start-up exchange from a rank that is ending."""
    def wait():
        jax = sys.modules.get("jax")
        if jax is None or not backend_exists():
            return
        try:
            arrays = jax.live_arrays()
        except Exception:  # (a jax without it, or its backend gone: nothing to wait for)
            return
        for array in arrays:
            try:
                array.block_until_ready()
            except Exception:  # deleted or donated meanwhile: not ours to report
                pass
    before_atexit(wait)

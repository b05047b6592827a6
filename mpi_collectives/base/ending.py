"""The one way the Python side ends a job: end_job(message).

Every failure that must not leave other ranks waiting goes through here: the
meeting of ranks in initialize() (a rank missing), the MPI_Init watchdog,
uncaught exceptions (exit_hooks) and the peers watcher (a rank that finished
while others wait). Like the native layer's own failures, it ends in
mpi.end_job, so there is one policy: one line on this rank's stderr, a
second for the launcher to forward it, then MPI_Abort when MPI is up (the
launcher then ends the ranks on every node), _exit(1) when it is not.
"""
import atexit
import contextlib
import sys

from . import mpi
from .errors import InitializeError


def end_job(message: str):
    """Print `mpi-collectives: error: <message>` and end the whole job. Never returns.

    Safe from any thread, and while MPI_Init is under way in another: when two
    threads end the job at once, the first one's line is the one printed."""
    for stream in (sys.stdout, sys.stderr):  # what the program wrote before: the C line comes after it
        try:
            stream.flush()
        except Exception:
            pass
    mpi.end_job(f"mpi-collectives: error: {message}")


@contextlib.contextmanager
def launch_ends_if_start_up_fails():
    """Around a rank's start-up. An InitializeError raised before this process began MPI_Init (a
    setting that this rank alone has wrong, its MPI library not found) still reaches the program;
    when the process then exits, its launcher is asked to end the job (mpi.abort_launch_before_init).
    Else the ranks that started MPI_Init wait in it for this one until MPI_COLLECTIVES_INIT_TIMEOUT:
    Hydra and srun do not end a job for a process that exits before it spoke to them."""
    try:
        yield
    except InitializeError:
        atexit.register(_abort_launch_quietly)
        raise


def _abort_launch_quietly():
    try:
        mpi.abort_launch_before_init(1)
    except Exception:  # (no native layer to ask: nothing more to do)
        pass

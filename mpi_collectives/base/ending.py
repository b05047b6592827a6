"""The one way the Python side ends a job: end_job(message).

Every failure that must not leave other ranks waiting goes through here: the
meeting of ranks in initialize() (a rank missing), the MPI_Init watchdog,
uncaught exceptions (exit_hooks) and the peers watcher (a rank that finished
while others wait). Like the native layer's own failures, it ends in
mpi.end_job, so there is one policy: one line on this rank's stderr, a
second for the launcher to forward it, then MPI_Abort when MPI is up (the
launcher then ends the ranks on every node), _exit(1) when it is not.
"""
import sys

from . import mpi


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

"""Rank-aware log lines on stderr: `mpi-collectives [rank 3/64]: ...`."""
import os
import sys

from . import launchers, terminal


def where() -> str:
    """`rank R/N` from MPI once it is initialized, from the launcher before."""
    try:
        from . import mpi
        if mpi.is_initialized():
            rank, size = mpi.rank_size()
            return f"rank {rank}/{size}"
    except Exception:  # logging must never be the thing that fails
        pass
    return launchers.where()


def log(message: str, level: int = 1) -> None:
    """Print when MPI_COLLECTIVES_VERBOSE >= level (level 0: always)."""
    try:
        verbose = int(os.environ.get("MPI_COLLECTIVES_VERBOSE") or 0)
    except ValueError:
        verbose = 0
    if verbose >= level:
        line(f"mpi-collectives [{where()}]: {message}")


def line(text: str) -> None:
    """`text` and its newline on stderr in one write(2): a launcher merges its ranks' output as it
    comes, and print() writes the text and the newline apart, so that two ranks' lines could run
    into one (seen under Hydra with three ranks saying the same sentence)."""
    data = (text + "\n").encode(errors="replace")
    try:
        sys.stderr.flush()
        while data:
            data = data[os.write(terminal.fd(), data):]
    except OSError:  # no stderr to write to: nothing else to do
        pass

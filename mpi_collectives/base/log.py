"""Rank-aware log lines on stderr: `mpi-collectives [rank 3/64]: ...`."""
import os
import sys

from . import launchers


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
        print(f"mpi-collectives [{where()}]: {message}", file=sys.stderr, flush=True)

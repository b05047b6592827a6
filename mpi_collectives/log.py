"""Rank-aware log lines on stderr: `mpi-collectives [rank 3/64]: ...`."""
import os
import sys

_ENV_RANK = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")
_ENV_SIZE = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")


def _first(names):
    for n in names:
        if os.environ.get(n):
            return os.environ[n]
    return "?"


def launcher_rank_size() -> tuple:
    """(rank, size) as the launcher set them, (0, 1) without a launcher: for
    programs that need them before MPI is initialized, or with no MPI at all."""
    rank, size = _first(_ENV_RANK), _first(_ENV_SIZE)
    return (0 if rank == "?" else int(rank)), (1 if size == "?" else int(size))


def where() -> str:
    """`rank R/N` from MPI once it is initialized, from the launcher before."""
    try:
        from . import mpi
        if mpi.is_initialized():
            rank, size = mpi.rank_size()
            return f"rank {rank}/{size}"
    except Exception:  # logging must never be the thing that fails
        pass
    return f"rank {_first(_ENV_RANK)}/{_first(_ENV_SIZE)}"


def log(message: str, level: int = 1) -> None:
    """Print when MPI_COLLECTIVES_VERBOSE >= level (level 0: always)."""
    try:
        verbose = int(os.environ.get("MPI_COLLECTIVES_VERBOSE") or 0)
    except ValueError:
        verbose = 0
    if verbose >= level:
        print(f"mpi-collectives [{where()}]: {message}", file=sys.stderr, flush=True)

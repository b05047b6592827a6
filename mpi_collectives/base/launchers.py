"""What each MPI launcher tells its processes, in one table for C and Python.

The native layer is built from this same table (native/gen/generate.py
writes native/generated/launchers.inc from it; a test keeps the two equal):
it names a rank in its log lines before MPI is up, and compares the number
of processes a launcher started with the size of MPI_COMM_WORLD to catch a
launcher of another MPI.

This module imports nothing but the standard library, so that scripts can
read it without loading MPI (load it by path: see launcher_rank_size()).
"""
import collections
import os

# family: the MPI ABI family whose library a process this launcher started
# should load, "" when the launcher does not say (native/src/base/loader.c).
Launcher = collections.namedtuple("Launcher", "size_var rank_var name kind family")

# In order of precedence: a process started by srun --mpi=pmi2 has both
# PMI_* and SLURM_* set, and PMI_* is what its MPI library reads.
LAUNCHERS = (
    Launcher("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "Open MPI's mpirun", "openmpi", "openmpi"),
    Launcher("PMI_SIZE", "PMI_RANK", "a Hydra mpiexec (MPICH, Intel MPI) or srun --mpi=pmi2", "pmi", "mpich"),
    # (the mpich wheel speaks no PMIx; Open MPI does, and MPICH built for it)
    Launcher("PMIX_SIZE", "PMIX_RANK", "a PMIx launcher", "pmix", "openmpi"),
    Launcher("SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "Slurm's srun", "slurm", ""),
)
# The programs that start a job's processes on a node (a rank's parent, or
# its parent's parent), by the ABI family of the MPI installation they come
# from: that installation's own library (PREFIX/lib of PREFIX/bin/PROGRAM) is
# the one to load, before any other of the same family.
LAUNCHER_PROGRAMS = {
    "hydra_pmi_proxy": "mpich",  # MPICH's and Intel MPI's Hydra, on every node
    "mpiexec.hydra": "mpich",
    "orted": "openmpi",  # Open MPI 4: the daemon on other nodes
    "orterun": "openmpi",  # Open MPI 4: mpirun itself on its own node
    "prted": "openmpi",  # Open MPI 5 (PRRTE)
    "prterun": "openmpi",
}
# Set where the launcher's own size variable may not be (an sbatch script's
# environment before srun, or an older Slurm): read for log lines only.
EXTRA_SIZE_VARS = ("SLURM_NTASKS",)

RANK_VARS = tuple(launcher.rank_var for launcher in LAUNCHERS)
SIZE_VARS = tuple(launcher.size_var for launcher in LAUNCHERS) + EXTRA_SIZE_VARS


def _first(names, environ):
    for name in names:
        if environ.get(name):
            return environ[name]
    return None


def launcher_rank_size(environ=os.environ) -> tuple:
    """(rank, size) as the launcher set them, (0, 1) without a launcher: for
    programs that need them before MPI is initialized, or with no MPI at all."""
    rank, size = _first(RANK_VARS, environ), _first(SIZE_VARS, environ)
    return (int(rank) if rank else 0), (int(size) if size else 1)


def where(environ=os.environ) -> str:
    """`rank R/N` from the launcher's variables, `?` for what it did not set."""
    return f"rank {_first(RANK_VARS, environ) or '?'}/{_first(SIZE_VARS, environ) or '?'}"


def launcher(environ=os.environ):
    """The launcher that started this process (the first of LAUNCHERS whose
    rank or size variable is set), or None."""
    for entry in LAUNCHERS:
        if environ.get(entry.size_var) or environ.get(entry.rank_var):
            return entry
    return None


def started_by(environ=os.environ):
    """(the launcher, how many processes it started) when it started more than
    one, else (None, 0)."""
    for launcher in LAUNCHERS:
        value = environ.get(launcher.size_var)
        try:
            started = int(value) if value else 0
        except ValueError:
            continue
        if started > 1:
            return launcher, started
    return None, 0

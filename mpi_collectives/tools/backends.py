"""How a rank of a comparison starts JAX's distributed runtime: over MPI
through mpi_collectives.initialize(); over MPI as a program that sets JAX up
itself ("plain": MPITRAMPOLINE_LIB exported by the launching side, the
package never imported); or over JAX's gloo as a gloo user would (rank and
size from the launcher's variables, the coordinator at an address the
launching side chose). Used by the bench, the scripts and the
test programs that compare the two.

The package is imported only for "mpi": importing it sets
MPITRAMPOLINE_LIB and registers its cluster environment with JAX, whose
detection would load MPI into a gloo run. Scripts and test programs load
this module without importing the package (see standalone.py)."""
import os

from ..base.launchers import launcher_rank_size


def start(backend: str, coordinator: str = None) -> tuple:
    """(jax, rank, size) once jax.distributed is up over `backend` ("mpi",
    "plain", "xla-mpi" or "gloo"; the coordinator of the last three listens on
    `coordinator`, host:port)."""
    if backend == "gloo":
        return start_gloo(coordinator)
    if backend == "plain":
        return start_plain(coordinator)
    if backend == "xla-mpi":
        return start_xla_mpi(coordinator)
    import mpi_collectives
    info = mpi_collectives.initialize()
    import jax
    return jax, info.rank, info.size


def start_gloo(coordinator: str) -> tuple:
    """(jax, rank, size) with jax.distributed over JAX's gloo."""
    # A gloo user has no MPI loaded: when this package was imported anyway
    # (python -m mpi_collectives.tools.bench.worker), it set this variable.
    os.environ.pop("MPITRAMPOLINE_LIB", None)
    import jax
    rank, size = launcher_rank_size()
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator, size, rank)
    return jax, rank, size


def start_xla_mpi(coordinator: str) -> tuple:
    """(jax, rank, size) over XLA's own MPI collectives through an MPIwrapper built for the MPI the
    launcher runs (scripts/build_mpiwrapper.sh; MPI_COLLECTIVES_BENCH_MPIWRAPPER its library): what
    NetKet's CPU users are told to set up (mpibackend4jax), none of this package in the calls."""
    wrapper = os.environ.get("MPI_COLLECTIVES_BENCH_MPIWRAPPER")
    if not wrapper:
        raise RuntimeError("the xla-mpi backend needs MPI_COLLECTIVES_BENCH_MPIWRAPPER: an MPIwrapper library "
                           "(scripts/build_mpiwrapper.sh)")
    os.environ["MPITRAMPOLINE_LIB"] = wrapper  # before jax is imported: MPItrampoline reads it then
    return start_plain(coordinator)


def start_plain(coordinator: str) -> tuple:
    """(jax, rank, size) over MPI the way a program that never imports this
    package starts it (JAX's own multi-process harness does): the launching
    side exported MPITRAMPOLINE_LIB; JAX's collectives option and
    jax.distributed.initialize with the launcher's rank and size."""
    if not os.environ.get("MPITRAMPOLINE_LIB"):
        raise RuntimeError("the plain backend needs MPITRAMPOLINE_LIB from the launching side")
    os.environ["JAX_CPU_COLLECTIVES_IMPLEMENTATION"] = "mpi"
    import jax
    rank, size = launcher_rank_size()
    jax.config.update("jax_cpu_collectives_implementation", "mpi")
    jax.distributed.initialize(coordinator, size, rank)
    return jax, rank, size

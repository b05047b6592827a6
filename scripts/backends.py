"""How the scripts' worker ranks start JAX's distributed runtime: over MPI
through mpi_collectives.initialize(), or over JAX's gloo as a gloo user
would (rank and size from the launcher's environment, the coordinator on
this host), without importing mpi_collectives first, which would set
MPITRAMPOLINE_LIB and load MPI into a gloo run."""
import os


def start(backend: str, port) -> tuple:
    """(jax, rank, size) once jax.distributed is up over `backend` ("mpi" or "gloo";
    gloo's coordinator listens on 127.0.0.1:`port`)."""
    if backend == "gloo":
        import jax
        rank = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", 0)))
        size = int(os.environ.get("PMI_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", 1)))
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(f"127.0.0.1:{port}", size, rank)
        return jax, rank, size
    import mpi_collectives
    info = mpi_collectives.initialize()
    import jax
    return jax, info.rank, info.size

"""mpi-collectives: JAX's own CPU collectives over whatever MPI the cluster has.

    import mpi_collectives
    mpi_collectives.initialize()      # on every rank, launched by mpiexec/mpirun/srun
    import jax                        # psum, all_gather, ... now run over MPI

The native layer (mpi_collectives._mpiabi) is the MPIABI wrapper that jaxlib's
bundled MPItrampoline loads through MPITRAMPOLINE_LIB; importing this package
sets that variable (jaxlib reads it when `import jax` first loads it).
"""
import os
import sys

from ._paths import libpath, publish_search_prefixes

__version__ = "0.1.0"


def _prepare_environment() -> None:
    publish_search_prefixes()
    if "jax" in sys.modules or "jaxlib._jax" in sys.modules:
        return  # too late to choose jaxlib's MPI wrapper; initialize() says so if it matters
    try:
        if not os.environ.get("MPITRAMPOLINE_LIB"):
            os.environ["MPITRAMPOLINE_LIB"] = libpath()
    except RuntimeError:
        return  # not built (a source checkout): libpath() and initialize() explain
    if not os.environ.get("JAX_CPU_COLLECTIVES_IMPLEMENTATION"):
        os.environ["JAX_CPU_COLLECTIVES_IMPLEMENTATION"] = "mpi"


_prepare_environment()

from . import cluster as _cluster  # noqa: E402

_cluster.register()

from .communicators import prepare  # noqa: E402
from .jax_setup import Info, InitializeError, initialize  # noqa: E402
from .host import (  # noqa: E402
    allreduce, assert_equal, barrier, broadcast_one_to_all, process_allgather, sync_global_devices)

__all__ = ["initialize", "prepare", "Info", "InitializeError", "libpath", "broadcast_one_to_all",
           "process_allgather", "sync_global_devices", "assert_equal", "allreduce", "barrier",
           "__version__"]

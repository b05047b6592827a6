"""mpi-collectives: JAX's own CPU collectives over whatever MPI the cluster has.

The native layer (mpi_collectives._mpiabi) is the MPIABI wrapper that jaxlib's
bundled MPItrampoline loads through MPITRAMPOLINE_LIB; `libpath()` gives its path.
"""
from ._paths import libpath, publish_search_prefixes

publish_search_prefixes()

__version__ = "0.1.0"
__all__ = ["libpath", "__version__"]

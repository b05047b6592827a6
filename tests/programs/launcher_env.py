"""The package's modules that test programs use without importing the
package: its table of launcher variables (launchers.py), its jax version
differences (jax_compat.py) and the gloo-or-MPI start-up (backends.py).
Importing the package sets MPITRAMPOLINE_LIB (and so loads MPI, which a gloo
run must not pay for) and registers its cluster environment with JAX; these
modules import only the standard library, and come through the package's
standalone.py, which says how."""
import importlib.util
import os
import runpy

_package = importlib.util.find_spec("mpi_collectives")  # (finds it without importing it)
if _package is not None and _package.submodule_search_locations:
    _folder = list(_package.submodule_search_locations)[0]
else:  # a checkout without the package installed
    _folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "mpi_collectives")
runpy.run_path(os.path.join(_folder, "tools", "standalone.py"))

from mpi_collectives_standalone.base import launchers  # noqa: E402
from mpi_collectives_standalone.integration import jax_compat  # noqa: E402,F401  (for the programs)
from mpi_collectives_standalone.tools import backends  # noqa: E402,F401

launcher_rank_size = launchers.launcher_rank_size


def start(backend):
    """(jax, rank, size) over `backend` ("mpi" or "gloo"), gloo's coordinator
    at 127.0.0.1:MPI_COLLECTIVES_TEST_PORT, which the launching test chose."""
    return backends.start(backend, f"127.0.0.1:{os.environ.get('MPI_COLLECTIVES_TEST_PORT')}")

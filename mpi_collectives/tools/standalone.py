"""The package's standard-library modules (launchers, launching, backends,
jax_compat) for programs that must not `import mpi_collectives`: importing it
sets MPITRAMPOLINE_LIB (which a gloo run must not have) and registers its
cluster environment with JAX, whose detection loads MPI.

Run this file by its path (finding the package does not import it):

    folder = importlib.util.find_spec("mpi_collectives").submodule_search_locations[0]
    runpy.run_path(os.path.join(folder, "tools", "standalone.py"))
    from mpi_collectives_standalone.tools import backends

It registers `mpi_collectives_standalone`, a package over the package's folder
without this package's __init__, so those modules' relative imports of each
other work there too. Only modules that import the standard library alone
(and the package itself only inside functions) may be taken from it.
"""
import os
import sys
import types

NAME = "mpi_collectives_standalone"

if NAME not in sys.modules:
    _stand_in = types.ModuleType(NAME, __doc__)
    _stand_in.__path__ = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]  # the package's folder
    sys.modules[NAME] = _stand_in

"""For the scripts: the package's gloo-or-MPI start-up (mpi_collectives/
backends.py) and launch helpers (mpi_collectives/tools/launching.py), taken
without importing the package, which would set MPITRAMPOLINE_LIB and load
MPI into a gloo run (mpi_collectives/tools/standalone.py says how). The package
is the installed one when there is one (the venv's python), else this
checkout's (scripts/bench.py runs with any python3)."""
import importlib.util
import os
import runpy

_spec = importlib.util.find_spec("mpi_collectives")  # (does not import it)
_folder = (list(_spec.submodule_search_locations)[0] if _spec and _spec.submodule_search_locations
           else os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mpi_collectives"))
runpy.run_path(os.path.join(_folder, "tools", "standalone.py"))

from mpi_collectives_standalone.tools import backends as _backends, launching  # noqa: E402,F401  (launching: for the scripts)


def start(backend: str, port) -> tuple:
    """(jax, rank, size) once jax.distributed is up over `backend` ("mpi" or "gloo";
    gloo's coordinator listens on 127.0.0.1:`port`)."""
    return _backends.start(backend, f"127.0.0.1:{port}")

"""The package's table of launcher variables (mpi_collectives/launchers.py)
and its jax version differences (mpi_collectives/jax_compat.py), for test programs that run JAX over MPI without importing the package:
importing it sets MPITRAMPOLINE_LIB (and so loads MPI, which a gloo run must
not pay for) and registers its cluster environment with JAX. launchers.py
and jax_compat.py import only the standard library, so they are loaded by their paths."""
import importlib.util
import os


def _load(name):
    package = importlib.util.find_spec("mpi_collectives")  # (finds it without importing it)
    if package is not None and package.submodule_search_locations:
        folder = list(package.submodule_search_locations)[0]
    else:  # a checkout without the package installed
        folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "mpi_collectives")
    spec = importlib.util.spec_from_file_location(f"mpi_collectives_{name}", os.path.join(folder, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


launchers = _load("launchers")
launcher_rank_size = launchers.launcher_rank_size
jax_compat = _load("jax_compat")

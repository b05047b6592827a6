"""The package's table of launcher variables (mpi_collectives/launchers.py)
and its jax version differences (mpi_collectives/jax_compat.py), for test
programs that run JAX over MPI without importing the package:
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


def start_gloo():
    """jax.distributed over JAX's gloo, set up as a gloo user would: rank and
    size from the launcher, the coordinator at 127.0.0.1:MPI_COLLECTIVES_TEST_PORT.
    Returns (jax, rank, size)."""
    import jax
    rank, size = launcher_rank_size()
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{os.environ['MPI_COLLECTIVES_TEST_PORT']}", size, rank)
    return jax, rank, size


def start(backend):
    """(jax, rank, size): over gloo as start_gloo() does, or over MPI through
    mpi_collectives.initialize() (imported only then)."""
    if backend == "gloo":
        return start_gloo()
    import mpi_collectives
    info = mpi_collectives.initialize()
    import jax
    return jax, info.rank, info.size

"""mpi-collectives' hook into JAX's plugin discovery.

Registered under the `jax_plugins` entry-point group (pyproject.toml): JAX
imports this module in every program, when its backends start
(jax._src.xla_bridge.discover_pjrt_plugins), and calls initialize(). It does
nothing unless the program asked for JAX's CPU collectives over MPI; then
mpi_collectives.integration.plain_programs gives a program that set JAX up itself what
mpi_collectives.initialize() would have (float16 rules, several CPU devices
per process). In a program that imported mpi_collectives, it also tells each
rank when JAX starts as one process of one under a launcher of several ranks
(initialize() forgotten: MPI_COLLECTIVES_NOT_INITIALIZED). And it notes which import, if any,
was under way when JAX started its backend (`import netket` starts it): initialize() called after
that names the import in its error (started_by_import).

A module of its own, outside the package, so that a program that does not
use MPI pays for one environment lookup and one option read, not for
importing mpi_collectives (about 5 ms).
"""
import os
import sys


def _collectives_over_mpi() -> bool:
    jax = sys.modules.get("jax")
    try:
        if jax is not None:
            return jax.config._read("jax_cpu_collectives_implementation") == "mpi"
    except Exception:  # a jax whose config reads differently: its environment variable says the same
        pass
    return os.environ.get("JAX_CPU_COLLECTIVES_IMPLEMENTATION", "").lower() == "mpi"


# The module whose import was under way when JAX started its backends (the outermost one: what the
# program itself imported), or None where the program's own code started them.
started_by_import = None


def module_being_imported():
    """The outermost module whose import is under way on this thread, or None: what the program's
    own code imported, however deep the import that called us (a frame walk, microseconds)."""
    name, frame = None, sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        # (importlib._bootstrap: "<frozen importlib._bootstrap>", or its file where modules are not frozen)
        if code.co_name == "_find_and_load" and "importlib" in code.co_filename and "_bootstrap" in code.co_filename:
            name = frame.f_locals.get("name", name)
        frame = frame.f_back
    return name


def initialize() -> None:
    global started_by_import
    started_by_import = module_being_imported()
    if "mpi_collectives" in sys.modules:  # a program of ours: did it join its ranks? (no import cost otherwise)
        from mpi_collectives.integration import plain_programs
        plain_programs.check_joined(module_being_imported)
    if _collectives_over_mpi():
        from mpi_collectives.integration import plain_programs
        plain_programs.at_backend_start()

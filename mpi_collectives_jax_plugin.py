"""mpi-collectives' hook into JAX's plugin discovery.

Registered under the `jax_plugins` entry-point group (pyproject.toml): JAX
imports this module in every program, when its backends start
(jax._src.xla_bridge.discover_pjrt_plugins), and calls initialize(). It does
nothing unless the program asked for JAX's CPU collectives over MPI; then
mpi_collectives.integration.plain_programs gives a program that set JAX up itself what
mpi_collectives.initialize() would have (float16 rules, several CPU devices
per process). In a program that imported mpi_collectives, it also tells each
rank when JAX starts as one process of one under a launcher of several ranks
(initialize() forgotten: MPI_COLLECTIVES_NOT_INITIALIZED).

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


def initialize() -> None:
    if "mpi_collectives" in sys.modules:  # a program of ours: did it join its ranks? (no import cost otherwise)
        from mpi_collectives.integration import plain_programs
        plain_programs.check_joined()
    if _collectives_over_mpi():
        from mpi_collectives.integration import plain_programs
        plain_programs.at_backend_start()

"""mpi-collectives: JAX's own CPU collectives over whatever MPI the cluster has.

    import mpi_collectives
    mpi_collectives.initialize()      # on every rank, launched by mpiexec/mpirun/srun
    import jax                        # psum, all_gather, ... now run over MPI

The native layer (mpi_collectives._mpiabi) is the MPIABI wrapper that jaxlib's
bundled MPItrampoline loads through MPITRAMPOLINE_LIB; importing this package
sets that variable (jaxlib reads it when `import jax` first loads it).

The package's floors, top first; a module imports only from its own floor or
below (scripts/package_layers.py checks; docs/design.md has the map):

    __main__.py    the command line
    tools/         doctor, the bench, launching jobs: the command line's, the
                   scripts' and the tests'; a user's program never loads it
    __init__.py    this public API
    integration/   JAX over MPI: initialize() (jax_setup.py), programs that
                   start JAX themselves, the cluster environment, prepare(),
                   narrow dtypes, GPUs per rank, preemption, jax versions
    services/      the job's services: coordinator and meeting, the watchers
                   (peers, stall, liveness, exit hooks), tunings, host helpers
    base/          the door to the native layer (mpi.py over _mpiabi),
                   settings, errors, log, ending a job, launchers, versions
"""
import os
import sys

from .base._paths import libpath, publish_search_prefixes
from .base.errors import error_line as _error_line
from .base.log import line as _line

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

from .integration import cluster as _cluster  # noqa: E402

_cluster.register()

from .integration.communicators import prepare  # noqa: E402
from .integration.jax_setup import Info, InitializeError, initialize  # noqa: E402
from .integration.phases import PhaseFailed, phase  # noqa: E402
from .services.host import (  # noqa: E402
    allreduce, assert_equal, barrier, broadcast_one_to_all, process_allgather, sync_global_devices)

def _which_rank() -> str:
    """" (rank R/N on HOST)" where a launcher started several ranks: one rank's environment may differ
    from the others', and the line must say whose it was (issue 81); "" for a process alone."""
    import socket
    from .base import launchers
    try:
        if launchers.started_by()[1] > 1:
            return f" ({launchers.where()} on {socket.gethostname()})"
    except Exception:  # (the line itself must come out whatever happens here)
        pass
    return ""


def _one_line_for_set_up_errors() -> None:
    """An InitializeError nobody caught is its sentence alone on stderr (exit status 1), not a
    traceback around it on every rank: the sentence names the cause and the fix, the traceback only
    where in the package it was found; it ends the job, so it begins `mpi-collectives: error:`. A
    program that catches InitializeError still can; any other exception goes to the hook there was
    before."""
    previous = sys.excepthook

    def hook(kind, value, traceback):
        if isinstance(value, InitializeError):
            _line(_error_line(str(value) or kind.__name__) + _which_rank())
            return
        previous(kind, value, traceback)
    sys.excepthook = hook


_one_line_for_set_up_errors()

__all__ = ["initialize", "prepare", "phase", "PhaseFailed", "Info", "InitializeError", "libpath",
           "broadcast_one_to_all",
           "process_allgather", "sync_global_devices", "assert_equal", "allreduce", "barrier",
           "__version__"]

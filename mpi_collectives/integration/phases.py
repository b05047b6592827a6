"""`with mpi_collectives.phase("eval"):` -- a stretch of a program that every rank ends together.

A rank that leaves a phase early (an exception before a collective its peers
wait in) would otherwise leave them waiting, or pair their collective with
its next one: a wrong number, or a hang. Inside a phase, a rank waiting in a
collective for a rank that has already left the phase gives the wait up (the
collective raises, naming that rank), and at the end of the phase every rank
learns every rank's outcome: where the phase raised on any rank, it raises
on every rank (the rank's own exception where it was raised, PhaseFailed
naming the others' elsewhere), and the next phase starts with every
communicator whole. The pytest plugin makes each stage of a test a phase
(docs/testing.md).
"""
import contextlib

from ..base.ending import end_job
from ..base.errors import InitializeError
from ..services import exit_hooks
from ..services import phases as _phases

_PHASES = None
_PREPARED = False


class PhaseFailed(RuntimeError):
    """A phase raised on another rank: every rank leaves it with an exception."""


def phases(mpi_only: bool = False) -> _phases.Phases:
    """The process's phases, started on first use: collective, so every rank's first phase (or the
    pytest plugin's start) comes at the same point of the program. Needs initialize() (its devices
    are prepared first: prepare_devices); `mpi_only`: MPI's start is enough (the pytest plugin's, for
    a suite that has not imported JAX yet; it prepares the devices when JAX's part of its start runs)."""
    global _PHASES
    if _PHASES is None:
        from . import jax_setup

        started = jax_setup.mpi_started() if mpi_only else jax_setup.info()
        if started is None:
            raise InitializeError("mpi-collectives: phase() needs MPI: call mpi_collectives.initialize() first, "
                                  "on every rank")
        prepare_devices()
        _PHASES = _phases.Phases(started.rank, started.size)
        _PHASES.watch(lambda line: end_job(f"{_PHASES.name} cannot finish: {line}, a wait that cannot be given "
                                           f"up. Fix: make every rank reach the same collectives in each phase"))
        exit_hooks.before_atexit(_leave_at_exit)
    return _PHASES


def _leave_at_exit() -> None:
    """A program whose Python ends inside a phase (sys.exit there, an exception that ends the main
    thread) leaves it: its peers are told (services/phases.py's invariant), not left waiting."""
    if _PHASES is not None and _PHASES.is_open():
        _PHASES.leave(f"rank {_PHASES.rank} left the program in phase {_PHASES.name!r}: its Python exited there")


def current() -> "_phases.Phases | None":
    """The process's phases if they have started, without starting them."""
    return _PHASES


def prepare_devices() -> None:
    """Made on every rank at once, once, where initialize() has run: what no phase can give up a wait
    in. JAX's backend (its start exchanges the devices across processes through jax.distributed) and
    the communicator of every device (creating it is a split of MPI_COMM_WORLD, and XLA keeps whatever
    the split returns: native/src/services/phases.c). A phase whose first collective is over the whole
    mesh, failing on one rank before it, then fails; a sub-mesh's first collective is a split. The
    pytest plugin calls it when JAX's part of its start runs (at the suite's first `import jax`)."""
    global _PREPARED
    from . import jax_setup

    if _PREPARED or jax_setup.info() is None:
        return
    _PREPARED = True
    import jax
    import numpy as np

    from .communicators import prepare

    prepare(jax.sharding.Mesh(np.array(jax.devices()), ("devices",)))


@contextlib.contextmanager
def phase(name: str, timeout: float = 0):
    """Mark a phase of the program, on every rank, in the same order everywhere. `timeout` (seconds,
    0 for none) limits any one wait in a collective inside it: past it the collective raises.
    Raises on every rank when the phase raised on any."""
    p = phases()
    p.begin(name, timeout)
    failure = None
    try:
        yield
    except BaseException as e:
        failure = e
    text = f"{type(failure).__name__}: {failure}" if failure is not None else ""
    try:
        vote = p.end(_phases.FAILED if failure is not None else _phases.PASSED, text)
    except _phases.Stuck as e:
        end_job(f"phase {name!r} cannot finish: {e}, a wait that cannot be given up. Fix: make every rank reach "
                f"the same collectives in each phase")
    failed = vote.ranks(_phases.FAILED)
    first = next((r for r in failed if not vote.given[r]), failed[0] if failed else None)
    if failure is not None and (first == p.rank or not vote.given[p.rank]):
        raise failure  # this rank's own failure
    if failed:  # another rank's, or a wait this rank gave up because of it
        own = [r for r in failed if not vote.given[r]] or failed  # the ranks that failed of themselves
        raise PhaseFailed(f"mpi-collectives: phase {name!r} failed on rank{'s' if len(own) > 1 else ''} "
                          f"{', '.join(map(str, own))} (rank {first}: {vote.texts[first]}); it ends with an "
                          f"exception on every rank") from failure

"""Saving on preemption, as over gloo: a training loop that asks JAX's
preemption sync point each step (`multihost_utils.reached_preemption_sync_point`,
which Orbax's CheckpointManager calls) gets there after a SIGTERM, on every
rank at the same step, saves and ends.

The package's SIGTERM handler ends a rank at once (JAX's own only notes the
signal, and a job asked to stop ran on). For a program that asks the sync
point, that would lose the checkpoint a Slurm user asked for with
`--signal=TERM@120`. So the first time the program asks, the native handler
is told to pass the signal on to JAX's notifier instead and to end the rank
only if it is still running MPI_COLLECTIVES_PREEMPTION_GRACE seconds later
(native/src/services/ending/stop_signals.c).

How we see the program ask: JAX's sync manager (a C++ object that cannot be
patched) is reached through `jax._src.distributed.global_state`, which every
caller reads at each call; it is replaced there by a proxy that notes the
first call and forwards everything.
"""
from ..base import mpi
from ..base.log import log


class _SyncPointWatch:
    def __init__(self, manager, rank: int, size: int, grace: int):
        self._manager, self._rank, self._size, self._grace = manager, rank, size, grace
        self._asked = False

    def reached_sync_point(self, step_id):
        if not self._asked:
            self._asked = True
            mpi.preemption_grace(self._rank, self._size, self._grace)
            log(f"the program asks JAX's preemption sync point: SIGTERM gives it {self._grace} s to save")
        return self._manager.reached_sync_point(step_id)

    def __getattr__(self, name):
        return getattr(self._manager, name)


def watch_sync_point(rank: int, size: int, grace: int) -> None:
    """Once jax.distributed is up and the SIGTERM handler is ours: arm the grace for the first
    time the program asks the sync point (nothing when grace is 0 or JAX's preemption service is
    off)."""
    if grace <= 0:
        return
    try:
        from jax._src import distributed
    except ImportError:
        return
    state = distributed.global_state
    manager = getattr(state, "preemption_sync_manager", None)
    if manager is None or isinstance(manager, _SyncPointWatch):
        return
    state.preemption_sync_manager = _SyncPointWatch(manager, rank, size, grace)

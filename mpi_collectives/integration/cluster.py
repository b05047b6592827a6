"""A JAX cluster environment, so that a plain `jax.distributed.initialize()`
works under mpiexec once this package is imported.

JAX finds cluster environments by subclassing jax._src.clusters.ClusterEnv;
we subclass it when JAX loads that module (not before: importing this
package must not import jax, which would read MPITRAMPOLINE_LIB too early).
JAX's own environments (Slurm, Open MPI, ...) are registered first and keep
precedence where they apply; ours serves the launchers JAX does not know
(MPICH and Intel MPI's Hydra, other PMI launchers), or any launcher with
jax.distributed.initialize(cluster_detection_method="mpi_collectives").
"""
import os

from ..base import import_hooks, launchers


def _start_up(overrides=None):
    """initialize()'s own start-up (jax_setup.start_up), once, from whichever
    of JAX's questions comes first: a program that calls
    jax.distributed.initialize() itself gets the same checks, tunings,
    float16 rules and device count as one that calls initialize(). A user who
    gives JAX the coordinator's address is asked only for rank and size."""
    from . import jax_setup
    from ..base import ending, settings
    with ending.launch_ends_if_start_up_fails():
        return jax_setup.start_up(settings.read(**(overrides or {})), collectives=None)


def _make_cluster_env(clusters):
    class MpiCollectivesCluster(clusters.ClusterEnv):
        name = "mpi_collectives"
        opt_in_only_method = False

        @classmethod
        def is_env_present(cls) -> bool:
            from ..base import mpi
            return launchers.launcher() is not None and mpi.family() != "none"

        @classmethod
        def get_coordinator_address(cls, timeout_secs=None, override_coordinator_port=None) -> str:
            # (jax before 0.8.1 passes only timeout_secs)
            overrides = {"timeout": timeout_secs} if timeout_secs else {}
            if override_coordinator_port:
                overrides["port"] = int(override_coordinator_port)
            choice = _start_up(overrides).choice
            if choice.bind and not os.environ.get("JAX_COORDINATOR_BIND_ADDRESS") and _start_up().rank == 0:
                # jax.distributed.initialize reads it after asking us, when not given the argument.
                os.environ["JAX_COORDINATOR_BIND_ADDRESS"] = choice.bind
            return choice.address

        @classmethod
        def get_process_count(cls) -> int:
            return _start_up().size

        @classmethod
        def get_process_id(cls) -> int:
            return _start_up().rank

        @classmethod
        def get_local_process_id(cls):
            # JAX turns this into local_device_ids=[it] (GPU nodes): the GPU gpus.py chose, when one.
            # JAX asks it of every program that leaves local_device_ids unset, its own arguments
            # (or gloo) included: only a start-up this environment already ran may answer, never start one.
            from . import jax_setup
            started = jax_setup.started()
            ids = started.gpu_ids if started is not None else None
            return ids[0] if ids is not None and len(ids) == 1 else None

    return MpiCollectivesCluster


def register() -> None:
    """Our environment, added right after JAX has imported jax._src.clusters."""
    import_hooks.after_import("jax._src.clusters", _make_cluster_env, key="mpi_collectives cluster environment")

"""What differs between the jax versions we support (0.4.27 to the newest):
the one place that knows, so that the rest of the package reads as if there
were one jax.

- jax accepts jax_cpu_collectives_implementation="mpi" from 0.4.27 (0.4.26
  raises "Unrecognized config option").
- jaxlib's bundled MPItrampoline lives in xla_extension.so up to 0.5 and in
  libjax_common.so from 0.6; both reference the same MPIABI names.
- shard_map is jax.shard_map from 0.6, jax.experimental.shard_map.shard_map before.
- Several CPU devices per process work over MPI from jax 0.6 (LOCAL_DEVICES_JAX).
- The number of CPU devices per process is jax_num_cpu_devices (JAX_NUM_CPU_DEVICES)
  from 0.4.31; before, and when that is unset, XLA_FLAGS'
  --xla_force_host_platform_device_count.
- JAX shuts its distributed client down at exit through jax._src.api.clean_up (0.10)
  or jax._src.distributed.shutdown registered by initialize() (0.4.27).
"""
import os
import re

MINIMUM_JAX = (0, 4, 27)
# Several CPU devices per process over MPI: with jax 0.4.27 one of a process's
# two devices did not ask for its communicator of a new group (its XLA caches
# them in a map the device threads change without a lock); 0.6.2 and 0.10.2
# (a locked clique cache) run every case of tests/jax_over_mpi/test_local_devices.py.
LOCAL_DEVICES_JAX = (0, 6, 0)
# The libraries in jaxlib's folder that may hold MPItrampoline, newest layout first.
_TRAMPOLINE_HOSTS = ("libjax_common.so", "xla_extension.so")


def version_tuple(text: str) -> tuple:
    """(0, 4, 27) from "0.4.27", "0.4.27.dev20240501", "0.9.0.1"."""
    return tuple(int(p) for p in re.findall(r"\d+", text.split("+")[0])[:3])


def installed_jax():
    """The installed jax's version text, or None (without importing jax)."""
    import importlib.metadata
    try:
        return importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        return None


def too_old_message(version: str) -> str:
    need = ".".join(map(str, MINIMUM_JAX))
    return (f"mpi-collectives: jax {version} is too old: JAX's collectives over MPI need jax {need} or newer "
            f"(the first that accepts jax_cpu_collectives_implementation='mpi'). Fix: pip install 'jax>={need}' "
            f"'jaxlib>={need}'.")


def jaxlib_trampoline_library() -> str:
    """The jaxlib library that holds MPItrampoline (and so every MPIABI name jaxlib asks for)."""
    import jaxlib
    folder = os.path.dirname(jaxlib.__file__)
    for name in _TRAMPOLINE_HOSTS:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"no {' or '.join(_TRAMPOLINE_HOSTS)} in {folder}: is this jaxlib {MINIMUM_JAX} or newer?")


def shard_map():
    """jax.shard_map, wherever this jax keeps it. The old one is given
    check_rep=False unless told otherwise: it has no replication rule for
    pmax/pmin and refuses them without it."""
    import functools

    import jax
    if hasattr(jax, "shard_map"):
        return jax.shard_map
    from jax.experimental.shard_map import shard_map as old

    @functools.wraps(old)
    def shard_map_(f, **kwargs):
        kwargs.pop("check_vma", None)
        kwargs.setdefault("check_rep", False)
        return old(f, **kwargs)
    return shard_map_


def process_local_array(sharding, local):
    """A global array from each process's rows of the leading axis, which its
    devices hold (jax.make_array_from_process_local_data from jax 0.4.31; made
    with make_array_from_callback before)."""
    import jax
    if hasattr(jax, "make_array_from_process_local_data"):
        return jax.make_array_from_process_local_data(sharding, local)
    global_shape = (local.shape[0] * jax.process_count(),) + tuple(local.shape[1:])
    indices = sharding.addressable_devices_indices_map(global_shape)
    first = min((index[0].start or 0) for index in indices.values()) if indices else 0

    def block(index):
        rows = index[0]
        stop = global_shape[0] if rows.stop is None else rows.stop
        return local[(rows.start or 0) - first:stop - first]

    return jax.make_array_from_callback(global_shape, sharding, block)


def collectives_implementation() -> str:
    """The value of jax_cpu_collectives_implementation in this process."""
    import jax
    return jax.config._read("jax_cpu_collectives_implementation")


def configured_cpu_devices() -> int:
    """The CPU devices per process JAX's settings ask for, read without creating
    the backend (which must come after initialize())."""
    import jax
    try:
        wanted = jax.config._read("jax_num_cpu_devices")
    except (AttributeError, KeyError):
        wanted = -1
    if wanted is not None and int(wanted) >= 0:
        return max(int(wanted), 1)
    found = re.findall(r"--xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", ""))
    return max(int(found[-1]), 1) if found else 1


# jax.distributed.initialize warns, on every rank, that the start "may hang" when any variable's
# name holds "_proxy" (HTTP proxies can catch its gRPC to the coordinator). Intel MPI's Hydra sets
# HYDRA_BSTRAP_PROXY_ID in every rank: the id of its process manager's proxy, not a network
# proxy. Where a launcher's variables are the only ones, the check is off; a real proxy variable
# beside them keeps it (and its warning) on.
LAUNCHER_PREFIXES = ("HYDRA_", "PMI_", "PMIX_", "I_MPI_", "OMPI_", "PRTE_", "SLURM_")


def quiet_launchers_proxy_warning(environ=None) -> bool:
    """Turns JAX's proxy check off where only launcher variables name a proxy; True where it did."""
    names = [k for k in (os.environ if environ is None else environ) if "_proxy" in k.lower()]
    if not names or not all(k.startswith(LAUNCHER_PREFIXES) for k in names):
        return False
    import jax
    try:
        jax.config.update("jax_check_proxy_envs", False)
    except (AttributeError, KeyError):  # a jax without the check
        return False
    return True


def forget_jax_exit_in_a_forked_child() -> None:
    """In a process forked from a rank (multiprocessing's fork, os.fork), after the fork: take JAX's
    exit handlers that speak for the rank off atexit. The child's exit ran them: its distributed
    client told the coordinator that task 0 was shutting down, and JAX then ended every rank ("the
    JAX distributed service detected fatal errors"; issue 81, a 2-rank job whose rank 0 forked a
    child that called sys.exit). The child's own handlers, registered after the fork, stay."""
    import atexit
    import sys
    for module, name in (("jax._src.api", "clean_up"), ("jax._src.distributed", "shutdown")):
        handler = getattr(sys.modules.get(module), name, None)
        if handler is not None:
            atexit.unregister(handler)

"""What the plugin's scenario suites share: a psum over every device of the job, computed by JAX
over MPI, and its exact value from one process."""
import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_map(f, mesh, in_specs, out_specs):
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
    from jax.experimental.shard_map import shard_map as old  # jax before 0.7
    return old(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


def mesh():
    return jax.sharding.Mesh(np.array(jax.devices()), ("d",))


def local_array(value: float, n: int):
    return jax.make_array_from_process_local_data(NamedSharding(mesh(), P("d")),
                                                  np.full((jax.local_device_count(), n), value, np.float32))


def psum_of(value: float, n: int = 4) -> float:
    """Every device contributes `value` n times; the psum's first element (value * devices)."""
    f = jax.jit(shard_map(lambda a: jax.lax.psum(a, "d"), mesh(), P("d"), P()))
    return float(np.asarray(f(local_array(value, n)).addressable_data(0))[0, 0])


def ppermute_of(value: float, n: int = 4):
    """Each device's block to the next device's (point-to-point transfers, no check block)."""
    shift = [(i, (i + 1) % jax.device_count()) for i in range(jax.device_count())]
    f = jax.jit(shard_map(lambda a: jax.lax.ppermute(a, "d", shift), mesh(), P("d"), P("d")))
    return np.asarray(f(local_array(value, n)).addressable_data(0))


def expected(value: float) -> float:
    return value * jax.device_count()


def last_rank() -> bool:
    return jax.process_index() == jax.process_count() - 1

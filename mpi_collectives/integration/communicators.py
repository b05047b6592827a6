"""prepare(mesh): create a mesh's MPI communicators up front, in one order on every process."""
import itertools

import numpy as np


def prepare(mesh) -> None:
    """Create the MPI communicators of every group of devices `mesh` can use
    (each subset of its axes), in one fixed order, from this thread.

    Not needed when every process runs the same jitted programs in the same
    order (the usual SPMD program). Call it, on every process, when processes
    may first use a mesh's axes in different orders (rank-dependent control
    flow, collectives dispatched from several threads): XLA creates each
    group's communicator on first use, and creation must happen in the same
    order everywhere.
    """
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    from .jax_compat import shard_map

    names = tuple(mesh.axis_names)
    # One element per device, made where each device lives (device_put of a
    # host array to a multi-process sharding is not in every supported jax).
    x = jax.make_array_from_callback(mesh.devices.shape, NamedSharding(mesh, P(*names)),
                                     lambda index: np.zeros((1,) * len(names), np.int32))
    for k in range(1, len(names) + 1):
        for axes in itertools.combinations(names, k):
            f = jax.jit(shard_map()(lambda v, axes=axes: jax.lax.psum(v, axes), mesh=mesh,
                                    in_specs=P(*names), out_specs=P(*names)))
            f(x).block_until_ready()

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

    names = tuple(mesh.axis_names)
    x = jax.device_put(np.zeros(mesh.devices.shape, np.int32), NamedSharding(mesh, P(*names)))
    for k in range(1, len(names) + 1):
        for axes in itertools.combinations(names, k):
            f = jax.jit(jax.shard_map(lambda v, axes=axes: jax.lax.psum(v, axes), mesh=mesh,
                                      in_specs=P(*names), out_specs=P(*names)))
            f(x).block_until_ready()

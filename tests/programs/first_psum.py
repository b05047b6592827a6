"""The smallest JAX program whose collective goes over MPI: one psum.

Run as a script, or import `first_psum()` (tests/programs/jax_with_mpi4py.py).
"""
import os

import numpy as np

from launcher_env import jax_compat, launcher_rank_size


def first_psum(n: int = 8) -> int:
    """jax.distributed from the launcher's rank/size, then one exact psum; returns the rank."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    rank, size = launcher_rank_size()
    # (jax before 0.4.3x reads this option only from its config, not from the environment)
    jax.config.update("jax_cpu_collectives_implementation", os.environ["JAX_CPU_COLLECTIVES_IMPLEMENTATION"])
    # (a test whose ranks fail on purpose shortens JAX's own wait for the others)
    jax.distributed.initialize(f"127.0.0.1:{os.environ['MPI_COLLECTIVES_TEST_PORT']}", size, rank,
                               initialization_timeout=int(os.environ.get("FIRST_PSUM_INIT_TIMEOUT", "300")))
    mesh = Mesh(np.array(jax.devices()), ("x",))
    f = jax.jit(jax_compat.shard_map()(lambda x: jax.lax.psum(x, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
    x = jax_compat.process_local_array(NamedSharding(mesh, P("x")), np.full((1, n), rank + 1, np.float32))
    got = np.asarray(f(x).addressable_data(0))
    assert (got == size * (size + 1) / 2).all(), got
    return rank


if __name__ == "__main__":
    print(f"PASS psum rank {first_psum()}", flush=True)

"""JAX's own collectives over MPI, across every rank the launcher started, on
one node or many: psum, pmax, all_gather and ppermute over 1 MiB per rank,
each result checked exactly.

    mpiexec -n 4 python examples/hello_collectives.py          # one node
    srun -N 2 --ntasks-per-node=1 --cpus-per-task=32 --mpi=pmi2 python examples/hello_collectives.py   # a Slurm job:
                                    # one rank a node with all its cores (docs/layout.md)

(scripts/run_example.sh runs it over the bundled MPICH wheel.)
mpi_collectives.initialize() takes rank and size from MPI and has the ranks
agree on jax.distributed's coordinator; then every JAX collective below runs
over MPI.
"""
import socket
import time

import numpy as np

import mpi_collectives

info = mpi_collectives.initialize()  # on every rank, before the first JAX computation

import jax  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

rank, size = info.rank, info.size
mesh = Mesh(np.array(jax.devices()), ("ranks",))
sharded = NamedSharding(mesh, P("ranks"))


def global_array(local):
    return jax.make_array_from_process_local_data(sharded, local[None])


def collective(fn, out_specs=P()):
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=P("ranks"), out_specs=out_specs))


n = 1 << 18  # 1 MiB of float32 per rank
x = global_array(np.arange(n, dtype=np.float32) + rank)
everyone = np.arange(size, dtype=np.float32)

checks = {
    "psum": (collective(lambda v: jax.lax.psum(v, "ranks")),
             lambda: np.arange(n, dtype=np.float32) * size + everyone.sum()),
    "pmax": (collective(lambda v: jax.lax.pmax(v, "ranks")),
             lambda: np.arange(n, dtype=np.float32) + size - 1),
    "all_gather": (collective(lambda v: jax.lax.all_gather(v[0, :4], "ranks"), out_specs=P("ranks")),
                   lambda: np.stack([np.arange(4, dtype=np.float32) + r for r in range(size)])),
    "ppermute": (collective(lambda v: jax.lax.ppermute(v, "ranks", [(i, (i + 1) % size) for i in range(size)]),
                            out_specs=P("ranks")),
                 lambda: (np.arange(n, dtype=np.float32) + (rank - 1) % size)[None]),
}
for name, (fn, expected) in checks.items():
    out = fn(x)
    out.block_until_ready()
    times = []
    for _ in range(20):
        t = time.perf_counter()
        fn(x).block_until_ready()
        times.append(time.perf_counter() - t)
    got = np.asarray(out.addressable_data(0))
    ok = np.array_equal(got.reshape(expected().shape), expected())
    if rank == 0 or not ok:
        print(f"[rank {rank}/{size} on {socket.gethostname()}] {name:10s} {'ok ' if ok else 'WRONG'} "
              f"median {np.median(times) * 1e3:.3f} ms", flush=True)
    if not ok:
        raise SystemExit(f"rank {rank}: {name} gave a wrong result")

if rank == 0:
    print(f"collectives ran over {info.library} ({info.family} ABI) through {info.wrapper}")
print(f"[rank {rank}/{size}] done", flush=True)

"""An existing script that sets JAX up itself, unchanged, over MPI.

It calls jax.distributed.initialize() with its own coordinator and rank, as
many scripts written for gloo do, and never imports mpi_collectives: the job
script exports two variables and the installed package does the rest (its
JAX plugin hook; docs/installation.md, "Import order"). Its
coordinator address is 127.0.0.1, so it runs on one node only; the headline
example, hello_collectives.py, uses mpi_collectives.initialize() and runs
on one node or many.

    export MPITRAMPOLINE_LIB=$(python -m mpi_collectives libpath)
    export JAX_CPU_COLLECTIVES_IMPLEMENTATION=mpi
    HELLO_COORDINATOR_PORT=29500 mpiexec -n 4 python examples/existing_script.py
"""
import os
import socket
import time

import numpy as np
import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

# Rank and size from the launcher (MPICH/Intel MPI hydra, Open MPI, Slurm), as an
# existing script reads them (mpi_collectives.base.launchers.launcher_rank_size() does the same).
env = os.environ
rank = int(env.get("PMI_RANK") or env.get("OMPI_COMM_WORLD_RANK") or env.get("SLURM_PROCID") or 0)
size = int(env.get("PMI_SIZE") or env.get("OMPI_COMM_WORLD_SIZE") or env.get("SLURM_NTASKS") or 1)
port = env.get("HELLO_COORDINATOR_PORT", "29500")  # this example's own variable
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=size, process_id=rank)

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

if rank == 0:  # (without the two variables of the docstring JAX uses its default, gloo)
    print(f"collectives ran over {jax.config.jax_cpu_collectives_implementation}")
print(f"[rank {rank}/{size}] done", flush=True)

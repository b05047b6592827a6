"""initialize() under a launcher, one CASE per run: python init_cases.py CASE.

Prints "PASS <case> rank R" on success; error cases are judged by the test
from the exit status and stderr.
"""
import os
import sys

case = sys.argv[1]

if case == "jax-too-early":
    import jax  # noqa: F401  (before mpi_collectives, with MPITRAMPOLINE_LIB unset)

import mpi_collectives  # noqa: E402
from mpi_collectives.base.launchers import launcher_rank_size  # noqa: E402

rank_env = launcher_rank_size()[0]

if case == "backend-exists":
    import jax
    jax.numpy.zeros(1).block_until_ready()  # JAX's backend is made here, without MPI

if case == "versions-differ" and rank_env == 1:
    from mpi_collectives.base import versions
    versions.installed = lambda package: "0.0.0-other"

if case == "choose-fails" and rank_env == 0:  # something unforeseen on rank 0 during the meeting
    from mpi_collectives.services import coordinator

    def broken(*args, **kwargs):
        raise OSError("no addresses at all")
    coordinator.on_one_host = broken

if case == "hello-fails" and rank_env == 1:  # something unforeseen on rank 1 during the meeting
    from mpi_collectives.services import meeting

    def broken():
        raise RuntimeError("cannot say hello")
    meeting.hello = broken

if case in ("missing-rank-mpi4py", "mpi4py-before"):
    from mpi4py import MPI  # noqa: F401  (MPI is up on every rank; only initialize() is missing)

if case.startswith("missing-rank") and rank_env == int(os.environ.get("MISSING_RANK", "1")):
    import time
    time.sleep(60)  # never calls initialize(); the others must give up and say who is missing
    sys.exit(0)

info = mpi_collectives.initialize()
assert mpi_collectives.initialize() is info, "a second call must return the same Info"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from mpi_collectives.integration.jax_compat import (  # noqa: E402
    collectives_implementation, process_local_array, shard_map)

assert (jax.process_index(), jax.process_count()) == (info.rank, info.size)
assert collectives_implementation() == "mpi"
mesh = Mesh(np.array(jax.devices()), ("x",))
if case == "prepare":  # the mesh's communicators made up front: then used by the psum below
    mpi_collectives.prepare(Mesh(np.array(jax.devices()).reshape(info.size, 1), ("x", "y")))
    mpi_collectives.prepare(mesh)
if case == "watcher-fails" and info.rank == 1:  # the watch's own error, as seen once in a NetKet run
    import time
    from mpi_collectives.services import peers

    def broken():
        raise AttributeError("'NoneType' object has no attribute 'f_code'")
    peers._main_thread_making_backend = broken
    time.sleep(1.5)  # the watch looks every 0.5 s
f = jax.jit(shard_map()(lambda x: jax.lax.psum(x, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
x = process_local_array(NamedSharding(mesh, P("x")),
                                           np.full((1, 1000), info.rank + 1, np.int32))
got = np.asarray(f(x).addressable_data(0))
assert (got == info.size * (info.size + 1) // 2).all(), got

if case in ("mpi4py-after", "mpi4py-before"):
    from mpi4py import MPI
    assert MPI.COMM_WORLD.allreduce(info.rank) == info.size * (info.size - 1) // 2

if case == "rank-raises" and info.rank == 1:
    raise ValueError("something went wrong on this rank")
if case == "rank-raises":
    f(x).block_until_ready()  # the others wait for rank 1 in the next collective

# Each thread's CPU set (MPI_COLLECTIVES_BIND_CPUS=2 moves only the threads that called MPI).
sets = {}
for task in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{task}/status") as status:
        allowed = next(line.split()[1] for line in status if line.startswith("Cpus_allowed_list"))
    sets[allowed] = sets.get(allowed, 0) + 1
from mpi_collectives.base import mpi  # noqa: E402
print(f"THREADS rank {info.rank} moved {mpi.callers_moved()} sets {sets}", flush=True)
print(f"TUNINGS rank {info.rank} cpus {sorted(os.sched_getaffinity(0))} | " + " | ".join(info.tunings), flush=True)
print(f"PASS {case} rank {info.rank} of {info.size} coordinator {info.coordinator} "
      f"family {info.family} thread {info.thread_level}", flush=True)

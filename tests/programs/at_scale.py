"""Every promise at many ranks (issue 82): run at 16 ranks in CI, at 32-64 by hand
(scripts/scale_checks.sh), oversubscribed on a small machine.

    at_scale.py [exact|stall|kill|sigterm]

exact (always first): every collective JAX runs (psum, all_gather, psum_scatter,
ppermute, all_to_all) over a 1-D mesh of every rank, and psums along both axes of
a 2-D mesh (a communicator per axis group), each checked exactly against NumPy on
every rank; through the node path's round where the ranks share a node: each rank
read P - 1 slots a psum (the wrapper's counts). Prints "EXACT rank R/N". Across hosts
(scripts/scale_hosts.py --checks) the same program runs exact over the library's communicators.

Then, by the argument:
- stall: ranks 3-5 stay in Python (away_from_the_collective) for STALL_AWAY
  seconds (default 8) while the others wait in a psum: the stall report names
  them as one range; the job then finishes exact ("PASS at_scale rank R").
- kill: rank N-2 SIGKILLs itself while the others wait in a psum: the peer
  watch names it and the job ends non-zero.
- sigterm: every rank prints "READY rank R" and waits in a psum that rank 0
  never joins; the test sends SIGTERM to the launcher, and every rank ends.
"""
import os
import signal
import socket
import sys
import time

import numpy as np

import mpi_collectives

mode = sys.argv[1] if len(sys.argv) > 1 else "exact"
info = mpi_collectives.initialize()
import jax  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from launcher_env import jax_compat  # noqa: E402
from mpi_collectives.base import mpi  # noqa: E402

rank, size = info.rank, info.size
shard_map = jax_compat.shard_map()


def inputs(count):
    return [((np.arange(count) * 7 + r * 13) % 101).astype(np.float32) for r in range(size)]


def local_array(mesh, spec, row):
    return jax_compat.process_local_array(NamedSharding(mesh, spec), row[None])


def check(name, got, want):
    got = np.asarray(got)
    if not np.array_equal(got, want):
        raise SystemExit(f"WRONG {name} on rank {rank}/{size}: got {got.ravel()[:6]}, want {np.ravel(want)[:6]}")


mesh = Mesh(np.array(jax.devices()), ("x",))
count = 4 * size
every = inputs(count)
x = local_array(mesh, P("x"), every[rank])
stack = np.stack(every)
programs = {
    "psum": (lambda v: jax.lax.psum(v, "x"), stack.sum(0)),
    "all_gather": (lambda v: jax.lax.all_gather(v[0], "x", tiled=True)[None], stack.reshape(-1)),
    "psum_scatter": (lambda v: jax.lax.psum_scatter(v[0], "x", tiled=True)[None],
                     stack.sum(0).reshape(size, -1)[rank]),
    "ppermute": (lambda v: jax.lax.ppermute(v, "x", [(i, (i + 1) % size) for i in range(size)]),
                 stack[(rank - 1) % size]),
    "all_to_all": (lambda v: jax.lax.all_to_all(v[0].reshape(size, -1), "x", 0, 0, tiled=True).reshape(1, -1),
                   stack.reshape(size, size, -1)[:, rank].reshape(-1)),
}
fns = {}
for name, (body, want) in programs.items():
    fns[name] = jax.jit(shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    check(name, fns[name](x).addressable_data(0)[0], want)

before = mpi.counts()
for _ in range(10):
    check("psum (again)", fns["psum"](x).addressable_data(0)[0], programs["psum"][1])
after = mpi.counts()
slots = (after["round_slots"] - before["round_slots"]) / 10
hosts = mpi.allgather(np.frombuffer(socket.gethostname().encode()[:64].ljust(64, b"\0"), np.uint8))
one_node = len({bytes(h) for h in hosts}) == 1  # across hosts the communicator is the library's
if one_node and os.environ.get("MPI_COLLECTIVES_NODE_PATH", "2") != "0" and slots != size - 1:
    raise SystemExit(f"WRONG count on rank {rank}/{size}: {slots} slots read a psum, want {size - 1} (the round)")

# 2-D: rows x columns, a communicator per axis group.
rows = 2
cols = size // rows
mesh2 = Mesh(np.array(jax.devices()).reshape(rows, cols), ("r", "c"))
row_of, col_of = divmod(rank, cols)
x2 = local_array(mesh2, P(("r", "c")), every[rank][:8])
for axis, members in (("c", [row_of * cols + c for c in range(cols)]), ("r", [r * cols + col_of for r in range(rows)])):
    f = jax.jit(shard_map(lambda v, a=axis: jax.lax.psum(v, a), mesh=mesh2, in_specs=P(("r", "c")),
                          out_specs=P(("r", "c"))))
    check(f"psum along {axis}", f(x2).addressable_data(0)[0], sum(every[m][:8] for m in members))

print(f"EXACT rank {rank}/{size}", flush=True)

psum = fns["psum"]
want = programs["psum"][1]
if mode == "stall":
    def away_from_the_collective():
        time.sleep(float(os.environ.get("STALL_AWAY", "8")))

    if rank in (3, 4, 5):
        away_from_the_collective()
    check("psum after the stall", psum(x).addressable_data(0)[0], want)
    print(f"PASS at_scale rank {rank}", flush=True)
elif mode == "kill":
    if rank == size - 2:
        time.sleep(2)  # the others are in the psum by then
        os.kill(os.getpid(), signal.SIGKILL)
    psum(x).block_until_ready()
    print(f"UNEXPECTED rank {rank} finished", flush=True)
elif mode == "sigterm":
    print(f"READY rank {rank}", flush=True)
    if rank == 0:
        time.sleep(600)  # never joins: the others wait in the psum until SIGTERM
    psum(x).block_until_ready()
    print(f"UNEXPECTED rank {rank} finished", flush=True)

"""Data-parallel training over MPI: an MLP on synthetic data, the batch split
over every rank, gradients combined by XLA (an all-reduce over MPI) inside
`jit`. Rank 0 prints the loss; at the end every rank checks that its
parameters are bit-identical to every other rank's.

    mpiexec -n 4 python examples/train_data_parallel.py [--steps 200]
"""
import argparse

import mpi_collectives

info = mpi_collectives.initialize()  # before the first JAX computation

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--batch-per-rank", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()

D_IN, HIDDEN = 32, 64
mesh = Mesh(np.array(jax.devices()), ("data",))
replicated, by_rows = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))

# Same seed everywhere: the same initial parameters and the same "true" model;
# each rank draws its own part of every batch.
rng = np.random.default_rng(0)
params = {
    "w1": rng.normal(0, D_IN ** -0.5, (D_IN, HIDDEN)).astype(np.float32),
    "b1": np.zeros(HIDDEN, np.float32),
    "w2": rng.normal(0, HIDDEN ** -0.5, (HIDDEN, 1)).astype(np.float32),
    "b2": np.zeros(1, np.float32),
}
true_w = rng.normal(size=(D_IN, 1)).astype(np.float32)
params = jax.tree_util.tree_map(lambda a: jax.make_array_from_process_local_data(replicated, a), params)
local_rng = np.random.default_rng(1000 + info.rank)


def batch():
    x = local_rng.normal(size=(args.batch_per_rank, D_IN)).astype(np.float32)
    y = np.tanh(x @ true_w) + 0.05 * local_rng.normal(size=(args.batch_per_rank, 1)).astype(np.float32)
    return (jax.make_array_from_process_local_data(by_rows, x),
            jax.make_array_from_process_local_data(by_rows, y))


def loss_fn(p, x, y):
    h = jnp.tanh(x @ p["w1"] + p["b1"])
    return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)  # the mean over the *global* batch


@jax.jit
def step(p, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
    return jax.tree_util.tree_map(lambda a, g: a - args.lr * g, p, grads), loss


first = None
for i in range(args.steps):
    params, loss = step(params, *batch())
    loss = float(loss)
    first = loss if first is None else first
    if info.rank == 0 and (i % 50 == 0 or i == args.steps - 1):
        print(f"step {i:4d}  loss {loss:.5f}  ({info.size} ranks, global batch {info.size * args.batch_per_rank})",
              flush=True)

local = {k: np.asarray(v.addressable_data(0)) for k, v in params.items()}
mpi_collectives.services.host.assert_equal(local, "parameters differ between ranks")
if not loss < 0.5 * first:
    raise SystemExit(f"rank {info.rank}: the loss did not fall ({first:.4f} -> {loss:.4f})")
if info.rank == 0:
    print(f"done: loss {first:.4f} -> {loss:.4f}, parameters identical on all {info.size} ranks, "
          f"gradients combined over {info.library} ({info.family} ABI)", flush=True)

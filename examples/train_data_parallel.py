"""Data-parallel training over MPI: an MLP on synthetic data, the batch split
over every rank, gradients combined by XLA (an all-reduce over MPI) inside
`jit`. Rank 0 prints the loss; at the end every rank checks that its
parameters are bit-identical to every other rank's.

    mpiexec -n 4 python examples/train_data_parallel.py [--steps 200]

With --global-batch the batch over all ranks stays the same whatever their
number, so that layouts can be compared on the same work (docs/layout.md):

    mpi-collectives layouts --time 'median step ([0-9.]+) ms' -- \
        python examples/train_data_parallel.py --global-batch 512 --hidden 2048 --layers 3 --steps 30
"""
import argparse
import time

import mpi_collectives

info = mpi_collectives.initialize()  # before the first JAX computation

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--batch-per-rank", type=int, default=64)
parser.add_argument("--global-batch", type=int, default=None,
                    help="rows of every step over all ranks, split evenly (instead of --batch-per-rank)")
parser.add_argument("--hidden", type=int, default=64, help="width of the hidden layers")
parser.add_argument("--layers", type=int, default=1, help="hidden layers")
parser.add_argument("--lr", type=float, default=None, help="learning rate (default: 0.1, less for wider layers)")
args = parser.parse_args()
if args.lr is None:
    args.lr = 0.1 * min(1.0, 64 / args.hidden)  # wider layers, larger gradients: a smaller step stays stable
if args.global_batch is not None:
    if args.global_batch % info.size:
        raise SystemExit(f"rank {info.rank}: --global-batch {args.global_batch} does not split evenly over "
                         f"{info.size} ranks")
    args.batch_per_rank = args.global_batch // info.size

D_IN, HIDDEN = 32, args.hidden
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
for i in range(args.layers - 1):  # hidden-to-hidden layers: the dense work of a larger model
    params[f"h{i}"] = rng.normal(0, 0.1 * HIDDEN ** -0.5, (HIDDEN, HIDDEN)).astype(np.float32)
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
    for i in range(args.layers - 1):
        h = h + jnp.tanh(h @ p[f"h{i}"])
    return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)  # the mean over the *global* batch


@jax.jit
def step(p, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
    return jax.tree_util.tree_map(lambda a, g: a - args.lr * g, p, grads), loss


first, times = None, []
for i in range(args.steps):
    x, y = batch()
    start = time.perf_counter()
    params, loss = step(params, x, y)
    loss = float(loss)  # waits for the step
    times.append(time.perf_counter() - start)
    first = loss if first is None else first
    if info.rank == 0 and (i % 50 == 0 or i == args.steps - 1):
        print(f"step {i:4d}  loss {loss:.5f}  ({info.size} ranks, global batch {info.size * args.batch_per_rank})",
              flush=True)

local = {k: np.asarray(v.addressable_data(0)) for k, v in params.items()}
mpi_collectives.assert_equal(local, "parameters differ between ranks")
if not loss < 0.5 * first:
    raise SystemExit(f"rank {info.rank}: the loss did not fall ({first:.4f} -> {loss:.4f})")
if info.rank == 0:
    print(f"done: loss {first:.4f} -> {loss:.4f}, parameters identical on all {info.size} ranks, "
          f"gradients combined over {info.library} ({info.family} ABI)", flush=True)
    # the first steps compile: the median of the rest
    print(f"median step {np.median(times[2:] or times) * 1e3:.2f} ms", flush=True)

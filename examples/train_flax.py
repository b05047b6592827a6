"""A Flax NNX model trained with Optax's adamw over every rank, data-parallel or fully sharded, with
Orbax checkpoints of the sharded state: what a JAX user's training script looks like over MPI.

    pip install flax optax orbax-checkpoint      # scripts/setup_beside.sh pins the versions tested
    mpiexec -n 2 python examples/train_flax.py --dir /shared/run1 --sharding fsdp --steps 100
    srun --mpi=pmi2 python examples/train_flax.py --dir /shared/run1 --sharding dp   # one rank a node

--sharding dp: parameters and optimizer state replicated, the batch split over the ranks; XLA
all-reduces the gradients. --sharding fsdp: every parameter and its optimizer state sharded over
the ranks on its first axis where the ranks divide it (replicated otherwise); XLA all-gathers each
weight before use and reduce-scatters its gradient. The model, the optimizer and the loss are the
same in both, and the same as in a one-process script: only initialize(), the mesh and the
shardings are new (docs/flax.md).

The global batch of step s is drawn from seed s, whatever the number of ranks, so 1, 2 or 3 ranks
train on the same data. Orbax saves every --every steps and when the job is asked to stop (SIGTERM
from scancel or a time limit: `CheckpointManager.reached_preemption`), and a run started again
resumes from the latest checkpoint; a run stopped and resumed ends with the parameters of one that
ran through, bit for bit. The last line says `done: step S, loss L, parameters <digest>`; --out
writes the final parameters (rank 0, NumPy .npz) for a comparison.
"""
import argparse
import hashlib
import sys
import time

import mpi_collectives

info = mpi_collectives.initialize()  # before the first JAX computation

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from flax import nnx  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

FEATURES = 64


class MLP(nnx.Module):
    """Three dense layers: large enough that the collectives are more than a rounding error."""

    def __init__(self, width: int, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(FEATURES, width, rngs=rngs)
        self.l2 = nnx.Linear(width, width, rngs=rngs)
        self.l3 = nnx.Linear(width, 1, rngs=rngs)

    def __call__(self, x):
        return self.l3(nnx.gelu(self.l2(nnx.gelu(self.l1(x)))))


def batch(step: int, rows: int):
    """The global batch of `step`: the same for any number of ranks."""
    rng = np.random.default_rng(step)
    x = rng.standard_normal((rows, FEATURES)).astype(np.float32)
    y = np.sin(x[:, :1] * 2) + 0.1 * x[:, 1:2] ** 2
    return x, y.astype(np.float32)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="checkpoint folder every rank sees")
    parser.add_argument("--sharding", choices=("dp", "fsdp"), default="dp")
    parser.add_argument("--steps", type=int, default=100, help="train until this step")
    parser.add_argument("--every", type=int, default=25, help="save every this many steps")
    parser.add_argument("--batch", type=int, default=240, help="rows of the global batch (divisible by the ranks)")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--stop-at", type=int, default=None,
                        help="end after this step as if stopped, without saving it (to show a resume)")
    parser.add_argument("--out", default=None, help="rank 0 writes the final parameters here (.npz)")
    parser.add_argument("--step-seconds", type=float, default=0.0,
                        help="sleep this long after each step (to stand for a larger model in a demonstration)")
    args = parser.parse_args()
    if args.batch % info.size:
        raise SystemExit(f"rank {info.rank}: --batch {args.batch} does not split evenly over {info.size} ranks")

    mesh = Mesh(np.array(jax.devices()), ("data",))
    rows, replicated = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())

    def placement(leaf):
        """dp: replicated. fsdp: sharded on the first axis where the devices divide it."""
        shape = getattr(leaf, "shape", ())
        if args.sharding == "fsdp" and shape and shape[0] % mesh.size == 0:
            return NamedSharding(mesh, P("data", *([None] * (len(shape) - 1))))
        return replicated

    model = MLP(args.width, nnx.Rngs(0))  # the same initial parameters on every rank
    graphdef, params = nnx.split(model, nnx.Param)
    tx = optax.adamw(1e-3)
    params = jax.tree.map(lambda a: jax.device_put(a, placement(a)), params)
    opt_shardings = jax.tree.map(placement, jax.eval_shape(tx.init, params))
    opt_state = jax.jit(tx.init, out_shardings=opt_shardings)(params)
    state = {"params": params, "opt": opt_state}
    shardings = jax.tree.map(lambda a: a.sharding, state)

    @jax.jit
    def train_step(state, x, y):
        def loss_fn(p):
            return jnp.mean((nnx.merge(graphdef, p)(x) - y) ** 2)
        loss, grads = jax.value_and_grad(loss_fn)(state["params"])  # XLA's collectives: over MPI
        updates, opt = tx.update(grads, state["opt"], state["params"])
        new = {"params": optax.apply_updates(state["params"], updates), "opt": opt}
        return jax.lax.with_sharding_constraint(new, shardings), loss

    manager = ocp.CheckpointManager(args.dir, options=ocp.CheckpointManagerOptions(
        save_interval_steps=args.every, max_to_keep=2))
    latest = manager.latest_step()
    first = 0
    if latest is not None:
        abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), state)
        state = manager.restore(latest, args=ocp.args.StandardRestore(abstract))
        first = latest + 1
        print(f"rank {info.rank}: resumed from step {latest}", flush=True)

    loss = None
    for step in range(first, args.steps):
        x, y = batch(step, args.batch)
        x = jax.make_array_from_callback(x.shape, rows, lambda index: x[index])
        y = jax.make_array_from_callback(y.shape, rows, lambda index: y[index])
        state, loss = train_step(state, x, y)
        if manager.reached_preemption(step):  # every rank gets True at the same step
            manager.save(step, args=ocp.args.StandardSave(state), force=True)
            manager.wait_until_finished()
            print(f"rank {info.rank}: preempted: saved step {step}, ending", flush=True)
            manager.close()
            return 0
        if manager.save(step, args=ocp.args.StandardSave(state)):  # only every --every steps
            print(f"rank {info.rank}: saved step {step}", flush=True)
        if args.step_seconds:
            time.sleep(args.step_seconds)
        if args.stop_at is not None and step == args.stop_at:
            jax.block_until_ready(state)
            manager.wait_until_finished()
            manager.close()
            mpi_collectives.barrier()  # every rank past its last step before any ends
            print(f"rank {info.rank}: stopped after step {step}", flush=True)
            return 0
    manager.wait_until_finished()
    manager.close()

    # Every rank's whole parameters (an fsdp shard is only part of them), checked equal across ranks.
    gather = jax.jit(lambda p: p, out_shardings=replicated)
    final = {"/".join(str(getattr(k, "key", getattr(k, "name", k))) for k in path): np.asarray(gather(leaf).addressable_data(0))
             for path, leaf in jax.tree_util.tree_leaves_with_path(state["params"])}
    mpi_collectives.assert_equal(final, "parameters differ between ranks")
    digest = hashlib.sha256(b"".join(final[k].tobytes() for k in sorted(final))).hexdigest()[:16]
    if args.out and info.rank == 0:
        np.savez(args.out, **final)
    shown = "none" if loss is None else f"{float(loss):.6f}"
    print(f"rank {info.rank}: done: step {args.steps - 1}, loss {shown}, parameters {digest} "
          f"({args.sharding}, {info.size} ranks)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

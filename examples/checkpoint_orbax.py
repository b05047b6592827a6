"""Data-parallel training over MPI with Orbax checkpoints: saves every N steps,
resumes from the latest checkpoint when started again, and saves on
preemption (SIGTERM from the launcher, `scancel`, a time limit) before ending 0.

    pip install orbax-checkpoint
    mpiexec -n 2 python examples/checkpoint_orbax.py --dir /shared/run1 --steps 200 --every 50
    srun --mpi=pmi2 python examples/checkpoint_orbax.py --dir /shared/run1    # the same, resumed

The checkpoint folder must be one every rank sees (a shared filesystem): Orbax
writes each process's shards and rank 0 the metadata. The model is a linear
regression whose batch for step s is drawn from a seed of (s, rank), so a run
stopped and resumed ends with exactly the parameters of one that ran
through: the last line says `done: step S, loss L, parameters <digest>`.

On SIGTERM the package lets a program that asks JAX's preemption sync point
(`CheckpointManager.reached_preemption(step)` does) run on for
MPI_COLLECTIVES_PREEMPTION_GRACE seconds (60 by default), so every rank
reaches the same step, saves it and ends 0 (docs/checkpoints.md).
"""
import argparse
import hashlib
import sys

import mpi_collectives

info = mpi_collectives.initialize()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

FEATURES, ROWS = 64, 256  # rows per rank per step


def batch(step: int, sharding):
    """This step's batch: each rank's rows from a seed of (step, rank), as a global array."""
    rng = np.random.default_rng([step, info.rank])
    x = rng.standard_normal((ROWS, FEATURES)).astype(np.float32)
    truth = np.linspace(-1, 1, FEATURES, dtype=np.float32)[:, None]
    y = x @ truth + 0.01 * rng.standard_normal((ROWS, 1)).astype(np.float32)
    return (jax.make_array_from_process_local_data(sharding, x),
            jax.make_array_from_process_local_data(sharding, y))


@jax.jit
def train_step(state, x, y):
    def loss(w):
        return jnp.mean((x @ w - y) ** 2)
    value, grad = jax.value_and_grad(loss)(state["w"])  # XLA's all-reduce of the gradient: over MPI
    return {"w": state["w"] - 0.05 * grad, "step": state["step"] + 1}, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="checkpoint folder every rank sees")
    parser.add_argument("--steps", type=int, default=200, help="train until this step (default 200)")
    parser.add_argument("--every", type=int, default=50, help="save every this many steps (default 50)")
    parser.add_argument("--step-seconds", type=float, default=0.0,
                        help="sleep this long in each step (to stand for a longer model in a demonstration)")
    args = parser.parse_args()

    mesh = Mesh(np.array(jax.devices()), ("data",))
    rows, replicated = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    state = {"w": jax.device_put(jnp.zeros((FEATURES, 1), jnp.float32), replicated),
             "step": jax.device_put(jnp.zeros((), jnp.int32), replicated)}
    manager = ocp.CheckpointManager(args.dir, options=ocp.CheckpointManagerOptions(
        save_interval_steps=args.every, max_to_keep=3))
    latest = manager.latest_step()
    if latest is not None:
        state = manager.restore(latest, args=ocp.args.StandardRestore(state))
        print(f"rank {info.rank}: resumed from step {latest}", flush=True)
    first = 0 if latest is None else latest + 1

    loss = None
    for step in range(first, args.steps):
        state, loss = train_step(state, *batch(step, rows))
        if args.step_seconds:
            import time
            time.sleep(args.step_seconds)
        if manager.reached_preemption(step):  # every rank gets True at the same step
            manager.save(step, args=ocp.args.StandardSave(state), force=True)
            manager.wait_until_finished()
            print(f"rank {info.rank}: preempted: saved step {step}, ending", flush=True)
            manager.close()
            return 0
        if manager.save(step, args=ocp.args.StandardSave(state)):  # only every --every steps
            print(f"rank {info.rank}: saved step {step}", flush=True)
    manager.wait_until_finished()
    manager.close()
    digest = hashlib.sha256(np.asarray(state["w"].addressable_data(0)).tobytes()).hexdigest()[:16]
    shown = "none" if loss is None else f"{float(loss):.6f}"
    print(f"rank {info.rank}: done: step {int(state['step'])}, loss {shown}, parameters {digest}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

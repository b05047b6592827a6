"""NetKet variational Monte Carlo over MPI: the ground state of a transverse-field Ising chain, an
RBM, Metropolis sampling split over every rank, stochastic reconfiguration (VMC_SR).

    pip install netket        # beside this package (docs/netket.md); scripts/setup_beside.sh pins the version tested
    mpiexec -n 2 python examples/netket_vmc.py --iterations 300 --output energies.json
    srun --mpi=pmi2 python examples/netket_vmc.py --iterations 300    # one rank per core: docs/netket.md
    python examples/netket_vmc.py --iterations 300                    # one process, no launcher
    JAX_NUM_CPU_DEVICES=2 python examples/netket_vmc.py --iterations 300   # one process, 2 CPU devices
    srun --mpi=pmi2 python examples/netket_vmc.py --iterations 3000 --checkpoint state.mpack   # saves on SIGTERM

The problem is NetKet's tutorial one: a ring of --sites spins (20), H = sum_i Z_i Z_{i+1} - h sum_i X_i
with h = 1, an RBM of alpha 1, MetropolisLocal with --chains chains (16) and --samples samples (1008)
an iteration in all, SR with diag_shift 0.1, fixed seeds. The chains and the samples are global:
NetKet splits them over every device of every rank (rounding a count that does not divide up, with a
warning); this script asks for counts that divide, so that every layout runs the same problem.
The same seeds draw the same samples on any layout: at 2 ranks the energies are those of one process
with 2 CPU devices (JAX_NUM_CPU_DEVICES=2 python examples/netket_vmc.py), bit for bit where each
process computes with the same threads (tests/jax_over_mpi/test_netket.py; docs/netket.md).

Rank 0 alone prints the energy of each iteration and writes --output (JSON: the energies, their
errors and variances, the ms an iteration); the last line says `done: ...`.

With --checkpoint PATH the run saves on SIGTERM or preemption (a Slurm time limit with
`--signal=TERM@120`, scancel): every rank stops at the same iteration (JAX's preemption sync point,
which the package passes SIGTERM on to), rank 0 writes PATH (the whole driver as NetKet serializes
it: the iteration, the variational state's parameters and chains, the optimizer's state), and the
run ends 0 with a `saved: ...` line. Started again with the same PATH, it resumes at that iteration
and runs to --iterations in all, as the run that went through would have (with --optimizer adam or
adam-schedule too, whose moments and step count are state). A PATH written by the recipe before
(the iteration and the variational state only) resumes with a fresh optimizer, and says so. For an even number of
sites the exact ground-state energy at h = 1 is -2/sin(pi/(2N)) (-25.4910 for 20 sites).
"""
import argparse
import json
import math
import os
import sys
import time

import mpi_collectives

# Before `import netket`: importing netket starts JAX's backend (it sets JAX options and makes its
# default mesh), and initialize() must come before the backend starts.
mpi_collectives.initialize()

import jax  # noqa: E402
import netket as nk  # noqa: E402
import numpy as np  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=300, help="VMC iterations (default 300)")
    parser.add_argument("--samples", type=int, default=1008, help="samples an iteration, over all ranks (default 1008)")
    parser.add_argument("--chains", type=int, default=16, help="Markov chains, over all ranks (default 16)")
    parser.add_argument("--sites", type=int, default=20, help="spins on the ring (default 20)")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the parameters and of the sampler")
    parser.add_argument("--output", default=None, help="rank 0 writes the energies here (JSON)")
    parser.add_argument("--checkpoint", default=None, metavar="PATH",
                        help="save here on SIGTERM or preemption, and resume from here when it exists")
    parser.add_argument("--optimizer", default="sgd", choices=sorted(OPTIMIZERS),
                        help="the optimizer SR's updates go through (default sgd: NetKet's tutorial)")
    args = parser.parse_args()
    first = jax.process_index() == 0  # print and write from one rank only
    devices = jax.device_count()
    for name, value in (("--chains", args.chains), ("--samples", args.samples)):
        if value % devices:
            raise SystemExit(f"rank {jax.process_index()}: {name} {value} does not split evenly over the "
                             f"{devices} devices of the job (NetKet splits it over every device of every rank)")

    hilbert = nk.hilbert.Spin(s=0.5, N=args.sites)
    hamiltonian = nk.operator.Ising(hilbert, nk.graph.Chain(args.sites, pbc=True), h=1.0)
    sampler = nk.sampler.MetropolisLocal(hilbert, n_chains=args.chains)
    state = nk.vqs.MCState(sampler, nk.models.RBM(alpha=1), n_samples=args.samples,
                           seed=args.seed, sampler_seed=args.seed + 1)
    driver = nk.driver.VMC_SR(hamiltonian, OPTIMIZERS[args.optimizer](), diag_shift=0.1, variational_state=state)
    history = {}  # the energies of the iterations before a stop: they come back with the checkpoint
    if args.checkpoint and os.path.exists(args.checkpoint):
        driver, older, history = load(args.checkpoint, driver)
        if first:
            print(f"resumed: iteration {driver.step_count} from {args.checkpoint}" +
                  (", a checkpoint of the older recipe without the optimizer's state: the optimizer starts afresh "
                   "(with Adam or a schedule the run differs from one that went through)" if older else ""),
                  flush=True)
    begin = driver.step_count  # the iteration this run starts at: a resumed run's, from the checkpoint

    # --output holds the whole run, the iterations before a stop too
    energies, errors, variances = (list(history.get(k, [])) for k in ("energies", "errors", "variances"))
    stamps, saved = [], []

    def report(step, log_data, driver):
        # step: the driver's own count, restored with it, so a resumed run's iterations go on
        if args.checkpoint and preempted(step):  # every rank stops here, before this iteration's update
            save(args.checkpoint, driver, first, {"energies": energies, "errors": errors, "variances": variances})
            saved.append(step)
            return False
        energy = log_data["Energy"]  # computed on every rank alike: the samples of all of them
        energies.append(float(np.real(energy.mean)))
        errors.append(float(energy.error_of_mean))
        variances.append(float(energy.variance))
        stamps.append(time.perf_counter())
        if first:
            print(f"iteration {step:4d}  energy {energies[-1]:.8f} +- {errors[-1]:.6f}  "
                  f"variance {variances[-1]:.6f}", flush=True)
        return True

    start = time.perf_counter()
    driver.run(n_iter=max(args.iterations - begin, 0), out=(), callback=report, show_progress=False)
    if saved:
        if first:
            print(f"saved: iteration {saved[0]} to {args.checkpoint}; run again with the same --checkpoint to "
                  f"resume", flush=True)
        return 0
    # An iteration's time: the median between two reports, past the first (which compiles).
    steps = np.diff(stamps[1:]) if len(stamps) > 2 else np.array([time.perf_counter() - start])
    ms = float(np.median(steps) * 1e3)
    exact = -2 / math.sin(math.pi / (2 * args.sites)) if args.sites % 2 == 0 else None
    if first:
        if args.output:
            with open(args.output, "w") as f:
                json.dump({"sites": args.sites, "samples": args.samples, "chains": args.chains,
                           "seed": args.seed, "processes": jax.process_count(), "devices": devices,
                           "netket": nk.__version__, "jax": jax.__version__, "exact": exact,
                           "energies": energies, "errors": errors, "variances": variances,
                           "ms_per_iteration": ms}, f, indent=1)
        shown = f" (exact {exact:.4f})" if exact is not None else ""
        processes = jax.process_count()
        print(f"done: {args.sites} sites, {len(energies)} iterations, energy {energies[-1]:.6f} "
              f"+- {errors[-1]:.6f}{shown}, {processes} process{'es' * (processes > 1)}, "
              f"{devices} device{'s' * (devices > 1)}, {ms:.1f} ms an iteration", flush=True)
    return 0


def preempted(step: int) -> bool:
    """JAX's preemption sync point: True on every rank at the same step once any rank got SIGTERM (the
    package passes SIGTERM on to it once a program asks, and gives the ranks MPI_COLLECTIVES_PREEMPTION_GRACE
    seconds, 60, to save and end: docs/checkpoints.md)."""
    from jax.experimental import multihost_utils

    return multihost_utils.reached_preemption_sync_point(step)


def _sgd():
    return nk.optimizer.Sgd(learning_rate=0.02)


def _adam():
    return nk.optimizer.Adam(learning_rate=0.01)


def _adam_schedule():
    import optax

    return optax.adam(optax.exponential_decay(init_value=0.01, transition_steps=5, decay_rate=0.8))


# Optimizers with state (Adam's moments; a schedule's step count) are what a checkpoint must keep.
OPTIMIZERS = {"sgd": _sgd, "adam": _adam, "adam-schedule": _adam_schedule}


def save(path: str, driver, write: bool, history: dict) -> None:
    """The whole driver as NetKet serializes it (its fields marked serialize=True: the step count, the
    variational state's parameters and chains, the optimizer's state; NetKet's own list, kept current by
    NetKet rather than by this script), and the energies so far (--output's); every rank serializes
    (the chains are gathered from every rank), rank 0 writes, whole or not at all."""
    import flax.serialization

    data = flax.serialization.to_bytes({"driver": driver, "history": history})
    if write:
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)


def load(path: str, driver):
    """(the driver restored, whether the file is of the older recipe: {"step", "state"}, no optimizer,
    the energies before the stop)."""
    import flax.serialization

    with open(path, "rb") as f:
        saved = flax.serialization.msgpack_restore(f.read())
    kept = saved.get("history") or {}  # (Flax keeps a list as {"0": ..., "1": ...})
    history = {k: [float(kept[k][i]) for i in sorted(kept.get(k) or {}, key=int)]
               for k in ("energies", "errors", "variances")}
    if "driver" in saved:
        return flax.serialization.from_state_dict(driver, saved["driver"]), False, history
    driver._variational_state = flax.serialization.from_state_dict(driver.state, saved["state"])
    driver._step_count = int(saved["step"])
    return driver, True, history


if __name__ == "__main__":
    sys.exit(main())

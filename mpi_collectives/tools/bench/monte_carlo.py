"""The bench's Monte Carlo loop: NetKet's variational Monte Carlo iteration, where NetKet is
installed (docs/netket.md; scripts/setup_beside.sh pins the version the docs measured).

The problem is the tutorial's, as examples/netket_vmc.py runs it: a ring of 20 spins,
H = sum_i Z_i Z_{i+1} - sum_i X_i, an RBM of alpha 1, MetropolisLocal, 1008 samples from 16
chains an iteration over every device of the job, stochastic reconfiguration (VMC_SR). An
iteration samples on every rank and then sums across them: a few small collectives (the
energy's mean and variance, the sampler's acceptance) and the SR solve's all-reduces of the
parameters' size (about 440 values), which is why it measures a path's small-message cost, not
its bandwidth. The chains and the samples are global and must divide by the device count: at a
rank count that does not divide 16 (3, 5, 6...), the next multiples are used and recorded.
"""
import time

import numpy as np

SITES, CHAINS, SAMPLES, SEED = 20, 16, 1008, 1234


def available() -> bool:
    try:
        import netket  # noqa: F401
    except ImportError:
        return False
    return True


def vmc(jax, iterations: int) -> dict:
    """{"iteration": [seconds], "energies": [float], "chains", "samples", "devices", "netket"}: the
    seconds between two iterations' reports past the first (which compiles), and the energy of
    every iteration (the same on every rank: it is the mean over every rank's samples). Imports
    NetKet, which turns JAX's x64 mode on: the bench runs this last in a launch."""
    import netket as nk

    devices = jax.device_count()
    chains = -(-CHAINS // devices) * devices
    samples = -(-SAMPLES // chains) * chains
    hilbert = nk.hilbert.Spin(s=0.5, N=SITES)
    hamiltonian = nk.operator.Ising(hilbert, nk.graph.Chain(SITES, pbc=True), h=1.0)
    sampler = nk.sampler.MetropolisLocal(hilbert, n_chains=chains)
    state = nk.vqs.MCState(sampler, nk.models.RBM(alpha=1), n_samples=samples, seed=SEED, sampler_seed=SEED + 1)
    driver = nk.driver.VMC_SR(hamiltonian, nk.optimizer.Sgd(learning_rate=0.02), diag_shift=0.1,
                              variational_state=state)
    energies, stamps = [], []

    def report(step, log_data, driver):
        energies.append(float(np.real(log_data["Energy"].mean)))
        stamps.append(time.perf_counter())
        return True

    driver.run(n_iter=iterations + 2, out=(), callback=report, show_progress=False)
    if not all(np.isfinite(energies)):
        raise SystemExit(f"mpi-collectives bench: WRONG result: a VMC energy is not finite: {energies}")
    return {"iteration": [float(t) for t in np.diff(stamps[1:])], "energies": energies, "chains": chains,
            "samples": samples, "devices": devices, "netket": nk.__version__}

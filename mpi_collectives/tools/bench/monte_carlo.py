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
    return _timed(driver, iterations, chains, samples, devices, nk)


# ---- an SR-heavy model: many tiny all-reduces an iteration (issue 74) ----
J1J2_SITES, J1J2_CHAINS, J1J2_SAMPLES, J2 = 16, 16, 1024, 0.5


def vmc_j1j2(jax, iterations: int) -> dict:
    """The same as vmc() for the model issue 74 measured: a J1-J2 Heisenberg chain of 16 sites (J2 =
    0.5, periodic), a complex RBM, MetropolisExchange, and SR solved by conjugate gradients over the
    geometric tensor applied on the fly: each CG step sums over every rank's samples, so an iteration
    makes about 87 small all-reduces at 2 ranks (the Ising problem's about 8), the kind the round
    (MPI_COLLECTIVES_NODE_PATH_ROUND) is for; on 2 cores they were under 1 ms of an 80 ms iteration
    (docs/netket.md)."""
    import jax.scipy.sparse.linalg as linalg
    import netket as nk

    devices = jax.device_count()
    chains = -(-J1J2_CHAINS // devices) * devices
    samples = -(-J1J2_SAMPLES // chains) * chains
    graph = nk.graph.Chain(J1J2_SITES, pbc=True, max_neighbor_order=2)
    hilbert = nk.hilbert.Spin(s=0.5, N=J1J2_SITES, total_sz=0)
    hamiltonian = nk.operator.Heisenberg(hilbert, graph, J=[1.0, J2])
    sampler = nk.sampler.MetropolisExchange(hilbert, graph=graph, n_chains=chains)
    state = nk.vqs.MCState(sampler, nk.models.RBM(alpha=1, param_dtype=complex), n_samples=samples, seed=SEED,
                           sampler_seed=SEED + 1)
    sr = nk.optimizer.SR(qgt=nk.optimizer.qgt.QGTOnTheFly, solver=linalg.cg, diag_shift=0.01,
                          holomorphic=True)
    driver = nk.driver.VMC(hamiltonian, nk.optimizer.Sgd(learning_rate=0.01), variational_state=state,
                           preconditioner=sr)
    return _timed(driver, iterations, chains, samples, devices, nk)


def _timed(driver, iterations, chains, samples, devices, nk) -> dict:
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


# ---- the same loop in plain JAX: no NetKet needed (issue 66) ----
SWEEP = SITES  # Metropolis steps between two samples of a chain: one proposed flip per site
DIAG_SHIFT, LEARNING_RATE = 0.1, 0.02


def plain(jax, iterations: int) -> dict:
    """{"iteration": [seconds], "energies": [float], "acceptance", "chains", "samples", "devices",
    "params"}: NetKet's iteration above written in plain JAX, so that any node measures it at any
    rank count. The same problem (the 20-spin Ising ring, J = h = 1, a real RBM of alpha 1: 440
    parameters), MetropolisLocal chains of one sweep a sample, and stochastic reconfiguration with
    the S matrix formed and solved: per iteration, over every device of the job, the sums of the
    local energies, their squares and the acceptances (scalars), of the log-derivatives (440
    values), of their products with the energies (440) and with each other (S: 440 x 440, 774 KB
    in float32). One jitted step under shard_map: each device runs its chains, the sums are psums.
    Every chain draws from a key of its own global index, so every rank count samples the same
    chains: the energies differ between rank counts and paths only by the sums' rounding (and the
    acceptances that rounding flips)."""
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    from ...integration.jax_compat import process_local_array, shard_map

    devices = jax.device_count()
    chains = -(-CHAINS // devices) * devices
    per_chain = -(-SAMPLES // chains)
    per_device, n = chains // devices, SITES
    total = chains * per_chain
    mesh = Mesh(np.array(jax.devices()), ("x",))
    f32 = jnp.float32

    def log_psi(theta, s):  # theta: a (n), b (n), W (n x n), flat
        a, b, w = theta[:n], theta[n:2 * n], theta[2 * n:].reshape(n, n)
        return a @ s + jnp.sum(jnp.log(jnp.cosh(b + w @ s)))

    def local_energy(theta, s):
        here = log_psi(theta, s)
        flipped = s[None, :] * (1 - 2 * jnp.eye(n, dtype=f32))  # row i: s with spin i flipped
        ratios = jnp.exp(jax.vmap(log_psi, (None, 0))(theta, flipped) - here)
        return jnp.sum(s * jnp.roll(s, -1)) - jnp.sum(ratios)

    def run_chain(theta, key, s):
        def propose(carry, k):
            s, here, accepted = carry
            k_site, k_accept = jax.random.split(k)
            site = jax.random.randint(k_site, (), 0, n)
            proposal = s.at[site].multiply(-1.0)
            there = log_psi(theta, proposal)
            take = jax.random.uniform(k_accept) < jnp.exp(2 * (there - here))
            return (jnp.where(take, proposal, s), jnp.where(take, there, here), accepted + take), None

        def sample(carry, k):
            carry, _ = jax.lax.scan(propose, carry, jax.random.split(k, SWEEP))
            return carry, carry[0]

        (s, _, accepted), samples = jax.lax.scan(sample, (s, log_psi(theta, s), jnp.int32(0)),
                                                 jax.random.split(key, per_chain))
        return s, samples, accepted

    def step(theta, states, it):
        first = jax.lax.axis_index("x") * per_device
        keys = jax.vmap(lambda c: jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(SEED), it[0]), c))(
            first + jnp.arange(per_device))
        states, samples, accepted = jax.vmap(run_chain, (None, 0, 0))(theta, keys, states)
        x = samples.reshape(-1, n)
        e = jax.vmap(local_energy, (None, 0))(theta, x)
        o = jax.vmap(jax.grad(log_psi), (None, 0))(theta, x)
        sums = jax.lax.psum((jnp.sum(e), jnp.sum(e * e), jnp.sum(accepted).astype(f32)), "x")
        o_mean = jax.lax.psum(jnp.sum(o, 0), "x") / total
        f = jax.lax.psum(o.T @ e, "x") / total
        s_matrix = jax.lax.psum(o.T @ o, "x") / total
        energy, second, took = sums[0] / total, sums[1] / total, sums[2] / (total * SWEEP)
        s_matrix = s_matrix - jnp.outer(o_mean, o_mean)
        f = f - o_mean * energy
        theta = theta - LEARNING_RATE * jnp.linalg.solve(s_matrix + DIAG_SHIFT * jnp.eye(theta.size, dtype=f32), f)
        return theta, states, jnp.stack([energy, second - energy * energy, took])[None]

    sharded = NamedSharding(mesh, P("x"))
    stepper = jax.jit(shard_map()(step, mesh=mesh, in_specs=(P(), P("x"), P()), out_specs=(P(), P("x"), P("x")),
                                  check_vma=False))  # the chains' scan carries device-varying values
    rng = np.random.default_rng(SEED)
    theta = jnp.asarray(rng.normal(0, 0.01, 2 * n + n * n), f32)
    start = rng.choice(np.array([-1.0, 1.0], np.float32), size=(chains, n))
    mine = [i for i, d in enumerate(jax.devices()) if d.process_index == jax.process_index()]
    states = process_local_array(sharded, start[mine[0] * per_device:(mine[-1] + 1) * per_device])
    energies, variances, stamps, took = [], [], [], []
    for it in range(iterations + 2):
        theta, states, out = stepper(theta, states, jnp.asarray([it], jnp.int32))
        row = np.asarray(out.addressable_data(0))[0]
        energies.append(float(row[0]))
        variances.append(float(row[1]))
        took.append(float(row[2]))
        stamps.append(time.perf_counter())
    if not all(np.isfinite(energies)):
        raise SystemExit(f"mpi-collectives bench: WRONG result: a plain VMC energy is not finite: {energies}")
    return {"iteration": [float(t) for t in np.diff(stamps[1:])], "energies": energies, "variances": variances,
            "acceptance": float(np.mean(took)), "chains": chains, "samples": total, "devices": devices,
            "params": int(theta.size)}

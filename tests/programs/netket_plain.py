"""NetKet the way its documentation shows for several processes: the program calls
jax.distributed.initialize() itself, with no arguments, before `import netket`. `import
mpi_collectives` comes first and is all that is added: it sets MPITRAMPOLINE_LIB and
JAX_CPU_COLLECTIVES_IMPLEMENTATION=mpi before jax loads, and its cluster environment answers JAX's
questions (rank, size, coordinator) under launchers JAX does not know, such as MPICH's Hydra.

    netket_plain.py ITERATIONS OUTPUT

The problem, seeds and options of examples/netket_vmc.py at its defaults (20 sites, 16 chains,
1008 samples); process 0 writes the energies and variances to OUTPUT (JSON) and prints
"PASS netket plain: P processes, D devices".
"""
import json
import sys

import mpi_collectives  # noqa: F401  (before jax: JAX's collectives over MPI)
import jax

jax.distributed.initialize()  # before `import netket`, which starts JAX's backend

import netket as nk  # noqa: E402
import numpy as np  # noqa: E402

iterations, output = int(sys.argv[1]), sys.argv[2]
sites, chains, samples, seed = 20, 16, 1008, 1234
hilbert = nk.hilbert.Spin(s=0.5, N=sites)
hamiltonian = nk.operator.Ising(hilbert, nk.graph.Chain(sites, pbc=True), h=1.0)
sampler = nk.sampler.MetropolisLocal(hilbert, n_chains=chains)
state = nk.vqs.MCState(sampler, nk.models.RBM(alpha=1), n_samples=samples, seed=seed, sampler_seed=seed + 1)
driver = nk.driver.VMC_SR(hamiltonian, nk.optimizer.Sgd(learning_rate=0.02), diag_shift=0.1, variational_state=state)
log = nk.logging.RuntimeLog()
driver.run(n_iter=iterations, out=log, show_progress=False)
if jax.process_index() == 0:  # (NetKet's loggers keep the data on process 0 only)
    energy = log.data["Energy"]
    with open(output, "w") as f:
        json.dump({"energies": [float(x) for x in np.real(np.asarray(energy["Mean"]))],
                   "variances": [float(x) for x in np.asarray(energy["Variance"])]}, f)
    print(f"PASS netket plain: {jax.process_count()} processes, {jax.device_count()} devices", flush=True)

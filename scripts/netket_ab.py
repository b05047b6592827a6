"""NetKet's variational Monte Carlo step, one way of running it per launch, in interleaved rounds: the
table of docs/netket.md, re-measured in one sitting (issue 61). The problem of examples/netket_vmc.py
(20-site Ising ring, RBM, MetropolisLocal with 16 chains, 1008 samples, VMC_SR).

    python scripts/netket_ab.py [--rounds 3] [--iterations 60] [--mpiwrapper LIB] [--venv .venv-mpich]
                                [--problem ising|j1j2]

--problem j1j2: an SR-heavy model instead (monte_carlo.vmc_j1j2: CG steps' tiny all-reduces), each
package way also with the round off (MPI_COLLECTIVES_NODE_PATH_ROUND=0) and gloo left out (issue 74;
docs/netket.md).

The ways: one process with one CPU device; one process with 2 (NetKet's single-node recipe); 2 ranks
through the package on the mpich wheel; 2 ranks over gloo, unbound and bound to a core each; and, where Debian's Open MPI is installed,
2 ranks through the package on it and, with --mpiwrapper (scripts/build_mpiwrapper.sh), XLA's own MPI
collectives through MPIwrapper on it (mpibackend4jax's way). Each launch runs this file as a worker
(`--worker BACKEND`): JAX started as that way starts it (mpi_collectives.tools.backends), the step
timed as the median between iterations past the first (mpi_collectives.tools.bench.monte_carlo, the
bench's own loop). Prints one line per way: the median over
the rounds and each round's figure, milliseconds an iteration. Every launch has a timeout."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(backend: str, iterations: int, problem: str) -> None:
    if backend == "one":  # JAX alone: the package not even imported
        import jax
    else:
        from mpi_collectives.tools.backends import start
        jax, _, _ = start(backend, os.environ.get("MPI_COLLECTIVES_BENCH_COORDINATOR"))
    import importlib.util

    import numpy as np

    # The bench's own loop (the same problem and seeds), loaded from its file: importing the package
    # would set it up in the one-process ways too.
    package = os.path.dirname(importlib.util.find_spec("mpi_collectives").origin)
    spec = importlib.util.spec_from_file_location("monte_carlo", os.path.join(package, "tools", "bench", "monte_carlo.py"))
    monte_carlo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(monte_carlo)
    got = (monte_carlo.vmc_j1j2 if problem == "j1j2" else monte_carlo.vmc)(jax, iterations)
    if jax.process_index() == 0:
        print(f"MS {float(np.median(got['iteration']) * 1e3):.2f}", flush=True)
        print(f"ENERGY {got['energies'][-1]!r}", flush=True)


def ways(venv: str, mpiwrapper: str, problem: str) -> dict:
    py, mpiexec = os.path.join(venv, "bin", "python"), os.path.join(venv, "bin", "mpiexec")
    me = os.path.abspath(__file__)
    out = {"one process, one CPU device": ([py, me, "--worker", "one"], {"JAX_NUM_CPU_DEVICES": "1"}),
           "one process, 2 CPU devices": ([py, me, "--worker", "one"], {"JAX_NUM_CPU_DEVICES": "2"}),
           "2 ranks through the package, the mpich wheel": ([mpiexec, "-n", "2", py, me, "--worker", "mpi"], {}),
           "2 ranks over gloo": ([mpiexec, "-n", "2", py, me, "--worker", "gloo"], {}),
           # Hydra binds nothing by default (the package binds its ranks itself; gloo's are left to
           # the launcher): gloo's ranks each on a core, as Open MPI's mpirun and srun place them
           "2 ranks over gloo, each bound to a core (mpiexec -bind-to core)": (
               [mpiexec, "-bind-to", "core", "-n", "2", py, me, "--worker", "gloo"], {})}
    if os.path.exists("/usr/bin/mpirun.openmpi"):
        ompi = ["/usr/bin/mpirun.openmpi", "--oversubscribe", "-n", "2", "-x", "PYTHONPATH", "-x", "JAX_PLATFORMS",
                "-x", "MPI_COLLECTIVES_BENCH_COORDINATOR", "-x", "MPI_COLLECTIVES_BENCH_MPIWRAPPER",
                "-x", "MPI_COLLECTIVES_LAYOUT_NOTE"]
        out["2 ranks through the package, Debian's Open MPI 4.1"] = (ompi + [py, me, "--worker", "mpi"], {})
        if mpiwrapper:
            out["2 ranks, XLA's own MPI collectives through MPIwrapper, Debian's Open MPI 4.1"] = (
                ompi + [py, me, "--worker", "xla-mpi"], {"MPI_COLLECTIVES_BENCH_MPIWRAPPER": mpiwrapper})
    if problem == "j1j2":  # the round's question (issue 74): each package way again with the round off; gloo
        # takes 10x as long on this model and is left out
        for name in [n for n in out if "through the package" in n]:
            cmd, extra = out[name]
            off = cmd[:1] + (["-x", "MPI_COLLECTIVES_NODE_PATH_ROUND"] if "openmpi" in cmd[0] else []) + cmd[1:]
            out[name + ", the round off"] = (off, {**extra, "MPI_COLLECTIVES_NODE_PATH_ROUND": "0"})
        out = {name: way for name, way in out.items() if "gloo" not in name}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--mpiwrapper", default="", help="libmpiwrapper.so (scripts/build_mpiwrapper.sh)")
    parser.add_argument("--venv", default=os.path.join(ROOT, ".venv-mpich"))
    parser.add_argument("--problem", choices=("ising", "j1j2"), default="ising",
                        help="ising: examples/netket_vmc.py's ring; j1j2: an SR-heavy model (CG steps' tiny "
                             "all-reduces), each package way also with the round off")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.iterations, args.problem)
        return 0
    from mpi_collectives.tools.launching import free_port  # the venv's package (run from outside the checkout)
    results, energies = {}, {}
    for _ in range(args.rounds):
        for name, (cmd, extra) in ways(args.venv, args.mpiwrapper, args.problem).items():
            env = dict(os.environ, JAX_PLATFORMS="cpu", MPI_COLLECTIVES_LAYOUT_NOTE="0",
                       OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       MPI_COLLECTIVES_BENCH_COORDINATOR=f"127.0.0.1:{free_port()}", **extra)
            try:
                proc = subprocess.run(cmd + ["--iterations", str(args.iterations), "--problem", args.problem],
                                      env=env, capture_output=True, text=True, timeout=600, cwd="/tmp")
                ms = [float(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("MS ")]
                energies.setdefault(name, set()).update(
                    line.split()[1] for line in proc.stdout.splitlines() if line.startswith("ENERGY "))
                why = f"exit {proc.returncode}: {proc.stderr[-400:]}"
                if not ms:  # all of it: the end alone once cut a traceback off
                    with tempfile.NamedTemporaryFile("w", prefix="netket_ab-", suffix=".log", delete=False) as f:
                        f.write(proc.stderr)
                    why += f" (whole output: {f.name})"
            except subprocess.TimeoutExpired:
                ms, why = [], "no end within 600 s"
            results.setdefault(name, []).append(ms[0] if ms else None)
            if not ms:
                print(f"{name}: no figure ({why})", file=sys.stderr)
    for name, figures in results.items():
        got = [f for f in figures if f is not None]
        median = f"{statistics.median(got):7.1f}" if got else "      -"
        print(f"{name:80s} {median} ms an iteration  {figures}")
    # The same seeds draw the same samples in every way: the last energy differs only by the sums' rounding.
    print("last energy: " + "; ".join(f"{name}: {', '.join(sorted(e))}" for name, e in energies.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

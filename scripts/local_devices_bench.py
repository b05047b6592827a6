"""Several CPU devices per process over MPI, against one device per process
and against gloo, in one run (issue 18's benchmark):

    python scripts/local_devices_bench.py [--rounds 2] [--json docs/benchmarks/local_devices.json]

Run with the venv's python (scripts/setup_env.sh mpich). Launches, ROUNDS
times in turn: 2 processes x 2 devices over MPI, 4 x 1 over MPI, 2 x 2 over
gloo, 4 x 1 over gloo; each times a jitted shard_map psum, all_gather and
ppermute over a mesh of all 4 devices, at 8 B, 1 MiB and 16 MiB per device
(float32), median of many calls, results checked once. Prints a table of the
medians (the range over rounds) and ratios against MPI 4 x 1, measured in
the same run, and writes them as JSON.

    python scripts/local_devices_bench.py --worker mpi|gloo   (what each launch runs)
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import backends  # noqa: E402  (scripts/backends.py: the package's start-up and launching)

SIZES = (8, 1 << 20, 16 << 20)
REPS = {8: 300, 1 << 20: 40, 16 << 20: 8}
COLLECTIVES = ("psum", "all_gather", "ppermute")
CONFIGS = (("mpi", 2, 2), ("mpi", 4, 1), ("gloo", 2, 2), ("gloo", 4, 1))


def worker(backend):
    jax, rank, _ = backends.start(backend, os.environ["BENCH_PORT"])
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    from mpi_collectives.integration.jax_compat import shard_map
    devices = np.array(sorted(jax.devices(), key=lambda d: (d.process_index, d.id)))
    D = len(devices)
    mesh = Mesh(devices, ("x",))
    spec = P("x")
    shift = [(i, (i + 1) % D) for i in range(D)]
    bodies = {"psum": lambda v: jax.lax.psum(v, "x"),
              "all_gather": lambda v: jax.lax.all_gather(v, "x", tiled=True)[None],
              "ppermute": lambda v: jax.lax.ppermute(v, "x", shift)}
    results = {}
    for nbytes in SIZES:
        n = max(nbytes // 4, 2)
        full = (np.arange(D * n).reshape(D, n) % 5).astype(np.float32)
        x = jax.make_array_from_callback(full.shape, NamedSharding(mesh, spec), lambda index: full[index])
        for name in COLLECTIVES:
            f = jax.jit(shard_map()(bodies[name], mesh=mesh, in_specs=spec, out_specs=spec))
            out = f(x)
            for shard in out.addressable_shards:  # right before timed
                i = shard.index[0].start or 0
                want = {"psum": full.sum(0), "all_gather": full.reshape(-1),
                        "ppermute": full[(i - 1) % D]}[name]
                assert np.array_equal(np.asarray(shard.data).reshape(-1), want), (name, nbytes, i)
            for _ in range(3):
                f(x).block_until_ready()
            times = []
            for _ in range(REPS[nbytes]):
                start = time.perf_counter()
                f(x).block_until_ready()
                times.append(time.perf_counter() - start)
            results[f"{name}/{nbytes}"] = float(np.median(times) * 1e6)
    if rank == 0:
        print("RESULT " + json.dumps(results), flush=True)


def launch(backend, processes, devices, port):
    launching = backends.launching
    env = dict(os.environ, JAX_NUM_CPU_DEVICES=str(devices), BENCH_PORT=str(port))
    env.pop("MPITRAMPOLINE_LIB", None)
    if backend == "gloo":
        env["MPI_COLLECTIVES_BIND_CPUS"] = "0"
    proc = launching.run([launching.mpiexec_path(), "-n", str(processes), sys.executable,
                          os.path.abspath(__file__), "--worker", backend], env=env, timeout=900)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{backend} {processes}x{devices} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[0][len("RESULT "):])


def size_name(nbytes):
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes} B"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", choices=("mpi", "gloo"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker)
    runs = {f"{b} {p}x{d}": [] for b, p, d in CONFIGS}
    for r in range(args.rounds):
        for backend, processes, devices in CONFIGS:
            runs[f"{backend} {processes}x{devices}"].append(
                launch(backend, processes, devices, backends.launching.free_port()))
            print(f"round {r + 1}: {backend} {processes}x{devices} done", file=sys.stderr, flush=True)
    import statistics
    table = {}
    for config, rounds in runs.items():
        table[config] = {key: statistics.median(run[key] for run in rounds) for key in rounds[0]}
    base = table["mpi 4x1"]
    print("Median time of one call in us (range over rounds); x = against MPI 4 processes x 1 device, same run")
    print("| collective | size per device | " + " | ".join(runs) + " |")
    print("|---|---|" + "---|" * len(runs))
    for name in COLLECTIVES:
        for nbytes in SIZES:
            key = f"{name}/{nbytes}"
            cells = []
            for config, rounds in runs.items():
                values = [run[key] for run in rounds]
                cells.append(f"{min(values):,.0f}-{max(values):,.0f} ({table[config][key] / base[key]:.2f}x)")
            print(f"| {name} | {size_name(nbytes)} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"unit": "us, median of calls; per configuration the median over rounds",
                       "rounds": {c: r for c, r in runs.items()}, "median": table}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

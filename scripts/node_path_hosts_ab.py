#!/usr/bin/env python3
"""The node path's all-reduce composed across nodes, against the MPI library's own,
on the simulated cluster (tests/cluster/cluster_harness.py: hosts in network
namespaces, shared memory within each, TCP between them): a job of 2 ranks on each
of 2 hosts runs the bench worker's JAX all-reduces with
MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1 and =0 in interleaved launches, then
prints per size the median of the rounds and their ratio (composed / library),
and appends the lines to docs/benchmarks/node-path-across-hosts.txt. Needs root.

    sudo python3 scripts/node_path_hosts_ab.py [--family mpich] [--rounds 3] [--sizes 1048576,...]

The hosts share the machine's cores: the figures compare two ways of moving the
same bytes on the same machine, not a real network's (docs/benchmarks.md says what
they do and do not show)."""
import argparse
import datetime
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
from cluster_harness import Cluster, why_not_here  # noqa: E402

RESULTS = os.path.join(ROOT, "docs", "benchmarks", "node-path-across-hosts.txt")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", default="mpich", help="a family with a venv at .venv-FAMILY (scripts/setup_env.sh)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-host", type=int, default=2, help="ranks on each of the 2 hosts")
    parser.add_argument("--sizes", default="262144,1048576,4194304,16777216,67108864")
    parser.add_argument("--scale", default="0.5", help="the bench worker's iteration scale")
    args = parser.parse_args()
    reason = why_not_here()
    if reason:
        raise SystemExit(f"node_path_hosts_ab.py: {reason}")
    venv = os.path.join(ROOT, f".venv-{args.family}")
    py = os.path.join(venv, "bin", "python")
    out = tempfile.mkdtemp(prefix="mpic-node-path-hosts-")
    cluster = Cluster(os.path.join(out, "cluster"), hosts=2, outsider=False)
    n = 2 * args.per_host
    env = {k: v for k, v in os.environ.items() if k not in ("MPITRAMPOLINE_LIB", "JAX_CPU_COLLECTIVES_IMPLEMENTATION")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", JAX_PLATFORMS="cpu",
               MPI_COLLECTIVES_LAYOUT_NOTE="0", MPI_COLLECTIVES_NODE_PATH="1", MPI_COLLECTIVES_NODE_PATH_MIN="0",
               MPI_COLLECTIVES_NODE_PATH_MAX="0", MPI_COLLECTIVES_NODE_PATH_COLLECTIVES="all-reduce",
               PATH=f"{venv}/bin:{os.environ['PATH']}")
    try:
        cluster.start_hosts()
        launch, extra = cluster.ssh_launch(args.family, venv, ["node1", "node2"], per_host=[args.per_host] * 2)
        env.update(extra, MPI_COLLECTIVES_BENCH_COORDINATOR=f"{cluster.hosts[0].address}:29412")
        for i in range(args.rounds):
            for across in ("1", "0"):
                result = os.path.join(out, f"{across}-{i}.json")
                cmd = launch + ["-n", str(n), py, "-m", "mpi_collectives.tools.bench.worker", "jax-mpi", result,
                                args.sizes, args.scale, "all-reduce"]
                proc = subprocess.run(cluster.command("node1", cmd, cwd=out), capture_output=True, text=True,
                                      env=dict(env, MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=across), timeout=900)
                if proc.returncode != 0:
                    raise SystemExit(f"launch failed ({across=}, round {i}): exit {proc.returncode}\n"
                                     f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    finally:
        cluster.stop()
    runs = {p: [json.load(open(f))["results"]["all-reduce"] for f in sorted(glob.glob(os.path.join(out, f"{p}-*.json")))]
            for p in "10"}
    lines = [f"# {datetime.date.today()} {args.family}, {n} ranks on 2 simulated hosts ({args.per_host} each), "
             f"{os.cpu_count()} cores, {args.rounds} interleaved rounds: JAX all-reduce, composed / library"]
    for size in runs["1"][0]:
        on, off = ([statistics.median(r[size]) * 1e6 for r in runs[p]] for p in "10")
        lines.append(f"{args.family} all-reduce {int(size):>10d} B  composed {statistics.median(on):9.0f} us "
                     f"{[round(x) for x in on]}  library {statistics.median(off):9.0f} us {[round(x) for x in off]}  "
                     f"ratio {statistics.median(on) / statistics.median(off):.2f}")
    print("\n".join(lines))
    with open(RESULTS, "a") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The benchmark across hosts: two simulated hosts (tests/cluster/cluster_harness.py:
network namespaces joined by a veth bridge, TCP only between them), one rank
on each, every path of `python -m mpi_collectives bench` from 8 B to 16 MiB,
for every MPI family asked for. Needs root (namespaces).

    sudo python3 scripts/bench_hosts.py [--families mpich openmpi impi] [--smoke]

Each family writes docs/benchmarks/across-hosts/<family>.json and .png; a
full run then writes that folder's README.md and the across-hosts block of
docs/benchmarks.md (mpi_collectives.tools.bench.summary --block bench-hosts-results).

The hosts share this machine's cores (with --core-per-host, each has one of
its own), its memory and its kernel's network stack: a round trip between
them is a veth's (tens of microseconds), not a real network's, and `tc
netem` is not there to add one. The JSON says so. Each host's name resolves
to its cluster address on itself: JAX's gloo advertises that address to its
peers, and on a host whose own name is 127.0.1.1 (a fresh Debian install)
gloo across hosts cannot connect at all."""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
import backends  # noqa: E402  (scripts/backends.py: the package's launching, without a venv)
from cluster_harness import Cluster, why_not_here  # noqa: E402

WHERE = ("2 simulated hosts on one {ncpu}-core machine{cores}: network namespaces joined by a veth bridge, "
         "TCP between them, no added latency (tests/cluster/cluster_harness.py)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="+", default=["mpich", "openmpi", "impi"])
    parser.add_argument("--out-dir", default=os.path.join(ROOT, "docs", "benchmarks", "across-hosts"))
    parser.add_argument("--smoke", action="store_true", help="two sizes, few iterations: checks that it works")
    parser.add_argument("--scale", default="2", help="multiplies every iteration count (default: 2)")
    parser.add_argument("--core-per-host", action="store_true",
                        help="pin each host's processes to a core of its own (with 2 cores: one core per rank, "
                             "where gloo's threads then wait a scheduler tick, about 4 ms, per call)")
    args = parser.parse_args()
    reason = why_not_here()
    if reason:
        raise SystemExit(f"bench_hosts.py: {reason}")
    os.makedirs(args.out_dir, exist_ok=True)
    cluster = Cluster(tempfile.mkdtemp(prefix="mpic-bench-hosts-"), hosts=2, outsider=False,
                      own_name_on_loopback=False,  # gloo advertises what its host name resolves to
                      core_per_host=args.core_per_host)
    status, venv = 0, None
    try:
        cluster.start_hosts()
        for family in args.families:
            env = dict(os.environ)
            backends.launching.allow_open_mpi_anywhere(env)
            for var in ("MPITRAMPOLINE_LIB", "JAX_CPU_COLLECTIVES_IMPLEMENTATION"):
                env.pop(var, None)
            venv = subprocess.run(["bash", os.path.join(ROOT, "scripts", "setup_env.sh"), family], env=env,
                                  check=True, capture_output=True, text=True).stdout.strip()
            prefix, extra = cluster.ssh_launch(family, venv, ["node1", "node2"])
            command = " ".join(prefix)
            env.update(extra, PATH=f"{venv}/bin:{env['PATH']}")
            out = os.path.join(args.out_dir, family)
            print(f"== {family} across 2 hosts: {command}", flush=True)
            bench = [os.path.join(venv, "bin", "python"), "-m", "mpi_collectives", "bench", "--launcher", command,
                     "--coordinator-host", cluster.hosts[0].address,
                     "--where", WHERE.format(ncpu=os.cpu_count(),
                                            cores=", a core each" if args.core_per_host else ", sharing its cores"),
                     "--max-bytes", str(16 << 20),
                     "--out", out + ".json", "--plot", out + ".png", "--timeout", "900", "--scale", args.scale]
            # From the output folder, on node1: the source tree would shadow the installed package.
            status |= subprocess.run(cluster.command("node1", bench + (["--smoke"] if args.smoke else []),
                                                     cwd=args.out_dir), env=env).returncode
    finally:
        cluster.stop()
    if status == 0 and venv and not args.smoke:
        status = subprocess.run([os.path.join(venv, "bin", "python"), "-m", "mpi_collectives.tools.bench.summary",
                                 args.out_dir, "--readme", os.path.join(ROOT, "docs", "benchmarks.md"),
                                 "--block", "bench-hosts-results"], cwd=args.out_dir).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The scale bench across simulated hosts (issue 82): `mpi-collectives bench --growth`'s launches
(the package, the MPI library alone, gloo) on H hosts of R ranks each, for each H asked, the hosts
tests/cluster/cluster_harness.py makes (network namespaces joined by a veth bridge, TCP between
them, each with its own /dev/shm). Needs root.

    sudo python3 scripts/scale_hosts.py [--family mpich] [--hosts 2,4,8] [--per-host 4]
        [--out docs/benchmarks/scale/hosts-mpich.json]

One JSON file with every H's results keyed by ranks (H x R) and the hosts in each launch's
"hosts"; the table of mpi_collectives.tools.bench.scale printed. The hosts share this machine's
cores and memory: every launch is oversubscribed past the machine's cores, as the local run is,
and a round trip between hosts is a veth's, not a network's."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
from cluster_harness import Cluster, why_not_here  # noqa: E402

WHERE = ("{hosts} simulated hosts x {per} ranks on one {ncpu}-core machine: network namespaces joined by a veth "
         "bridge, TCP between them, no added latency (tests/cluster/cluster_harness.py)")


def checks(cluster, counts, args, venv, env) -> int:
    """at_scale.py's exact part on each host count; one line each, non-zero if any rank's line is missing."""
    import re
    status = 0
    program = os.path.join(ROOT, "tests", "programs", "at_scale.py")
    for hosts in counts:
        names = [h.name for h in cluster.hosts[:hosts]]
        prefix, extra = cluster.ssh_launch(args.family, venv, names, per_host=[args.per_host] * hosts)
        ranks = hosts * args.per_host
        run_env = dict(env, **extra, PATH=f"{venv}/bin:{env['PATH']}", JAX_PLATFORMS="cpu",
                       MPI_COLLECTIVES_LAYOUT_NOTE="0")
        proc = subprocess.run(cluster.command(names[0], prefix + ["-n", str(ranks), os.path.join(venv, "bin", "python"),
                                                                  program, "exact"], cwd=ROOT),
                              env=run_env, capture_output=True, text=True, timeout=900)
        exact = sorted(int(r) for r in re.findall(r"EXACT rank (\d+)/\d+", proc.stdout))
        ok = proc.returncode == 0 and exact == list(range(ranks))
        status |= not ok
        print(f"at_scale.py across {hosts} hosts x {args.per_host} ranks: {'exact' if ok else 'FAILED'} "
              f"(exit {proc.returncode}, {len(exact)} of {ranks} ranks' EXACT lines)", flush=True)
        if not ok:
            print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
    return status


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", default="mpich")
    parser.add_argument("--hosts", default="2,4,8", help="host counts, one launch set each (default: 2,4,8)")
    parser.add_argument("--per-host", type=int, default=4, help="ranks on each host (default: 4)")
    parser.add_argument("--paths", default="package,library,gloo")
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks", "scale", "hosts-mpich.json"))
    parser.add_argument("--checks", action="store_true",
                        help="instead of the bench: tests/programs/at_scale.py (every collective exact over 1-D and "
                             "2-D meshes) on each host count, every rank's EXACT line required")
    args = parser.parse_args()
    reason = why_not_here()
    if reason:
        raise SystemExit(f"scale_hosts.py: {reason}")
    counts = [int(h) for h in args.hosts.split(",")]
    env = dict(os.environ)
    for var in ("MPITRAMPOLINE_LIB", "JAX_CPU_COLLECTIVES_IMPLEMENTATION"):
        env.pop(var, None)
    venv = subprocess.run(["bash", os.path.join(ROOT, "scripts", "setup_env.sh"), args.family], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    cluster = Cluster(tempfile.mkdtemp(prefix="mpic-scale-hosts-"), hosts=max(counts), outsider=False,
                      own_name_on_loopback=False)  # gloo advertises what its host name resolves to
    merged = {"meta": None, "results": {}}
    status = 0
    try:
        cluster.start_hosts()
        if args.checks:
            return checks(cluster, counts, args, venv, env)
        for hosts in counts:
            names = [h.name for h in cluster.hosts[:hosts]]
            prefix, extra = cluster.ssh_launch(args.family, venv, names, per_host=[args.per_host] * hosts)
            run_env = dict(env, **extra, PATH=f"{venv}/bin:{env['PATH']}")
            part = os.path.join(tempfile.mkdtemp(prefix="scale-hosts-"), "part.json")
            ranks = hosts * args.per_host
            print(f"== {hosts} hosts x {args.per_host} ranks: {' '.join(prefix)}", flush=True)
            bench = [os.path.join(venv, "bin", "python"), "-m", "mpi_collectives", "bench", "--growth", str(ranks),
                     "--paths", args.paths, "--launcher", " ".join(prefix),
                     "--coordinator-host", cluster.hosts[0].address, "--out", part, "--plot", "",
                     "--where", WHERE.format(hosts=hosts, per=args.per_host, ncpu=os.cpu_count())]
            code = subprocess.run(cluster.command(names[0], bench, cwd=os.path.dirname(part)), env=run_env).returncode
            status |= code
            if code == 0:
                with open(part) as f:
                    got = json.load(f)
                merged["meta"] = merged["meta"] or dict(got["meta"], where=WHERE.format(
                    hosts="2-16", per=args.per_host, ncpu=os.cpu_count()))
                merged["results"].update(got["results"])
                with open(args.out, "w") as f:
                    json.dump(merged, f, indent=1)
    finally:
        cluster.stop()
    sys.path.insert(0, ROOT)
    from mpi_collectives.tools.bench.scale import table
    if merged["results"]:
        print(table(merged["results"]))
    return status


if __name__ == "__main__":
    sys.exit(main())

"""`mpi-collectives bench --growth 2,4,8,16,32`: how every cost the package
adds grows with the ranks (issue 82).

At each rank count, three launches one after the other, interleaved in that
order at every count: the package (the node path as configured), the MPI
library alone under the same wrapper (MPI_COLLECTIVES_NODE_PATH=0), and JAX's
gloo. Each rank of each launch runs scale_worker.py and writes what it
measured; this side gathers them into one JSON file, a table and a plot of
each cost against the ranks (log-log), and states each cost's growth order
from a fit over the counts of 8 ranks and up.

Counts do not move with the machine's load (memory, threads, descriptors,
sockets and /dev/shm a rank; the wrapper's calls and bytes, the round's slots
read and the reads in place a collective; the package's key-value calls);
times do, more so with more ranks than cores: the JSON file records the
cores beside each launch."""
import argparse
import datetime
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from .. import launching
from .run import add_launcher_options, check_launcher, launch_command, launch_environment, rank_counts

PATHS = ("package", "library", "gloo", "window")  # window: the package with the window's copies, no reads in place


def launch(args, ranks: int, path: str) -> dict:
    """One launch of the worker on `ranks` ranks over `path`: its ranks' records, aggregated."""
    out_dir = tempfile.mkdtemp(prefix=f"scale-{ranks}-{path}-")
    shm_before = os.path.join(out_dir, "shm-before.json")
    with open(shm_before, "w") as f:
        json.dump(os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else [], f)
    extra = {"MPI_COLLECTIVES_BENCH_SHM_BEFORE": shm_before}
    if path == "library":
        extra["MPI_COLLECTIVES_NODE_PATH"] = "0"
    if path == "window":
        extra["MPI_COLLECTIVES_NODE_PATH_DIRECT"] = "0"
    env = launch_environment(args, extra)
    cmd = launch_command(args, ranks, ["mpi_collectives.tools.bench.scale_worker",
                                       "package" if path == "window" else path, out_dir, str(args.iterations)])
    env["MPI_COLLECTIVES_BENCH_LAUNCHED"] = repr(time.time())
    start = time.perf_counter()
    try:
        proc = launching.run(cmd, env=env, timeout=args.timeout, stderr=None)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"mpi-collectives bench --growth: `{' '.join(cmd)}` took more than {args.timeout} s and "
                         "was ended (--timeout)") from None
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"mpi-collectives bench --growth: `{' '.join(cmd)}` failed (exit {proc.returncode}); its "
                         "output is above")
    records = []
    for r in range(ranks):
        with open(os.path.join(out_dir, f"rank-{r}.json")) as f:
            records.append(json.load(f))
    shutil.rmtree(out_dir, ignore_errors=True)
    return aggregate(records, wall)


def aggregate(records: list, wall: float) -> dict:
    """One launch's figures from its ranks' records: a start-up part is its slowest rank's (the job
    waits for it), a loop's time the median of its ranks' medians, a count per rank the largest and
    the sum, a cost per collective the largest rank's."""
    out = {"ranks": len(records), "hosts": len({r["host"] for r in records}), "launch_s": wall,
           "startup": {k: max(r["startup"][k] for r in records) for k in records[0]["startup"]},
           "loops": {k: float(np.median([r["loops"][k] for r in records])) for k in records[0]["loops"]},
           "held_max": {k: max(r["held"][k] for r in records) for k in records[0]["held"]},
           "held_sum": {k: sum(r["held"][k] for r in records) for k in records[0]["held"]},
           # rank 0 hosts JAX's coordinator (a connection a rank): the others' apart
           "held_rank0": dict(next(r["held"] for r in records if r["rank"] == 0)),
           "held_others_max": {k: max((r["held"][k] for r in records if r["rank"] != 0), default=0)
                               for k in records[0]["held"]},
           "shm": records[0].get("shm", {})}
    if records[0].get("costs"):
        out["costs"] = {loop: {k: max(r["costs"][loop][k] for r in records) for k in records[0]["costs"][loop]}
                        for loop in records[0]["costs"]}
        out["windows"] = {k: max(r["windows"][k] for r in records) for k in records[0]["windows"]}
    calls = {}
    for r in records:
        for name, (n, rows) in r.get("key_value", {}).items():
            total = calls.setdefault(name, [0, 0])
            total[0] += n
            total[1] += rows
    out["key_value"] = calls  # the whole job's, on the one coordinator
    return out


def growth(ranks: list, values: list) -> float:
    """The exponent k of a fit value ~ ranks^k over the counts of 8 ranks and more (all counts where
    fewer than three are that large); NaN where a value is 0."""
    pts = [(p, v) for p, v in zip(ranks, values) if p >= 8] if sum(p >= 8 for p in ranks) >= 3 else \
        list(zip(ranks, values))
    if len(pts) < 2 or any(v <= 0 for _, v in pts):
        return float("nan")
    x, y = np.log([p for p, _ in pts]), np.log([v for _, v in pts])
    return float(np.polyfit(x, y, 1)[0])


# What the table and the plot show: (label, path, getter). A getter returns None where the launch has no
# such figure (gloo has no wrapper to count).
def _cost(loop, key):
    return lambda m: m.get("costs", {}).get(loop, {}).get(key)


SERIES = [
    ("start-up, launch to first psum (s)", ("package", "library", "gloo"), lambda m: m["startup"]["total"]),
    ("initialize()/jax.distributed (s)", ("package", "gloo"), lambda m: m["startup"]["initialize"]),
    ("psum 8 B (us)", ("package", "library", "gloo"), lambda m: m["loops"]["psum_8"] * 1e6),
    ("psum 1 MiB (ms)", ("package", "window", "library", "gloo"), lambda m: m["loops"]["psum_1048576"] * 1e3),
    ("2-D mesh psum along columns, 8 B (us)", ("package", "library", "gloo"), lambda m: m["loops"]["mesh2d_c_8"] * 1e6),
    ("SR step, 10 psums of 64 B (us)", ("package", "library", "gloo"), lambda m: m["loops"]["sr_step_10x64B"] * 1e6),
    ("RSS a rank, largest (MB)", ("package", "library", "gloo"), lambda m: m["held_max"]["rss_mb"]),
    ("PSS a rank, largest (MB)", ("package", "library", "gloo"), lambda m: m["held_max"].get("pss_mb")),
    ("private memory a rank, largest (MB)", ("package", "library", "gloo"), lambda m: m["held_max"].get("private_mb")),
    ("threads a rank", ("package", "library", "gloo"), lambda m: m["held_max"]["threads"]),
    ("descriptors, rank 0", ("package", "library", "gloo"), lambda m: m["held_rank0"]["fds"]),
    ("descriptors, other ranks' most", ("package", "library", "gloo"), lambda m: m["held_others_max"]["fds"]),
    ("sockets, rank 0", ("package", "library", "gloo"), lambda m: m["held_rank0"]["sockets"]),
    ("sockets, other ranks' most", ("package", "library", "gloo"), lambda m: m["held_others_max"]["sockets"]),
    ("/dev/shm made, node (MiB)", ("package", "library", "gloo"), lambda m: m["shm"].get("bytes", 0) / 2 ** 20),
    ("/dev/shm touched, node (MiB)", ("package", "library"), lambda m: m["shm"].get("used_bytes", 0) / 2 ** 20),
    ("node path windows' bytes a rank (MiB)", ("package",), lambda m: m.get("windows", {}).get("bytes", 0) / 2 ** 20),
    ("check's bytes a psum 8 B", ("package", "library"), _cost("psum_8", "check_bytes")),
    ("round's slots read a psum 8 B", ("package",), _cost("psum_8", "round_slots")),
    ("library calls a psum 8 B", ("package", "library"),
     lambda m: (m.get("costs", {}).get("psum_8", {}).get("checks", 0) +
                m.get("costs", {}).get("psum_8", {}).get("library_calls", 0)) if m.get("costs") else None),
    ("reads in place a psum 1 MiB", ("package",), _cost("psum_1048576", "peer_reads")),
    ("bytes read in place a psum 1 MiB (MiB)", ("package",),
     lambda m: m["costs"]["psum_1048576"]["peer_read_bytes"] / 2 ** 20 if m.get("costs") else None),
    ("package's key-value calls, job", ("package",),
     lambda m: sum(n for n, _ in m["key_value"].values())),
    ("package's key-value rows read, job", ("package",),
     lambda m: sum(rows for name, (_, rows) in m["key_value"].items() if "get" in name)),
]


def table(results: dict) -> str:
    """Each series: one row a path, one column a rank count, and the fitted growth exponent."""
    counts = sorted({int(p) for p in results})
    lines = ["| cost | path | " + " | ".join(f"P={p}" for p in counts) + " | growth |",
             "|---|---|" + "---|" * len(counts) + "---|"]
    for label, paths, get in SERIES:
        for path in paths:
            values = []
            for p in counts:
                m = results.get(str(p), {}).get(path)
                v = get(m) if m else None
                values.append(v)
            if all(v is None for v in values):
                continue
            shown = [("-" if v is None else f"{v:.3g}") for v in values]
            k = growth([p for p, v in zip(counts, values) if v is not None], [v for v in values if v is not None])
            lines.append(f"| {label} | {path} | " + " | ".join(shown) + f" | {_order(k)} |")
    return "\n".join(lines)


def _order(k: float) -> str:
    if math.isnan(k):
        return "-"
    return f"P^{k:.2f}"


def plot(results: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = sorted({int(p) for p in results})
    n = len(SERIES)
    cols = 4
    fig, axes = plt.subplots(-(-n // cols), cols, figsize=(4.2 * cols, 3.2 * -(-n // cols)))
    for ax, (label, paths, get) in zip(axes.ravel(), SERIES):
        for p_name in paths:
            pts = [(p, get(results[str(p)][p_name])) for p in counts if p_name in results.get(str(p), {})]
            pts = [(p, v) for p, v in pts if v is not None and v > 0]
            if pts:
                ax.loglog([p for p, _ in pts], [v for _, v in pts], "o-", label=p_name, base=2)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("ranks", fontsize=8)
        if ax.get_lines():
            ax.legend(fontsize=7)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def parse(argv=None, prog="mpi-collectives bench --growth", parser_class=argparse.ArgumentParser):
    parser = parser_class(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--growth", dest="ranks", type=rank_counts, default=[2, 4, 8, 16, 32],
                        help="the rank counts, e.g. 2,4,8,16,32 (default)")
    parser.add_argument("--paths", default=",".join(PATHS[:3]),
                        help=f"the paths at every count, in the order run: {', '.join(PATHS)} (the package with "
                             f"the window's copies instead of reads in place) (default: {','.join(PATHS[:3])})")
    parser.add_argument("--iterations", type=float, default=1.0, help="multiplies every loop's calls")
    parser.add_argument("--out", default="scale.json", help="the JSON file (default: scale.json)")
    parser.add_argument("--plot", default="scale.png", help="the PNG of every cost against the ranks")
    add_launcher_options(parser)
    parser.add_argument("--timeout", type=int, default=1200, help="seconds for each launch (default: 1200)")
    parser.add_argument("--where", default="", metavar="TEXT", help="what the machine is, recorded with the results")
    parser.add_argument("--markdown", default="", metavar="PAGE",
                        help="also write the table as a Markdown page, with where it was measured and the plot")
    args = parser.parse_args(argv)
    check_launcher(parser, args)
    return args


def page(meta: dict, results: dict, plot_name: str = "") -> str:
    """A Markdown page of one run: where, then the table, then the plot."""
    where = meta.get("where") or f"{meta.get('cores')} cores"
    head = (f"Measured {meta.get('date')} by `mpi-collectives bench --growth` on {where}: {meta.get('mpi')} "
            f"({meta.get('mpi_detail')}), jax {meta.get('jax')}, Python {meta.get('python')}. Each rank count "
            "ran three launches one after the other: the package, the library alone under the same wrapper "
            "(`MPI_COLLECTIVES_NODE_PATH=0`), gloo. Times are medians; past the machine's cores they are "
            "oversubscribed times, to be read against each other, not as a node's. Counts do not depend on "
            "the load. Growth: the exponent of a fit over 8 ranks and up.")
    out = ["# " + (meta.get("title") or "How each cost grows with the ranks"), "", head, "", table(results), ""]
    if plot_name:
        out += [f"![each cost against the ranks, log-log]({plot_name})", ""]
    return "\n".join(out)


def main(argv=None, prog="mpi-collectives bench --growth", parser_class=argparse.ArgumentParser) -> int:
    args = parse(argv, prog, parser_class)
    paths = [p for p in args.paths.split(",") if p]
    bad = [p for p in paths if p not in PATHS]
    if bad:
        raise SystemExit(f"mpi-collectives bench --growth: unknown path(s) {', '.join(bad)}; choose from "
                         f"{', '.join(PATHS)}")
    from ...base import mpi as native
    results = {}
    meta = {"date": datetime.date.today().isoformat(), "cores": os.cpu_count(),
            "machine": platform.processor() or platform.machine(), "mpi": native.family(),
            "mpi_detail": native.family_detail(), "where": args.where, "python": platform.python_version()}
    try:
        import jax
        meta["jax"] = jax.__version__
    except ImportError:
        pass
    for ranks in args.ranks:
        for path in paths:
            print(f"== {ranks} ranks, {path}", file=sys.stderr, flush=True)
            results.setdefault(str(ranks), {})[path] = launch(args, ranks, path)
            with open(args.out, "w") as f:  # as it goes: a later count that does not fit keeps the earlier
                json.dump({"meta": meta, "results": results}, f, indent=1)
    print(table(results))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(page(meta, results, os.path.relpath(args.plot, os.path.dirname(os.path.abspath(args.markdown)))
                         if args.plot else ""))
    if args.plot:
        try:
            plot(results, args.plot)
        except ImportError:
            print("mpi-collectives bench --growth: matplotlib is not installed; no plot", file=sys.stderr)
    return 0


def readme(out: str, runs: list) -> None:
    """One page of several committed runs (the VM's, across hosts'), each its where, table and plot:
    `python -m mpi_collectives.tools.bench.scale readme PAGE RUN.json [RUN.json ...]` (a run's plot is
    the PNG beside its JSON file, where there is one)."""
    parts = ["# How each cost grows with the ranks", "",
             "Written by `python -m mpi_collectives.tools.bench.scale readme` from the JSON files beside it, "
             "which `mpi-collectives bench --growth` and `scripts/scale_hosts.py` wrote; what they mean: "
             "[scale](../../scale.md).", ""]
    for run in runs:
        with open(run) as f:
            got = json.load(f)
        png = os.path.splitext(run)[0] + ".png"
        body = page(got["meta"], got["results"], os.path.basename(png) if os.path.exists(png) else "")
        parts += ["## " + os.path.basename(run)] + body.split("\n")[1:]
    with open(out, "w") as f:
        f.write("\n".join(parts))


if __name__ == "__main__":
    if sys.argv[1:2] == ["readme"]:
        readme(sys.argv[2], sys.argv[3:])
        sys.exit(0)
    sys.exit(main())

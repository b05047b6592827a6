"""Markdown from the benchmark's JSON files (one per MPI family):

    python -m mpi_collectives.tools.bench.summary docs/benchmarks [--readme docs/benchmarks.md]

writes docs/benchmarks/README.md (every table in full) and, with --readme,
replaces the README's block between <!-- bench-results:begin/end --> with
the short version: targets per family, all-reduce at a few sizes, start-up,
import cost and host helpers."""
import argparse
import glob
import json
import os
import re
import sys

from .report import median_us, table, targets, user_table

NAMES = {"mpich": "MPICH", "impi": "Intel MPI", "openmpi": "Open MPI", "standard": "MPI-5 standard ABI",
         "debian-openmpi": "Debian's Open MPI"}
SHOWN_SIZES = [8, 1024, 65536, 1048576, 16777216, 268435456]


def load(folder):
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        name = os.path.splitext(os.path.basename(path))[0]
        with open(path) as f:
            out[name] = json.load(f)
    return out


def human(n):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n // size} {unit}"
    return f"{n} B"


def header(runs):
    first = next(iter(runs.values()))
    versions = {}
    for data in runs.values():
        versions.update(data["versions"])
    hosts = first.get("hosts", 1)
    where = f"{first['ranks']} ranks on one node" if hosts == 1 else (
        f"{first['ranks']} ranks on {hosts} hosts ({first.get('where') or 'hosts not described'})")
    return (f"Measured on {first['date']} on {first['machine']}, {where}, "
            f"with {', '.join(f'{k} {v}' for k, v in sorted(versions.items()))}. "
            "Medians of many calls after warm-up; every result checked against NumPy.")


def targets_table(runs):
    names = list(runs)
    rows = {}
    for name in names:
        # Judged anew from the results, so that the page shows today's targets for every run.
        for target, met, measured in targets(runs[name]):
            rows.setdefault(target, {})[name] = {"met": met, "measured": measured}
    lines = ["| target | " + " | ".join(NAMES.get(n, n) for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for target, per in rows.items():
        cells = []
        for n in names:
            t = per.get(n)
            cells.append("-" if t is None else f"**{'met' if t['met'] else 'not met'}**: {t['measured']}")
        lines.append(f"| {target} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def allreduce_table(runs):
    shown = [n for n in SHOWN_SIZES if any(n in data["sizes"] for data in runs.values())]
    lines = ["| MPI | path | " + " | ".join(human(n) for n in shown) + " |",
             "|---|---|" + "---|" * len(shown)]
    for name, data in runs.items():
        r = data["results"]
        for path, label in (("jax-mpi", "JAX over MPI (ours)"),
                            ("jax-mpi-unchecked", "JAX over MPI, agreement check off"),
                            ("jax-mpi-library", "JAX over MPI, the node's own path off (the library's own)"),
                            ("jax-call", "JAX's call cost"),
                            ("C direct", "C loop, direct"), ("C via wrapper", "C loop, via wrapper"),
                            ("mpi4py", "mpi4py"), ("jax-gloo", "JAX over gloo"),
                            ("mpi4jax", "mpi4jax's allreduce inside jit"),
                            ("jax-xla-mpi", "JAX over XLA's own MPI collectives (MPIwrapper)"),
                            ("memory floor", "memory floor: every rank copies its buffer once, at once")):
            cells = [median_us(r, path, "all-reduce", n) for n in shown]
            if any(c is not None for c in cells):
                lines.append(f"| {NAMES.get(name, name)} | {label} | "
                             + " | ".join("-" if c is None else f"{c:,.1f}" for c in cells) + " |")
    return "\n".join(lines)


def node_path_table(runs):
    """The collectives the node's own data path takes, with it and without it, where a run measured both."""
    shown = [n for n in (1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28) if any(n in data["sizes"] for data in runs.values())]
    lines = ["| MPI | collective | " + " | ".join(human(n) for n in shown) + " |", "|---|---|" + "---|" * len(shown)]
    for name, data in runs.items():
        r = data["results"]
        for op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
            pairs = [(median_us(r, "jax-mpi", op, n), median_us(r, "jax-mpi-library", op, n)) for n in shown]
            if any(None not in p for p in pairs):
                lines.append(f"| {NAMES.get(name, name)} | {op} | " + " | ".join(
                    "-" if None in p else f"{p[0]:,.0f} / {p[1]:,.0f}" for p in pairs) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def extras(runs):
    lines = []
    for name, data in runs.items():
        s, i = data["startup_s"], data["import_jax_s"]
        hh = data.get("host_helpers", {})
        helpers = "; ".join(f"{k} {v['ours'] * 1e6:.0f} us against multihost_utils' {v['multihost_utils'] * 1e6:.0f} us"
                            for k, v in hh.items())
        lines.append(f"- {NAMES.get(name, name)}: launch to first `psum` {s['mpi']:.2f} s (gloo {s['gloo']:.2f} s); "
                     f"`import jax` {(i['with_wrapper'] - i['without']) * 1e3:+.0f} ms with our library loaded; "
                     f"host helpers: {helpers}.")
    return "\n".join(lines)


def short(runs, folder_link):
    users = [f"{NAMES.get(name, name)}:\n<!-- readme: not here (the benchmark's output, written from its JSON) -->"
             f"\n```\n{user_table(data).strip()}\n```"
             for name, data in runs.items() if data.get("user_loops")]
    return "\n\n".join([
        header(runs),
        targets_table(runs),
        "All-reduce of float32, median microseconds per call, by bytes per rank:",
        allreduce_table(runs),
        *([f"The node's own data path: JAX's collective with it / with it off (`MPI_COLLECTIVES_NODE_PATH=0`, "
           f"the library's own), median microseconds per call, by bytes per rank (all-gather: each rank's part). "
           f"Under Intel MPI the path is off by default, so both are the library's own there and their "
           f"difference is the run's noise:\n\n{node_path_table(runs)}"] if node_path_table(runs) else []),
        *users,
        extras(runs),
        f"Every collective, size and path, with plots: [{folder_link}]({folder_link}/README.md).",
    ])


def full(runs):
    across = next(iter(runs.values())).get("hosts", 1) > 1
    beside_xla = any("jax-xla-mpi" in data["results"] for data in runs.values())
    parts = ["# Benchmark results" + (" across hosts" if across else " beside XLA's own MPI path" if beside_xla else ""),
             (f"Written by `python3 scripts/{'bench_hosts.py' if across else 'bench.py'}` (do not edit by hand)."
              if not beside_xla else "Written by `python -m mpi_collectives bench --mpiwrapper ...` and this "
              "summary (do not edit by hand; [how](../../benchmarks.md#beside-xlas-own-mpi-path-netkets-recommended-setup))."),
             header(runs),
             "## Targets", targets_table(runs), "## Start-up, import and host helpers", extras(runs)]
    for name, data in runs.items():
        parts += [f"## {NAMES.get(name, name)}: `{data['library']}`", f"![{name}]({name}.png)",
                  "Median microseconds per call. `ours-call`: JAX over MPI minus JAX's call cost; `/floor`: that "
                  "against the C loop; `gloo/ours`; `wrap/direct`: the C loop through the wrapper against "
                  "calling MPI directly.",
                  "```\n" + table(data).strip() + "\n```"]
        if data.get("user_loops"):
            parts += ["What users see: the psum loop as a training step writes it, a data-parallel training "
                      "step with its parts (`mpi_collectives/tools/bench/user_loops.py`), and NetKet's "
                      "variational Monte Carlo iteration where NetKet is installed "
                      "(`mpi_collectives/tools/bench/monte_carlo.py`).",
                      "```\n" + user_table(data).strip() + "\n```"]
    return "\n\n".join(parts) + "\n"


def replace_block(readme, text, block="bench-results"):
    with open(readme) as f:
        content = f.read()
    pattern = re.compile(rf"(<!-- {block}:begin -->\n).*?(<!-- {block}:end -->)", re.S)
    if not pattern.search(content):
        raise SystemExit(f"{readme}: no <!-- {block}:begin/end --> block")
    with open(readme, "w") as f:
        f.write(pattern.sub(lambda m: m.group(1) + text + "\n" + m.group(2), content))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("--readme")
    parser.add_argument("--block", default="bench-results",
                        help="the README's block to replace (bench-results; bench-hosts-results for runs across hosts)")
    args = parser.parse_args(argv)
    runs = load(args.folder)
    if not runs:
        raise SystemExit(f"no benchmark JSON files in {args.folder}")
    with open(os.path.join(args.folder, "README.md"), "w") as f:
        f.write(full(runs))
    if args.readme:
        link = os.path.relpath(args.folder, os.path.dirname(os.path.abspath(args.readme)))
        replace_block(args.readme, short(runs, link), args.block)
    return 0


if __name__ == "__main__":
    sys.exit(main())

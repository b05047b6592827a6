"""`mpi-collectives layouts -- PROGRAM [ARGS]`: your program at several layouts, one launch after
another on the same nodes, and the time of each in one table: how many ranks a node should run
(docs/layout.md).

Each layout runs K ranks on each of N nodes, each rank with the node's CPUs divided by K (and, by
default, one more: one rank a node with one CPU device per CPU, JAX_NUM_CPU_DEVICES, at most 8:
NetKet's single-node recipe, --devices), the same program and arguments: the total work stays the same when the program splits a fixed
global amount (a global batch) over its ranks, as data-parallel JAX programs do. In ARGS, {ranks},
{per_node} and {cpus} become the layout's rank count, ranks per node and CPUs per rank, for a
program that must be told.

The time is each launch's wall-clock time (start-up included), or with --time REGEX the number
the program prints (the first group of REGEX's last match in its output: a step time, say); the
median over --repeat launches. Without --time, one more launch a layout times start-up alone
(the ranks, Python, jax and initialize()), and a warning says when start-up is a large part of the
wall-clock times, or decides which layout looks fastest: a short run then compares start-ups.
Launches go through srun inside a Slurm allocation, else the mpiexec beside this Python;
--launcher names another (srun, Hydra's mpiexec, Open MPI's mpirun: each gets its own way of
saying ranks per node and CPUs per rank).
"""
import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time

from . import launching

# What a program's arguments may ask for, filled in for each layout (launch_line).
PLACEHOLDERS = {"{ranks}": lambda ranks, per_node, cpus: ranks,
                "{per_node}": lambda ranks, per_node, cpus: per_node,
                "{cpus}": lambda ranks, per_node, cpus: cpus}


def node_cpus(environ=os.environ) -> int:
    """CPUs of a node for the job: Slurm's count in an allocation, else this process's CPU set."""
    text = environ.get("SLURM_CPUS_ON_NODE", "")
    return int(text) if text.isdigit() and int(text) > 0 else len(os.sched_getaffinity(0))


def default_counts(cpus: int, domains: int) -> list:
    """1, the node's sockets or NUMA domains, and powers of two up to its CPUs."""
    counts = {1} | ({domains} if 1 < domains <= cpus else set())
    k = 2
    while k <= cpus:
        counts.add(k)
        k *= 2
    return sorted(counts)


def default_launcher(environ=os.environ) -> str:
    if environ.get("SLURM_JOB_ID") and shutil.which("srun"):
        return "srun"
    beside = launching.mpiexec_path()
    return beside if os.access(beside, os.X_OK) else "mpiexec"


def launcher_kind(prefix: list) -> str:
    """"srun", "openmpi" (mpirun, prterun) or "hydra" (MPICH's and Intel MPI's mpiexec)."""
    name = os.path.basename(prefix[0])
    if name == "srun":
        return "srun"
    if name in ("prterun", "orterun"):
        return "openmpi"
    try:
        text = subprocess.run([prefix[0], "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    return "openmpi" if re.search(r"Open MPI|OpenRTE|PRRTE|prterun", text) else "hydra"


def launch_line(prefix: list, kind: str, nodes: int, per_node: int, cpus: int, program: list) -> list:
    ranks = nodes * per_node
    if kind == "srun":
        how = [f"--nodes={nodes}", f"--ntasks={ranks}", f"--ntasks-per-node={per_node}", f"--cpus-per-task={cpus}"]
    elif kind == "openmpi":  # its default binds a rank to one core when ranks <= 2: never for a layout
        how = ["-n", str(ranks), "--map-by", f"ppr:{per_node}:node", "--bind-to", "none"]
    else:
        how = ["-n", str(ranks), "-ppn", str(per_node)]
    filled = []
    for arg in program:
        for mark, value in PLACEHOLDERS.items():
            arg = arg.replace(mark, str(value(ranks, per_node, cpus)))
        filled.append(arg)
    return prefix + how + filled


def measure(cmd: list, pattern, timeout: int, env: dict) -> tuple:
    """(wall seconds, the number the program printed or None, None) or (.., .., why it failed)."""
    start = time.perf_counter()
    try:
        proc = launching.run(cmd, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, None, f"took more than {timeout} s (--timeout)"
    except OSError as e:
        return 0.0, None, f"could not start: {e}"
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or [""])[-1]
        return wall, None, f"exit {proc.returncode}: {last[-300:]}"
    if pattern is None:
        return wall, None, None
    found = pattern.findall(proc.stdout + "\n" + proc.stderr)
    if not found:
        return wall, None, f"--time {pattern.pattern!r} matched nothing in its output"
    value = found[-1][0] if isinstance(found[-1], tuple) else found[-1]
    try:
        return wall, float(value), None
    except ValueError:
        return wall, None, f"--time matched {value!r}, not a number"


# What start-up costs at a layout, without the program: launching the ranks, Python, jax, initialize()
# and one computation. Run with the Python running this command, where the package is installed.
STARTUP = ("import mpi_collectives; mpi_collectives.initialize(); import jax; "
           "jax.numpy.zeros(1).block_until_ready()")
STARTUP_SHARE = 0.2  # of a launch's wall-clock time, from which start-up is said to weigh on the comparison
MAX_DEVICES = 8  # CPU devices a process may have over MPI (docs/devices.md)
# Said whenever wall-clock times are compared: the start-up launch cannot time the program's compilation.
COMPILATION_NOTE = ("mpi-collectives layouts: note: the wall-clock times also hold your program's own JIT "
                    "compilation, which no launch here can time apart; in a run of a minute or two it can be "
                    "most of each launch (NetKet's VMC, 60 iterations on 2 cores: start-up and compilation "
                    "about 85%) and pick the wrong layout. To compare the work alone: --time REGEX on a time "
                    "your program prints after its first steps.")


def startup_warning(rows: list) -> str:
    """One line where the wall-clock times of `rows` (each with its "startup_s", the wall-clock time of
    a launch of STARTUP at that layout) are decided by start-up: start-up is STARTUP_SHARE of a
    launch or more, or the wall-clock times less start-up would name another layout fastest; else ""."""
    measured = [r for r in rows if not r["failed"] and r.get("startup_s")]
    if not measured:
        return ""
    share = max(r["startup_s"] / r["median"] for r in measured)
    fastest = min(measured, key=lambda r: r["median"])
    without = min(measured, key=lambda r: r["median"] - r["startup_s"])
    if share < STARTUP_SHARE and without is fastest:
        return ""
    starts = sorted(r["startup_s"] for r in measured)
    walls = sorted(r["median"] for r in measured)
    other = (f"; less start-up, {_layout_words(without)} "
             f"would be the fastest ({without['median'] - without['startup_s']:.1f} s against "
             f"{fastest['median'] - fastest['startup_s']:.1f} s)" if without is not fastest else "")
    return (f"mpi-collectives layouts: warning: start-up alone (launching the ranks, Python, jax and initialize(), "
            f"timed by a launch of each layout that does only that) took {_span(starts)} s of the launches' "
            f"{_span(walls)} s (up to {share:.0%}): the wall-clock times compare start-ups more than your "
            f"program's work{other}. Time the work instead: --time REGEX on a time your program prints (e.g. "
            "--time 'median step ([0-9.]+) ms'), or a longer run.")


def _span(values: list) -> str:
    return f"{values[0]:.1f}" if f"{values[0]:.1f}" == f"{values[-1]:.1f}" else f"{values[0]:.1f}-{values[-1]:.1f}"


def counts_arg(text: str) -> list:
    try:
        counts = sorted({int(part) for part in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of ranks per node like 1,2,4")
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every count must be at least 1")
    return counts


def parse(argv, prog, parser_class):
    parser = parser_class(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-node", type=counts_arg, default=None, metavar="K,K,...",
                        help="ranks per node to try (default: 1, the node's sockets or NUMA domains, and powers "
                             "of two up to its CPUs)")
    parser.add_argument("--nodes", type=int, default=None,
                        help="nodes of every launch (default: SLURM_JOB_NUM_NODES in an allocation, else 1)")
    parser.add_argument("--cpus", type=int, default=None,
                        help="CPUs of a node to divide among its ranks (default: SLURM_CPUS_ON_NODE, else this "
                             "process's CPU set)")
    parser.add_argument("--devices", type=int, default=None, metavar="D",
                        help="also one rank a node with D CPU devices (JAX_NUM_CPU_DEVICES=D, at most 8; 0: not "
                             "tried; default: the node's CPUs up to 8 where --per-node is not given, else 0)")
    parser.add_argument("--time", default=None, metavar="REGEX",
                        help="take the time from the program's output: the first group of REGEX's last match, "
                             "e.g. 'median step ([0-9.]+) ms' (default: each launch's wall-clock seconds, start-up "
                             "included; one more launch a layout then times start-up alone, and a warning says "
                             "when it decides the comparison)")
    parser.add_argument("--repeat", type=int, default=1, help="launches of each layout; the median is shown")
    parser.add_argument("--launcher", default=None, metavar="COMMAND",
                        help="the command that starts a launch, split as a shell would, e.g. \"srun --mpi=pmi2\" "
                             "or \"mpirun\" (default: srun in a Slurm allocation, else the mpiexec beside this "
                             "Python)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds for each launch (default: 1800)")
    parser.add_argument("--out", default=None, metavar="FILE", help="also write the results as JSON")
    parser.add_argument("program", nargs=argparse.REMAINDER,
                        help="after --: the program and its arguments, as every rank runs it")
    args = parser.parse_args(argv)
    if args.program and args.program[0] == "--":
        args.program = args.program[1:]
    if not args.program:
        parser.error("no program: give it after --, e.g. `layouts -- python train.py --global-batch 512`")
    if args.devices is not None and not 0 <= args.devices <= MAX_DEVICES:
        parser.error(f"argument --devices: from 0 to {MAX_DEVICES} (the CPU devices a process may have)")
    for name in ("nodes", "cpus", "repeat", "timeout"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"argument --{name}: must be at least 1")
    try:
        args.prefix = shlex.split(args.launcher) if args.launcher is not None else [default_launcher()]
    except ValueError as e:
        parser.error(f"argument --launcher: {e}")
    if not args.prefix or shutil.which(args.prefix[0]) is None:
        parser.error(f"the launcher {args.prefix[0] if args.prefix else '(empty)'} was not found "
                     "(not on PATH, or not executable); name one with --launcher")
    try:
        args.pattern = re.compile(args.time) if args.time else None
    except re.error as e:
        parser.error(f"argument --time: not a regular expression: {e}")
    return args


def main(argv=None, prog="mpi-collectives layouts", parser_class=argparse.ArgumentParser) -> int:
    from ..base.topology import Topology

    args = parse(sys.argv[1:] if argv is None else argv, prog, parser_class)
    nodes = args.nodes or int(os.environ.get("SLURM_JOB_NUM_NODES", "1") or 1)
    cpus = args.cpus or node_cpus()
    shape = Topology.read().summary()
    domains = max(shape["sockets"], shape["numa"], 1)
    counts = args.per_node or default_counts(cpus, domains)
    devices = args.devices if args.devices is not None else (0 if args.per_node else min(cpus, MAX_DEVICES))
    if devices == 1:
        devices = 0  # one device is the 1-rank layout
    too_many = [k for k in counts if k > cpus]
    if too_many:
        raise SystemExit(f"mpi-collectives layouts: {too_many[0]} ranks per node is more than the node's {cpus} "
                         "CPUs; give --per-node counts up to its CPUs (or --cpus)")
    kind = launcher_kind(args.prefix)
    env = dict(os.environ, MPI_COLLECTIVES_LAYOUT_NOTE="0")  # the note says what this command measures
    if kind != "srun":
        launching.allow_open_mpi_anywhere(env)
    print(f"layouts of `{shlex.join(args.program)}`: {nodes} node{'s' if nodes > 1 else ''} of {cpus} CPUs "
          f"({shape['cores']} cores, {shape['sockets']} socket(s), {shape['numa']} NUMA domain(s) here), launched "
          f"by {shlex.join(args.prefix)}; median of {args.repeat} launch{'es' if args.repeat > 1 else ''} each",
          flush=True)
    rows = []
    layouts = [(per_node, 0) for per_node in counts] + ([(1, devices)] if devices else [])
    for per_node, n_devices in layouts:
        each = cpus // per_node
        cmd = launch_line(args.prefix, kind, nodes, per_node, each, args.program)
        walls, values, failed = [], [], None
        for _ in range(args.repeat):
            wall, value, failed = measure(cmd, args.pattern, args.timeout, _with_devices(env, n_devices))
            if failed:
                break
            walls.append(wall)
            values.append(value)
        row = {"per_node": per_node, "ranks": nodes * per_node, "cpus_per_rank": each, "devices": n_devices or 1,
               "command": cmd, "wall_s": walls, "time": values if args.pattern else None, "failed": failed}
        row["median"] = None if failed else statistics.median(values if args.pattern else walls)
        rows.append(row)
        shown = "FAILED: " + failed if failed else f"{row['median']:.4g}"
        print(f"  {_name(row)}: {shown}", file=sys.stderr, flush=True)
    warning = ""
    if args.pattern is None:  # wall-clock times: how much of them is start-up?
        for row in rows:
            if row["failed"]:
                continue
            startup = [sys.executable, "-c", STARTUP]
            wall, _, failed = measure(launch_line(args.prefix, kind, nodes, row["per_node"], row["cpus_per_rank"],
                                                  startup), None, args.timeout, _with_devices(env, row["devices"]))
            row["startup_s"] = None if failed else wall
            print(f"  {_name(row)}, start-up alone: "
                  + (f"FAILED: {failed}" if failed else f"{wall:.4g}"), file=sys.stderr, flush=True)
        warning = startup_warning(rows)
    print(table(rows, timed=args.pattern is not None))
    if warning:
        print(warning, file=sys.stderr, flush=True)
    if args.pattern is None:
        print(COMPILATION_NOTE, file=sys.stderr, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"program": args.program, "nodes": nodes, "cpus": cpus, "node": shape,
                       "launcher": args.prefix, "time": args.time, "repeat": args.repeat, "rows": rows,
                       "startup_warning": warning or None}, f, indent=1)
    return 1 if any(r["failed"] for r in rows) else 0


def _with_devices(env: dict, devices: int) -> dict:
    return dict(env, JAX_NUM_CPU_DEVICES=str(devices)) if devices and devices > 1 else env


def _layout_words(row: dict) -> str:
    """"2 ranks per node", "1 rank per node with 2 CPU devices"."""
    words = f"{row['per_node']} rank{'s' if row['per_node'] > 1 else ''} per node"
    return words + (f" with {row['devices']} CPU devices" if row.get("devices", 1) > 1 else "")


def _name(row: dict) -> str:
    """The layout on its progress line: "2 per node", "1 rank per node with 2 CPU devices"."""
    return _layout_words(row) if row.get("devices", 1) > 1 else f"{row['per_node']} per node"


def table(rows: list, timed: bool) -> str:
    """One row a layout: its wall-clock seconds and, with --time, the time the program printed;
    each against the fastest layout's."""
    done = [r for r in rows if not r["failed"]]
    best = min((r["median"] for r in done), default=None)
    startups = any(r.get("startup_s") for r in done)
    lines = [f"{'ranks/node':>10} {'ranks':>6} {'CPUs/rank':>9} {'wall s':>8}"
             + (f" {'start-up s':>10}" if startups else "")
             + (f" {'printed time':>12}" if timed else "") + f" {'/fastest':>8}"]
    for r in rows:
        per_node = f"1 x{r['devices']}dev" if r.get("devices", 1) > 1 else str(r["per_node"])
        head = f"{per_node:>10} {r['ranks']:>6} {r['cpus_per_rank']:>9}"
        if r["failed"]:
            lines.append(f"{head}   FAILED ({r['failed']})")
            continue
        wall = statistics.median(r["wall_s"])
        start = r.get("startup_s")
        lines.append(f"{head} {wall:>8.1f}" + ((f" {start:>10.1f}" if start else f" {'-':>10}") if startups else "")
                     + (f" {r['median']:>12.4g}" if timed else "") + f" {r['median'] / best:>8.2f}")
    if done:
        fastest = min(done, key=lambda r: r["median"])
        each = "" if fastest.get("devices", 1) > 1 else " each"
        lines.append(f"fastest: {_layout_words(fastest)}, {fastest['cpus_per_rank']} CPUs{each}"
                     + (" (by the printed time)" if timed else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

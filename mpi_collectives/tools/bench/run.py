"""`python -m mpi_collectives bench`: every path, one after the other, on the
same ranks and the same MPI (this Python's venv and its mpiexec), then one
table, a JSON file and a PNG.

Each path is its own mpiexec launch, because a process cannot switch JAX's
collectives from MPI to gloo once its backend exists."""
import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from .. import launching
from . import user_loops
from .report import plot, table, targets, user_table

FULL_SIZES = [8] + [4 ** k for k in range(2, 15)]  # 8 B, then 16 B ... 256 MiB in powers of 4
SMOKE_SIZES = [8, 65536]


def launch(args, ranks, argv, timeout, extra_env=None, written=None):
    """Run one launch of the worker; a failed launch ends the bench with its command. `written`:
    the JSON file the launch writes, whose presence makes a non-zero exit acceptable (XLA's own
    MPI path fails every launch at exit, after its results: MPI_Comm_free after MPI_Finalize)."""
    env = launch_environment(args, extra_env)
    cmd = launch_command(args, ranks, argv)
    start = time.perf_counter()
    try:
        proc = launching.run(cmd, env=env, timeout=timeout, stderr=None)  # its stderr: the progress lines
    except OSError as e:
        raise SystemExit(f"mpi-collectives bench: `{' '.join(cmd)}` could not start: {e}")
    except subprocess.TimeoutExpired:
        raise SystemExit(f"mpi-collectives bench: `{' '.join(cmd)}` took more than {timeout} s and was ended "
                         "(--timeout)") from None
    if proc.returncode != 0 and written and os.path.exists(written):
        print(f"mpi-collectives bench: `{' '.join(cmd)}` exited {proc.returncode} after writing its results "
              "(XLA's own MPI path frees a communicator after MPI_Finalize at exit, and MPIwrapper's library "
              "then ends the process with exit 1)",
              file=sys.stderr, flush=True)
    elif proc.returncode != 0:
        raise SystemExit(f"mpi-collectives bench: `{' '.join(cmd)}` failed (exit {proc.returncode}); "
                         "its output is above")
    return time.perf_counter() - start


def launch_environment(args, extra_env=None) -> dict:
    """The environment of a launch of workers (the bench's, the scale bench's)."""
    # gloo's coordinator: on rank 0's node, which is this one (launchers put rank 0 on their own node).
    # The layout note (docs/layout.md) is for a user's job; the bench chose its ranks.
    env = dict(os.environ, JAX_PLATFORMS="cpu", MPI_COLLECTIVES_LAYOUT_NOTE="0",
               MPI_COLLECTIVES_BENCH_COORDINATOR=f"{args.coordinator_host}:{launching.free_port()}")
    env.update(extra_env or {})
    for var in ("MPITRAMPOLINE_LIB", "JAX_CPU_COLLECTIVES_IMPLEMENTATION"):  # each path sets up its own
        env.pop(var, None)
    return env


def launcher_prefix(args) -> list:
    """The command that starts the ranks, before "-n N": --launcher split as a
    shell would, or else --mpiexec."""
    return shlex.split(args.launcher) if args.launcher else [args.mpiexec]


# `python -m MODULE` with the current folder taken off sys.path: the workers import the package this
# process imported, also from a source checkout, whose mpi_collectives/ has no built wrapper and would
# shadow the installed one (`mpi-collectives tune` from the checkout ended in an ImportError: issue 81).
_RUN_MODULE = ("import runpy, sys; sys.path.pop(0); module = sys.argv.pop(1); "
               "runpy.run_module(module, run_name='__main__', alter_sys=True)")


def launch_command(args, ranks, argv) -> list:
    return launcher_prefix(args) + ["-n", str(ranks), sys.executable, "-c", _RUN_MODULE] + argv


def hosts_of_ranks(args) -> list:
    """The host name of every rank, as the launcher places them: measured
    (a launch of `hostname`), not taken from the command line."""
    return sorted(_launch_each(args, ["hostname"]).split())


# Each rank's host and CPU set, one line: what a rank starts with, before any binding of ours. One
# write(2) of the whole line: the launcher merges the ranks' output as it arrives, and print() under
# PYTHONUNBUFFERED=1 (common in job scripts) writes a line in pieces that interleave across ranks.
_PLACEMENT = ("import os, socket; os.write(1, (socket.gethostname() + ' ' + "
              "','.join(map(str, sorted(os.sched_getaffinity(0)))) + '\\n').encode())")


def placement(args) -> list:
    """(host, CPU set) of every rank as the launcher starts it (a launch of a few lines of Python),
    in no particular order."""
    lines = _launch_each(args, [sys.executable, "-c", _PLACEMENT]).splitlines()
    return [(host, frozenset(int(c) for c in cpus.split(","))) for host, cpus in (line.split() for line in lines)]


def _launch_each(args, command) -> str:
    """The standard output of `command` run as every rank of a launch."""
    cmd = launcher_prefix(args) + ["-n", str(args.ranks)] + command
    try:
        proc = launching.run(cmd, timeout=args.timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SystemExit(f"mpi-collectives bench: `{' '.join(cmd)}` failed: {e}")
    if proc.returncode != 0:
        raise SystemExit(f"mpi-collectives bench: `{' '.join(cmd)}` failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip()[-500:]}")
    return proc.stdout


def import_jax_seconds(with_wrapper: bool, repeats: int) -> float:
    from ...base._paths import libpath

    code = "import time; t = time.perf_counter(); import jax; jax.devices(); print(time.perf_counter() - t)"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("MPITRAMPOLINE_LIB", None)
    env.pop("JAX_CPU_COLLECTIVES_IMPLEMENTATION", None)
    if with_wrapper:
        env.update(MPITRAMPOLINE_LIB=libpath(), JAX_CPU_COLLECTIVES_IMPLEMENTATION="mpi")
    times = [float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                  check=True, cwd=tempfile.gettempdir()).stdout) for _ in range(repeats)]
    return float(np.median(times))


def mpi4py_usable(family: str) -> bool:
    if family == "standard":
        return False  # mpi4py's wheel has no build for the standard ABI
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def mpi4jax_usable(family: str) -> str:
    """"" when mpi4jax can run beside the package here, else why not (the line the bench prints)."""
    if family == "standard":
        return "mpi4py, which mpi4jax needs, has no build for the standard ABI"
    import glob
    import importlib.util
    spec = importlib.util.find_spec("mpi4jax")
    if spec is None:
        return ("mpi4jax is not installed (docs/mpi4jax.md: `CUDA_ROOT=/nonexistent MPICC=$(which mpicc) "
                "pip install --no-build-isolation mpi4jax`)")
    bridges = glob.glob(os.path.join(os.path.dirname(spec.origin), "_src", "xla_bridge", "mpi_xla_bridge_cpu*.so"))
    built = linked_libmpi(bridges[0]) if bridges else None
    if built and built != SONAMES.get(family, built):
        return (f"mpi4jax was compiled against {built}, another ABI than this run's MPI ({family}: "
                f"{SONAMES[family]}); it refuses to start there")
    return ""


# The soname of each family's libmpi: what a binary compiled against it names (MPICH's ABI, Open MPI's).
SONAMES = {"mpich": "libmpi.so.12", "impi": "libmpi.so.12", "openmpi": "libmpi.so.40",
           "standard": "libmpi_abi.so.1"}


def linked_libmpi(path: str):
    """The libmpi soname a compiled library names (libmpi.so.12, .40, libmpi_abi.so.1), or None: its dynamic string
    table holds the name of every library it needs."""
    import re
    try:
        with open(path, "rb") as f:
            found = re.search(rb"libmpi(?:_abi)?\.so\.\d+", f.read())
    except OSError:
        return None
    return found.group().decode() if found else None


def parse(argv=None, prog="python -m mpi_collectives bench", parser_class=argparse.ArgumentParser):
    parser = parser_class(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=rank_counts, default=[2],
                        help="ranks of every launch, or several counts run one after the other, e.g. 2,4,8,16 "
                             "(then each count's results go to OUT and PLOT with -<N>ranks before the "
                             "extension; default: 2)")
    parser.add_argument("--smoke", action="store_true", help="two sizes, few iterations: checks that it works")
    parser.add_argument("--max-bytes", type=int, default=FULL_SIZES[-1],
                        help=f"largest message size in bytes (default: {FULL_SIZES[-1]})")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every iteration count")
    parser.add_argument("--out", default="bench.json", help="the JSON file of results (default: bench.json)")
    parser.add_argument("--plot", default="bench.png", help="the PNG of the results (default: bench.png)")
    add_launcher_options(parser)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds for each launch (default: 1800)")
    parser.add_argument("--mpiwrapper", default=os.environ.get("MPI_COLLECTIVES_BENCH_MPIWRAPPER"),
                        metavar="LIBMPIWRAPPER",
                        help="an MPIwrapper library built for the MPI the launches run (scripts/build_mpiwrapper.sh, "
                             "Debian's Open MPI: run the bench with --mpiexec mpirun.openmpi); adds the path "
                             "jax-xla-mpi, XLA's own MPI collectives through it, at every size and in the loops "
                             "(default: $MPI_COLLECTIVES_BENCH_MPIWRAPPER, else no such path)")
    parser.add_argument("--where", default="", metavar="TEXT",
                        help="what the hosts are and how they are joined, recorded with the results "
                             "(e.g. \"2 nodes, 100 Gb/s InfiniBand\")")
    args = parser.parse_args(argv)
    check_launcher(parser, args)
    if args.mpiwrapper and not os.path.isfile(args.mpiwrapper):
        parser.error(f"argument --mpiwrapper: {args.mpiwrapper} is not a file (scripts/build_mpiwrapper.sh prints "
                     "the path of the library it builds)")
    return args


def add_launcher_options(parser) -> None:
    """--mpiexec, --launcher and --coordinator-host: how each launch starts its ranks (the bench's, the
    scale bench's)."""
    parser.add_argument("--mpiexec", default=launching.mpiexec_path(),
                        help="the mpiexec that starts each launch (default: the one beside this Python)")
    parser.add_argument("--launcher", default=None, metavar="COMMAND",
                        help="the command that starts each launch instead of --mpiexec, split as a shell "
                             "would and followed by `-n RANKS python -m ...`, e.g. \"srun --mpi=pmi2\" "
                             "(the ranks on one node: gloo's coordinator is 127.0.0.1) or \"mpirun --oversubscribe\"")
    parser.add_argument("--coordinator-host", default="127.0.0.1", metavar="ADDRESS",
                        help="an address of this node that every rank's node reaches, for gloo's coordinator "
                             "(default: 127.0.0.1, for ranks on this node only)")


def check_launcher(parser, args) -> None:
    """The launcher parses and exists, or the command line's error."""
    try:
        prefix = launcher_prefix(args)
    except ValueError as e:  # shlex: an unclosed quote
        parser.error(f"argument --launcher: {e}")
    if not prefix:
        parser.error("argument --launcher: empty")
    if shutil.which(prefix[0]) is None:
        parser.error(f"the launcher {prefix[0]} was not found (not on PATH, or not executable)")


def rank_counts(text: str) -> list:
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count of ranks or a list like 2,4,8,16")
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every count must be at least 1")
    return counts


def main(argv=None, prog="python -m mpi_collectives bench", parser_class=argparse.ArgumentParser) -> int:
    args = parse(argv, prog, parser_class)
    counts = args.ranks
    for ranks in counts:
        args.ranks = ranks
        if len(counts) > 1:
            print(f"\n== {ranks} ranks", flush=True)
        run_one(args, suffixed(args.out, ranks, counts), suffixed(args.plot, ranks, counts))
    return 0


def suffixed(path: str, ranks: int, counts: list) -> str:
    if len(counts) == 1:
        return path
    stem, ext = os.path.splitext(path)
    return f"{stem}-{ranks}ranks{ext}"


# The collectives the node's own data path takes by default (MPI_COLLECTIVES_NODE_PATH_COLLECTIVES):
# jax-mpi-library measures them with it off. (The others it can take are measured against the
# library by scripts/node_path_ab.sh and by tune, in interleaved launches.)
NODE_PATH_OPS = ["all-reduce"]


def run_one(args, out_path, plot_path) -> None:
    """Every path at args.ranks ranks: the table, the targets, the JSON and the plot."""
    from ...base import mpi

    family = mpi.family()
    if family == "none":
        raise SystemExit("mpi-collectives bench: " + mpi.not_loaded_message())
    sizes = SMOKE_SIZES if args.smoke else [s for s in FULL_SIZES if s <= args.max_bytes]
    scale = 0.05 if args.smoke else args.scale
    no_mpi4jax = mpi4jax_usable(family)
    built = linked_libmpi(args.mpiwrapper) if args.mpiwrapper else None
    if built and built != SONAMES.get(family, built):
        raise SystemExit(f"mpi-collectives bench: the MPIwrapper {args.mpiwrapper} was built against {built}, and "
                         f"this run's MPI is {mpi.library_name()} ({family}, {SONAMES[family]}). Fix: run the bench "
                         "over the MPI it was built for: MPI_COLLECTIVES_LIBMPI=<that MPI's libmpi> and --mpiexec "
                         "<its mpiexec> (docs/benchmarks.md, \"Beside XLA's own MPI path\").")
    paths = (["c"] + (["mpi4py"] if mpi4py_usable(family) else [])
             + ["jax-call", "jax-mpi", "jax-mpi-unchecked", "jax-mpi-library", "jax-gloo"]
             + ([] if no_mpi4jax else ["mpi4jax"]) + (["jax-xla-mpi"] if args.mpiwrapper else []))
    if no_mpi4jax:
        print(f"mpi-collectives bench: no mpi4jax path: {no_mpi4jax}", file=sys.stderr, flush=True)
    # The MPI by name and version, not by where it lies: results and plots leave the machine.
    print(f"mpi-collectives bench: {args.ranks} ranks, {mpi.library_name()} ({family}), sizes {sizes[0]} B to "
          f"{sizes[-1]} B, paths {', '.join(paths)}", file=sys.stderr, flush=True)
    hosts = hosts_of_ranks(args)
    if len(set(hosts)) > 1:
        print(f"mpi-collectives bench: the ranks are on {len(set(hosts))} hosts ({', '.join(sorted(set(hosts)))})",
              file=sys.stderr, flush=True)
    data = {"ranks": args.ranks, "family": family, "library": mpi.library_name(), "sizes": sizes, "results": {},
            "date": datetime.date.today().isoformat(), "machine": machine(), "versions": versions(),
            "hosts": len(set(hosts)), "where": args.where}
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            out = os.path.join(tmp, f"{path}.json")
            # jax-mpi-unchecked: the same as jax-mpi without the agreement check
            # (MPI_COLLECTIVES_CHECK_COLLECTIVES=0), to measure what the check costs.
            env = {"MPI_COLLECTIVES_CHECK_COLLECTIVES": "0"} if path == "jax-mpi-unchecked" else {}
            # jax-mpi-library: jax-mpi's collectives that the node's own data path takes, with the path
            # off (the MPI library's own), to measure what the path gains where the ranks share a node.
            ops = []
            if path == "jax-mpi-library":
                env["MPI_COLLECTIVES_NODE_PATH"] = "0"
                ops = NODE_PATH_OPS
            if path == "jax-xla-mpi":
                env["MPI_COLLECTIVES_BENCH_MPIWRAPPER"] = os.path.abspath(args.mpiwrapper)
            if args.smoke:
                env["MPI_COLLECTIVES_BENCH_SMOKE"] = "1"  # user_loops.py: a small training step
            launch(args, args.ranks, ["mpi_collectives.tools.bench.worker", path, out, ",".join(map(str, sizes)),
                                      str(scale)] + ([",".join(ops)] if ops else []), args.timeout, env,
                   written=out if path == "jax-xla-mpi" else None)
            got = json.load(open(out))
            data["results"].update(got.get("results_by_target") or {path: got["results"]})
            if "host_helpers" in got:
                data["host_helpers"] = got["host_helpers"]
            if "user_loops" in got:
                data.setdefault("user_loops", {})[path] = got["user_loops"]
        if args.ranks > 1 and len(set(hosts)) == 1 and "user_loops" in data:
            # The same step's global batch as one rank with every CPU of the node (docs/layout.md).
            out = os.path.join(tmp, "one-rank.json")
            env = {"MPI_COLLECTIVES_BENCH_ROWS": str(user_loops.BATCH * args.ranks)}
            if args.smoke:
                env["MPI_COLLECTIVES_BENCH_SMOKE"] = "1"
            launch(args, 1, ["mpi_collectives.tools.bench.worker", "jax-step-one-rank", out, "8", str(scale)],
                   args.timeout, env)
            data["user_loops"]["one-rank"] = json.load(open(out))["one-rank"]
    data["startup_s"] = startup_seconds(args, 1 if args.smoke else 5)
    data["import_jax_s"] = {"with_wrapper": import_jax_seconds(True, 2 if args.smoke else 5),
                            "without": import_jax_seconds(False, 2 if args.smoke else 5)}
    checks = targets(data)
    data["targets"] = [{"target": t, "met": m, "measured": w} for t, m, w in checks]
    with open(out_path, "w") as f:
        json.dump(data, f, indent=1)
    print(table(data))
    if data.get("user_loops"):
        print(user_table(data))
    s, i = data["startup_s"], data["import_jax_s"]
    print(f"\nstart-up, launch to first psum: {s['mpi']:.2f} s with mpi-collectives, {s['gloo']:.2f} s with gloo")
    print(f"import jax: {i['with_wrapper']:.2f} s with our library loaded, {i['without']:.2f} s without "
          f"({(i['with_wrapper'] - i['without']) * 1e3:+.0f} ms)")
    for name, h in data.get("host_helpers", {}).items():
        print(f"host {name}: ours {h['ours'] * 1e6:.0f} us, multihost_utils {h['multihost_utils'] * 1e6:.0f} us "
              f"({h['multihost_utils'] / h['ours']:.0f}x)")
    print("\ntargets" + (" (smoke mode: too few iterations to judge)" if args.smoke else "") + ":")
    for t, met, what in checks:
        print(f"  [{'met' if met else 'NOT met'}] {t}: {what}")
    print(f"\nresults: {out_path}; {plot(data, plot_path)}")


def startup_seconds(args, repeats):
    """Median launch-to-first-psum of each implementation. Launches alternate
    (mpi, gloo, mpi, ...) after one discarded launch of each, so that both see
    the same file cache and the same neighbours on the machine."""
    if repeats > 1:
        for impl in ("mpi", "gloo"):
            launch(args, args.ranks, ["mpi_collectives.tools.bench.startup", impl], args.timeout)
    times = {"mpi": [], "gloo": []}
    for _ in range(repeats):
        for impl in times:
            times[impl].append(launch(args, args.ranks, ["mpi_collectives.tools.bench.startup", impl], args.timeout))
    return {impl: float(np.median(t)) for impl, t in times.items()}


def machine():
    model = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{platform.node()}: {os.cpu_count()} cores, {model}, {platform.platform()}"


def versions():
    from ...base.versions import installed

    packages = ("mpi-collectives", "jax", "jaxlib", "mpi4py", "mpich", "impi-rt", "openmpi")
    return {p: v for p in packages if (v := installed(p)) != "none"}

if __name__ == "__main__":
    sys.exit(main())

"""Command line of mpi-collectives: python -m mpi_collectives (or mpi-collectives) with one of eight commands.

    python -m mpi_collectives libpath          # what to put in MPITRAMPOLINE_LIB
    python -m mpi_collectives info [--json]    # which MPI the native layer loads and why; the versions
    mpiexec -n 2 python -m mpi_collectives doctor   # checks the set-up, MPI's answers and one JAX psum
    mpiexec -n 4 python -m mpi_collectives run --initialize train.py [args]   # a plain JAX script as one job
    python -m mpi_collectives env [--markdown] # the environment variables: values in force, defaults
    python -m mpi_collectives bench [--smoke]  # our collectives beside gloo, mpi4py and C (scripts/bench.py)
    python -m mpi_collectives bench --growth 2,4,8,16   # every cost the package adds, against the ranks
    python -m mpi_collectives tune --ranks 16  # the MPI library's fastest settings here, for initialize()
    python -m mpi_collectives layouts -- python train.py   # your program at 1, 2, 4, ... ranks a node, timed
    python -m mpi_collectives --version

An error of the command line is one line on stderr beginning "mpi-collectives:",
with nothing on stdout and a non-zero exit (2 for a wrong argument).
"""
import argparse
import dataclasses
import importlib.util
import json
import os
import platform
import runpy
import sys

from . import __version__
from .base._paths import libpath
from .base.errors import InitializeError, error_line

COMMANDS = ("libpath", "info", "doctor", "run", "env", "bench", "tune", "layouts")


def _prog() -> str:
    """How the user called us: the console script, or python -m."""
    return "mpi-collectives" if os.path.basename(sys.argv[0] or "") == "mpi-collectives" else \
        "python -m mpi_collectives"


class Parser(argparse.ArgumentParser):
    """argparse, with the package's one line for a wrong argument instead of usage and error."""

    def error(self, message):
        self.exit(2, f"mpi-collectives: {message} (see `{self.prog} --help`)\n")


def versions() -> dict:
    """The versions a first question asks for, read without importing jax."""
    from .base.versions import installed

    return {"mpi_collectives": __version__, "jax": installed("jax"), "jaxlib": installed("jaxlib"),
            "python": f"{platform.python_version()} ({sys.executable})"}


def search_line(family: str, report: str) -> str:
    """info's `search`: the libraries the loader tried and could not use, in order (its report), read
    after a success as after a failure."""
    report = report.strip().removesuffix(";").strip()
    if family == "none":
        return report or "nothing tried"
    if not report:
        return "the first library tried was loaded"
    return f"tried and not used before the library above: {report}"


def native_info() -> dict:
    """What the native layer found when it was loaded in this process."""
    from .base import mpi

    info = {
        "wrapper": libpath(),
        "family": mpi.family(),
        "library": mpi.library(),
        "why": mpi.family_detail(),
        "chosen_by": mpi.load_rule(),
        "passed_over": mpi.passed_over() or "none",
        "search": search_line(mpi.family(), mpi.load_report()),
        "missing_functions": mpi.missing_functions(),
        "thread_level_policy": mpi.thread_policy(),
    }
    version = mpi.library_version()
    if version is not None:
        info["version"] = version
    return info


def tunings_initialize_would_apply(rank: int, placements: list) -> list:
    """tuning.py's decisions for this rank, under the current settings, without applying them
    (`placements`: layout.gather()'s)."""
    from .services import library_settings, tuning
    from .base import settings

    chosen = settings.read()
    kept = tuning.keep_freed_memory(chosen.keep_memory, apply=False)
    bind, source = library_settings.binding_for_this_process(chosen)
    lines = [kept, tuning.one_arena(kept, apply=False), library_settings.set_for_this_process(chosen, apply=False),
             tuning.bind_cpus(rank, placements, bind, apply=False, source=source),
             library_settings.node_path_for_this_process(chosen, library_settings.users_node_path(chosen))[1]]
    return [line for line in lines if line]


def job_wide_choices(rank: int, size: int, level: str) -> str:
    """Whether every rank of this launch would start initialize() with the same settings
    (job_choices.py), in words."""
    from .services import job_choices, library_settings
    from .base import settings
    chosen = settings.read()
    variables, line = library_settings.for_this_process(chosen, apply=False)
    implementation = os.environ.get("JAX_CPU_COLLECTIVES_IMPLEMENTATION", "mpi")
    # The tuning file's node path too, as initialize() compares it: what the native layer would hold.
    node_path, _ = library_settings.node_path_for_this_process(chosen, library_settings.users_node_path(chosen))
    mine = job_choices.this_rank(chosen, level, implementation, line, environ=dict(os.environ, **variables),
                                 node_path=node_path)
    differ = job_choices.agree(rank, size, mine, float(chosen.timeout))
    if differ:
        return differ
    shown = ", ".join(f"{k}={v}" for k, v in mine.items() if k not in job_choices.NOT_COMPARED)
    return f"the same on all {size} ranks: {shown}"


def cmd_libpath(args) -> int:
    print(libpath())
    return 0


def cmd_info(args) -> int:
    info = native_info()
    info.update(versions())
    if info["family"] != "none" and args.init:
        from .base import mpi
        info["thread_level"] = mpi.thread_level_name(mpi.init())
        info["rank"], info["size"] = mpi.rank_size()
        from .services import layout
        placements = layout.gather(info["size"], mpi.allgather)
        info["layout"] = layout.describe(placements)
        advice = layout.advice(placements)
        if advice:
            info["layout_advice"] = advice
        from .base import settings
        from .services import library_settings, node_path
        chosen = settings.read()
        tuned, _ = library_settings.node_path_for_this_process(chosen, library_settings.users_node_path(chosen))
        if tuned:  # what initialize() would give the native layer: tune's measurement
            chosen = dataclasses.replace(chosen, node_path=tuned[0], node_path_collectives=tuned[1],
                                         node_path_min=tuned[2], node_path_max=tuned[3],
                                         node_path_across_nodes=tuned[4], node_path_direct=tuned[5],
                                         node_path_round=tuned[6])
        info["node_path"] = node_path.describe(placements, chosen)
        info["tunings"] = tunings_initialize_would_apply(info["rank"], placements)
        info["job"] = job_wide_choices(info["rank"], info["size"], info["thread_level"])
        if info["rank"] != 0:
            return 0
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key, value in info.items():
            if key == "missing_functions":
                value = ", ".join(value) or "none"
            if key in ("tunings", "layout"):
                value = "; ".join(value)
            print(f"{key:20s} {value}")
    if info["family"] == "none":
        from .base import mpi
        print("mpi-collectives: " + mpi.not_loaded_message(), file=sys.stderr)
        return 1
    return 0


class _ScriptFailed(Exception):
    """The user's script raised: its own traceback is the report, not our one sentence."""


def cmd_run(args) -> int:
    """Run a script or module as __main__, in this process, with JAX set to use MPI.

    `import mpi_collectives` (done by now) has set MPITRAMPOLINE_LIB, which
    jaxlib reads when the script first imports jax. With --initialize,
    initialize() runs before the script, which makes a plain script (one that
    never calls it) one job; without it, a rank of several whose script then
    computes without initialize() is told so, with --initialize as the fix
    (plain_programs.check_joined).
    """
    if "jax" in sys.modules:
        raise RuntimeError("mpi-collectives: run: jax is already imported in this process")
    if args.module:
        try:
            found = importlib.util.find_spec(args.target) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise RuntimeError(f"mpi-collectives: run: no module named {args.target} "
                               f"(from {os.getcwd()}, with this Python: {sys.executable})")
    elif not os.path.exists(args.target):
        raise RuntimeError(f"mpi-collectives: run: no such script {args.target} (from {os.getcwd()})")
    if args.initialize:
        from .integration.jax_setup import initialize
        initialize()
    else:
        from .integration import plain_programs
        plain_programs.launched_by_run(("-m " if args.module else "") + args.target)
    sys.argv = [args.target] + args.args
    try:
        if args.module:
            runpy.run_module(args.target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(args.target)))
            runpy.run_path(args.target, run_name="__main__")
    except Exception as e:
        raise _ScriptFailed() from e
    return 0


def env_rows(tuned=None) -> list:
    from .base import settings
    return settings.in_force(tuned=tuned)


def _tuned_for_env() -> tuple:
    """(library_settings.from_tuning_file's answer, the MPI library's own variables initialize() would set
    and why, as one line): what a tuning file changes, where one applies; ({}, "") where the settings or
    the MPI library cannot be read (the rows then say what is wrong)."""
    from .base import settings
    from .services import library_settings
    try:
        chosen = settings.read()
        tuned = library_settings.from_tuning_file(chosen)
        _, line = library_settings.for_this_process(chosen, apply=False)
        return tuned, line
    except Exception:  # no MPI library found, a bad value: the table's own rows say it
        return {}, ""


def cmd_env(args) -> int:
    from .base import settings
    from .base.settings import TABLE, _allowed_text, markdown_table
    if args.markdown:
        print(markdown_table())
        return 0
    rows = ["| variable | in force | keyword | default | allowed | meaning |", "|---|---|---|---|---|---|"]
    problems = []
    tuned, library_line = _tuned_for_env()
    for (name, (var, default, _, meaning, allowed)), (_, value, source, problem) in zip(TABLE.items(),
                                                                                        env_rows(tuned)):
        in_force = (f"`{value}` ({source}{', NOT VALID' if problem else ''})" if value else
                    "unset (no default)")
        shown = "any" if allowed is None else _allowed_text(allowed)
        rows.append(f"| `{var}` | {in_force} | `{name}` | {'' if default is None else f'`{default}`'} "
                    f"| {shown} | {meaning} |")
        if problem:
            problems.append(problem)
    print("\n".join(rows))
    if library_line:  # the MPI library's own variables, which initialize() sets before MPI_Init
        print(f"\nThe MPI library: {library_line} (for this job's shape: run it under your launcher, "
              "`mpiexec -n N mpi-collectives env`, to see a tuning file's entry for N ranks a node)")
    problems += settings.unknown_variables()
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


def cmd_doctor(args) -> int:
    from .tools.doctor import doctor
    return doctor()


def parser() -> Parser:
    prog = _prog()
    ap = Parser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"mpi-collectives {__version__}",
                    help="print the version of mpi-collectives and exit")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND",
                            help=f"one of {', '.join(COMMANDS)}; `COMMAND --help` for its own options")
    sub.add_parser("libpath", help="print the path to put in MPITRAMPOLINE_LIB",
                   description="Print the path of the native layer, for MPITRAMPOLINE_LIB: "
                               "export MPITRAMPOLINE_LIB=$(python -m mpi_collectives libpath)")
    p_info = sub.add_parser("info", help="show which MPI library the native layer loads and why, and the versions",
                            description="Which MPI library the native layer loads, by which rule, which it passed "
                                        "over; the versions of mpi-collectives, jax, jaxlib, the MPI and Python.")
    p_info.add_argument("--json", action="store_true", help="machine-readable output")
    p_info.add_argument("--init", action="store_true", help="also initialize MPI: thread level, rank and size")
    sub.add_parser("doctor", help="check the set-up, MPI's answers for every reduction XLA uses, and a JAX psum",
                   description="Check the set-up on every rank: native layer, MPI library, jaxlib's interface, "
                               "thread level, MPI's answers for every reduction and dtype XLA uses and, on "
                               "several ranks, one JAX psum through initialize(). Launch it on several ranks: "
                               "mpiexec -n 2 python -m mpi_collectives doctor")
    p_run = sub.add_parser("run", help="run a script (or -m module) with JAX's collectives over MPI",
                           description="Run a script or module as __main__ in this process, with JAX set to "
                                       "use MPI: mpiexec -n 4 python -m mpi_collectives run --initialize train.py "
                                       "[args]. --initialize makes a script that never calls "
                                       "mpi_collectives.initialize() one job; without it, `run` only sets JAX up "
                                       "before the script imports jax, for a script that calls initialize() "
                                       "itself (after its imports).")
    p_run.add_argument("-m", dest="module", action="store_true", help="the target is a module, as in python -m")
    p_run.add_argument("--initialize", action="store_true",
                       help="call mpi_collectives.initialize() before the script starts: what makes a script "
                            "that never calls it (a plain JAX script) one job over the ranks; without it, each "
                            "rank of such a script computes alone")
    p_run.add_argument("target", help="the script's path (or, with -m, the module's name)")
    p_run.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments, passed on as they are")
    p_env = sub.add_parser("env", help="show the environment variables: the value in force of each, its default",
                           description="The environment variables mpi-collectives reads: the value in force "
                                       "and where it comes from (the environment, the tuning file's entry for "
                                       "this MPI and job shape, or the default), beside what each allows and "
                                       "means.")
    p_env.add_argument("--markdown", action="store_true",
                       help="print the documentation's table (README.md's), without the values in force")
    sub.add_parser("bench", help="benchmark JAX's collectives over MPI beside gloo, mpi4py and C (--help)",
                   add_help=False)
    sub.add_parser("tune", help="measure the MPI library's collective settings with your ranks per node and "
                                "keep the fastest for initialize() (--help)", add_help=False)
    sub.add_parser("layouts", help="time your program at several ranks per node (1, 2, 4, ...) with the same "
                                   "total work, to choose the layout (--help)", add_help=False)
    return ap


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and argv[0] in COMMANDS else None
    try:
        if command == "bench" and any(a == "--growth" or a.startswith("--growth=") for a in argv[1:]):
            from .tools.bench.scale import main as growth  # how each cost grows with the ranks
            return growth(argv[1:], prog=f"{_prog()} bench --growth", parser_class=Parser)
        if command == "bench":  # its own options: mpi_collectives.tools.bench.run
            from .tools.bench.run import main as bench
            return bench(argv[1:], prog=f"{_prog()} bench", parser_class=Parser)
        if command == "layouts":  # its own options: mpi_collectives.tools.layouts
            from .tools.layouts import main as layouts
            return layouts(argv[1:], prog=f"{_prog()} layouts", parser_class=Parser)
        if command == "tune":  # its own options: mpi_collectives.tools.bench.tune
            from .tools.bench.tune import main as tune
            return tune(argv[1:], prog=f"{_prog()} tune", parser_class=Parser)
        args = parser().parse_args(argv)
        return {"libpath": cmd_libpath, "info": cmd_info, "run": cmd_run, "env": cmd_env,
                "doctor": cmd_doctor}[args.command](args)
    except _ScriptFailed as e:
        raise e.__cause__ from None  # the script's own error, with its own traceback
    except Exception as e:  # the package's one sentence; its own errors already begin with "mpi-collectives"
        text = " ".join(str(e).split()) or type(e).__name__
        if isinstance(e, InitializeError):  # `run --initialize`: the job ends as a program's would
            text = error_line(text)
        elif not text.startswith("mpi-collectives"):
            text = f"mpi-collectives: {command or 'error'}: {type(e).__name__}: {text}"
        print(text, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

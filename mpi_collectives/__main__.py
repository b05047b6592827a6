"""Command line: python -m mpi_collectives {libpath,info,doctor,run,env}.

    python -m mpi_collectives libpath          # what to put in MPITRAMPOLINE_LIB
    python -m mpi_collectives info [--json]    # which MPI the native layer loads, and why
    mpiexec -n 3 python -m mpi_collectives doctor   # checks the whole set-up, MPI's own answers too
    mpiexec -n 4 python -m mpi_collectives run train.py [args]   # a script, with JAX set up for MPI
    python -m mpi_collectives env              # the environment-variable table
    python -m mpi_collectives bench [--smoke]  # our collectives beside gloo, mpi4py and C (scripts/bench.py)
"""
import argparse
import json
import os
import runpy
import sys

from ._paths import libpath


def native_info() -> dict:
    """What the native layer found when it was loaded in this process."""
    from . import mpi

    info = {
        "wrapper": libpath(),
        "family": mpi.family(),
        "library": mpi.library(),
        "why": mpi.family_detail(),
        "chosen_by": mpi.load_rule(),
        "passed_over": mpi.passed_over() or "none",
        "search": mpi.load_report(),
        "missing_functions": mpi.missing_functions(),
        "thread_level_policy": mpi.thread_policy(),
    }
    version = mpi.library_version()
    if version is not None:
        info["version"] = version
    return info


def tunings_initialize_would_apply(rank: int, size: int) -> list:
    """tuning.py's decisions for this rank, under the current settings, without applying them."""
    from . import mpi, settings, tuning

    chosen = settings.read()
    kept = tuning.keep_freed_memory(chosen.keep_memory, apply=False)
    lines = [kept, tuning.one_arena(kept, apply=False),
             tuning.bind_cpus(rank, size, mpi.allgather, chosen.bind_cpus, apply=False)]
    return [line for line in lines if line]


def cmd_info(args) -> int:
    info = native_info()
    if info["family"] != "none" and args.init:
        from . import mpi
        info["thread_level"] = mpi.thread_level_name(mpi.init())
        info["rank"], info["size"] = mpi.rank_size()
        info["tunings"] = tunings_initialize_would_apply(info["rank"], info["size"])
        if info["rank"] != 0:
            return 0
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key, value in info.items():
            if key == "missing_functions":
                value = ", ".join(value) or "none"
            if key == "tunings":
                value = "; ".join(value)
            print(f"{key:20s} {value}")
    if info["family"] == "none":
        from . import mpi
        print("mpi-collectives: " + mpi.not_loaded_message(), file=sys.stderr)
        return 1
    return 0


def cmd_run(args) -> int:
    """Run a script or module as __main__, in this process, with JAX set to use MPI.

    `import mpi_collectives` (done by now) has set MPITRAMPOLINE_LIB, which
    jaxlib reads when the script first imports jax.
    """
    if "jax" in sys.modules:
        raise SystemExit("mpi-collectives: run: jax is already imported in this process")
    if args.initialize:
        from .jax_setup import initialize
        initialize()
    sys.argv = [args.target] + args.args
    if args.module:
        runpy.run_module(args.target, run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(args.target)))
        runpy.run_path(args.target, run_name="__main__")
    return 0


def cmd_env(args) -> int:
    from .settings import markdown_table
    print(markdown_table())
    return 0


def cmd_doctor(args) -> int:
    from .doctor import doctor
    return doctor()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mpi_collectives", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("libpath", help="print the path to put in MPITRAMPOLINE_LIB")
    p_info = sub.add_parser("info", help="show which MPI library the native layer loads and why")
    p_info.add_argument("--json", action="store_true", help="machine-readable output")
    p_info.add_argument("--init", action="store_true", help="also initialize MPI: thread level, rank and size")
    sub.add_parser("doctor", help="check the set-up, including MPI's answers for every reduction XLA uses")
    p_run = sub.add_parser("run", help="run a script (or -m module) with JAX's collectives over MPI")
    p_run.add_argument("-m", dest="module", action="store_true", help="the target is a module")
    p_run.add_argument("--initialize", action="store_true",
                       help="call mpi_collectives.initialize() before the script starts")
    p_run.add_argument("target")
    p_run.add_argument("args", nargs=argparse.REMAINDER)
    sub.add_parser("env", help="print the table of environment variables")
    sub.add_parser("bench", help="benchmark JAX's collectives over MPI beside gloo, mpi4py and C (--help)",
                   add_help=False)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:  # its own options: mpi_collectives.bench.run
        from .bench.run import main as bench
        return bench(argv[1:])
    args = ap.parse_args(argv)

    if args.command == "libpath":
        print(libpath())
        return 0
    return {"info": cmd_info, "run": cmd_run, "env": cmd_env, "doctor": cmd_doctor}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())

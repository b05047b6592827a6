"""The wrapper's differential fuzzer (issue 71): tests/programs/node_path_fuzz.c's seeded random MPI
programs, run through the node path (on for every size and collective; its ways: reads in place or
the window's copies, the one round on or off) and through the MPI library alone
(MPI_COLLECTIVES_NODE_PATH=0), compared line by line: every step's result checked against the
single-process computation on every rank, and its hash the same both ways. Each launch has a time
limit; a failing seed prints the command that reproduces it (a regression test's scenario).

    python scripts/fuzz_node_path.py --seeds 1-200 --ranks 2,3,4 --steps 150 --json out.json

Run it with the Python of a venv made by scripts/setup_env.sh (its mpiexec, its installed package).
CI runs a short one (tests/native/test_fuzz.py); a long one by hand, its figures in
docs/benchmarks/from-outside/fuzz_node_path_mpich.json."""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

from mpi_collectives.tools.launching import allow_open_mpi_anywhere, environment, mpiexec_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ROOT, "tests", "programs")
EVERY = "all-reduce,all-gather,reduce-scatter,all-to-all"
# The ways through the path, each against the library's own.
WAYS = {
    "direct": {"MPI_COLLECTIVES_NODE_PATH_DIRECT": "1"},
    "window": {"MPI_COLLECTIVES_NODE_PATH_DIRECT": "0"},
    "no-round": {"MPI_COLLECTIVES_NODE_PATH_ROUND": "0"},
}
# MPICH's cross-memory transfers off, as MPICH turns them off itself under Yama's ptrace_scope 1: its large
# messages then move by the sender's progress, which a rank waiting in the path must drive (other libraries
# ignore the variable).
PATH_ON = {"MPI_COLLECTIVES_NODE_PATH": "1", "MPI_COLLECTIVES_NODE_PATH_MIN": "0", "MPI_COLLECTIVES_NODE_PATH_MAX": "0",
           "MPI_COLLECTIVES_NODE_PATH_COLLECTIVES": EVERY, "MPIR_CVAR_CH4_CMA_ENABLE": "0"}
LIBRARY = {"MPI_COLLECTIVES_NODE_PATH": "0"}


def build(into: str) -> str:
    lib = os.path.join(into, "node_path_fuzz.so")
    subprocess.run(["cc", "-O1", "-Wall", "-shared", "-fPIC", "-Dmain=conformance_main", "-I",
                    os.path.join(ROOT, "native", "generated"), "-o", lib,
                    os.path.join(PROGRAMS, "node_path_fuzz.c"), "-ldl", "-lpthread"], check=True)
    return lib


def wrapper() -> str:
    return subprocess.check_output([sys.executable, "-m", "mpi_collectives", "libpath"], text=True,
                                   cwd=tempfile.gettempdir()).strip()


def launch(fuzz: str, ranks: int, seed: int, steps: int, env: dict, timeout: float, library: str):
    cmd = [mpiexec_path(), "-n", str(ranks), sys.executable, os.path.join(PROGRAMS, "conformance_runner.py"), fuzz,
           library, str(seed), str(steps)]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=environment(env), capture_output=True, text=True, timeout=timeout)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        code, out, err = "timeout", (e.stdout or b"").decode(errors="replace"), (e.stderr or b"").decode(errors="replace")
    steps_seen = sorted(line for line in out.splitlines() if line.startswith("STEP "))
    return {"code": code, "steps": steps_seen, "seconds": time.monotonic() - start, "stdout": out, "stderr": err,
            "command": " ".join(f"{k}={v}" for k, v in env.items()) + " " + " ".join(cmd)}


def compare(seed: int, ranks: int, way: str, ours: dict, library: dict) -> str:
    """'' where the path's run and the library's agree and both are exact; else why not."""
    if library["code"] != 0:
        return f"the library's own run failed ({library['code']}): the program, not the path"
    if ours["code"] != 0:
        said = [line for line in ours["stderr"].splitlines() if "error:" in line or "stall:" in line]
        return f"exit {ours['code']}" + (f": {said[0]}" if said else "")
    if any(" WRONG " in line for line in ours["steps"]):
        return "a wrong result: " + next(line for line in ours["steps"] if " WRONG " in line)
    if ours["steps"] != library["steps"]:
        diff = next((a, b) for a, b in zip(ours["steps"] + [""] * 9, library["steps"] + [""] * 9) if a != b)
        return f"differs from the library's: {diff[0]!r} against {diff[1]!r}"
    return ""


def seeds_of(text: str) -> list:
    out = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        out.extend(range(int(first), int(last or first) + 1))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1-20")
    parser.add_argument("--ranks", default="3")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--timeout", type=float, default=120, help="seconds a launch may take")
    parser.add_argument("--json", help="the summary, written here")
    parser.add_argument("--wrapper", help="another build of the wrapper (default: the installed package's)")
    args = parser.parse_args(argv)
    allow_open_mpi_anywhere(os.environ)  # Open MPI's launcher as root, more ranks than cores
    lib = args.wrapper or wrapper()
    with tempfile.TemporaryDirectory() as tmp:
        fuzz = build(tmp)
        results, failed, start = [], [], time.monotonic()
        for ranks in [int(r) for r in args.ranks.split(",")]:
            for seed in seeds_of(args.seeds):
                library = launch(fuzz, ranks, seed, args.steps, LIBRARY, args.timeout, lib)
                for way in args.ways.split(","):
                    ours = launch(fuzz, ranks, seed, args.steps, {**PATH_ON, **WAYS[way]}, args.timeout, lib)
                    why = compare(seed, ranks, way, ours, library)
                    results.append({"ranks": ranks, "seed": seed, "way": way, "steps": len(ours["steps"]),
                                    "seconds": round(ours["seconds"], 2), "library_seconds": round(library["seconds"], 2),
                                    "failure": why})
                    if why:
                        failed.append(results[-1])
                        print(f"FAILED ranks {ranks} seed {seed} way {way}: {why}\n  reproduce: {ours['command']}\n"
                              + ours["stderr"][-3000:], flush=True)
    checked = sum(r["steps"] for r in results)
    summary = {"runs": len(results), "failed": len(failed), "steps_checked": checked, "seeds": args.seeds,
               "ranks": args.ranks, "steps_a_run": args.steps, "ways": args.ways.split(","),
               "seconds": round(time.monotonic() - start, 1), "machine": f"{os.cpu_count()} cores, {platform.machine()}",
               "venv": os.path.basename(os.path.dirname(os.path.dirname(mpiexec_path()))), "failures": failed}
    print(f"fuzz: {len(results)} runs ({checked} rank-steps checked against the library's and the exact values), "
          f"{len(failed)} failed, {summary['seconds']} s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

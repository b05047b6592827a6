"""Two builds of the wrapper against each other, interleaved in one sitting (issue 71: "no speed lost"):
tests/programs/node_path_harness.c's round-time scenario (MPI_Allreduce of doubles from C, through the
wrapper's exports as MPItrampoline calls them, on a communicator split as XLA splits it) at 8 B (the
one round), 1 MiB and 16 MiB (the node path), ROUNDS times each build in turn; the medians of the
slowest rank's time per call, and their ratio (new / old).

    python scripts/wrapper_builds_ab.py OLD.so NEW.so [--rounds 5] [--ranks 2] [--json out.json]

A build from another commit: `git worktree add /tmp/old COMMIT && cd /tmp/old &&
python native/build_native.py /tmp/old-build` (it prints the library's path). Run it with the Python of a
venv made by scripts/setup_env.sh; MPI_COLLECTIVES_LIBMPI is set to the venv's library for a build that
lies outside it."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from mpi_collectives.tools.launching import allow_open_mpi_anywhere, environment, mpiexec_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ROOT, "tests", "programs")
# (label, doubles a call, calls a launch)
SIZES = [("8 B", 1, 200000), ("1 MiB", 131072, 400), ("16 MiB", 2097152, 30)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    allow_open_mpi_anywhere(os.environ)  # Open MPI's launcher as root, more ranks than cores
    libmpi = os.path.join(os.path.dirname(os.path.dirname(mpiexec_path())), "lib", "libmpi.so.12")
    with tempfile.TemporaryDirectory() as tmp:
        harness = os.path.join(tmp, "harness.so")
        subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-Dmain=conformance_main", "-I",
                        os.path.join(ROOT, "native", "generated"), "-o", harness,
                        os.path.join(PROGRAMS, "node_path_harness.c"), "-ldl", "-lpthread"], check=True)
        times = {(label, build): [] for label, _, _ in SIZES for build in ("old", "new")}
        for _ in range(args.rounds):
            for label, doubles, calls in SIZES:
                for build in ("old", "new"):
                    env = {"ROUND_TIME_DOUBLES": str(doubles), "ROUND_TIME_CALLS": str(calls)}
                    if os.path.exists(libmpi):
                        env["MPI_COLLECTIVES_LIBMPI"] = libmpi
                    proc = subprocess.run([mpiexec_path(), "-n", str(args.ranks), sys.executable,
                                           os.path.join(PROGRAMS, "conformance_runner.py"), harness,
                                           getattr(args, build), "round-time"], env=environment(env),
                                          capture_output=True, text=True, timeout=600)
                    found = [float(t) for t in re.findall(r"TIME rank \d+: (\d+) ns per call", proc.stdout)]
                    if proc.returncode != 0 or len(found) != args.ranks or "WRONG" in proc.stdout:
                        print(f"{build} at {label} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
                        return 1
                    times[(label, build)].append(max(found))  # the slowest rank's
    rows = []
    print(f"{'size':>7} {'old us':>10} {'new us':>10} {'new/old':>8}   (medians of {args.rounds} interleaved rounds, "
          f"{args.ranks} ranks, {os.cpu_count()} cores)")
    for label, _, _ in SIZES:
        old, new = statistics.median(times[(label, "old")]), statistics.median(times[(label, "new")])
        rows.append({"size": label, "old_us": old / 1000, "new_us": new / 1000, "ratio": new / old,
                     "old_all_us": [t / 1000 for t in times[(label, "old")]],
                     "new_all_us": [t / 1000 for t in times[(label, "new")]]})
        print(f"{label:>7} {old / 1000:10.2f} {new / 1000:10.2f} {new / old:8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ranks": args.ranks, "rounds": args.rounds, "cores": os.cpu_count(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

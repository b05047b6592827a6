"""JAX's own multi-process tests (tests/multiprocess/ of a JAX source checkout,
at the tag of the installed jax) over MPI and over gloo, outcome by outcome:

    python scripts/jax_multiprocess_tests.py JAX_TESTS_DIR [--processes 2] [--devices 2]
        [--backends mpi,plain,gloo] [FILE ...]

Run with the venv's python (it needs absl-py, which the script installs if
missing). The jax wheel does not carry JAX's tests, and this repository does
not copy them: point JAX_TESTS_DIR at `tests/multiprocess` of a JAX checkout
(`git clone --branch jax-v<version> https://github.com/jax-ml/jax`).

Every test file runs under this MPI's mpiexec, PROCESSES processes with
DEVICES CPU devices each, once per backend: over MPI through
mpi_collectives.initialize() ("mpi"); over MPI as a program that sets JAX up
itself and never imports the package ("plain": MPITRAMPOLINE_LIB exported,
jax.distributed.initialize from the launcher's rank); and over gloo. Each rank
runs the file's test cases with JAX's own test loader, in-process (JAX's
harness would start the processes itself, which an MPI job cannot), after
telling the harness the process count. Prints a table of the outcomes per
file and every test whose outcome over an MPI backend differs from gloo's;
exits 1 if any does, or if a launch over MPI fails. With no FILE, every
*_test.py of the folder.

    python scripts/jax_multiprocess_tests.py --worker mpi|gloo FILE   (what each rank runs)
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import backends  # noqa: E402  (scripts/backends.py: the package's start-up and launching)



def worker(backend, path):
    _, rank, size = backends.start(backend, os.environ["SUITE_PORT"])
    import importlib.util

    import absl.flags
    from jax._src import test_multiprocess  # noqa: F401  (defines the harness's flags)
    from jax._src import test_util as jtu
    from jax._src.config import config
    absl.flags.FLAGS([path, f"--num_processes={size}"], known_only=True)
    config.config_with_absl()
    spec = importlib.util.spec_from_file_location("jax_multiprocess_case", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    suite = jtu.JaxTestLoader().loadTestsFromModule(module)
    exclude = os.environ.get("SUITE_EXCLUDE")
    if exclude:
        kept = unittest.TestSuite()

        def walk(s):
            for t in s:
                if isinstance(t, unittest.TestSuite):
                    walk(t)
                elif not re.search(exclude, t.id()):
                    kept.addTest(t)
        walk(suite)
        suite = kept

    # One file per rank: mpiexec may splice the ranks' output lines.
    record = open(os.path.join(os.environ["SUITE_OUT"], f"{backend}-{rank}.txt"), "w")

    class Outcomes(unittest.TextTestResult):
        def _say(self, test, word):
            record.write(f"{word} {test.id().split('.', 1)[-1]}\n")
            record.flush()

        def addSuccess(self, test):
            super().addSuccess(test)
            self._say(test, "ok")

        def addFailure(self, test, err):
            super().addFailure(test, err)
            self._say(test, "fail")

        def addError(self, test, err):
            super().addError(test, err)
            self._say(test, "error")

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            self._say(test, "skip")

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            self._say(test, "xfail")

    stream = sys.stderr if rank == 0 else open(os.devnull, "w")
    unittest.TextTestRunner(stream=stream, resultclass=Outcomes, verbosity=1).run(suite)
    record.write("FINISHED\n")
    record.close()


def launch(backend, path, processes, devices, port, exclude=None, timeout=900):
    import tempfile
    launching = backends.launching
    out = tempfile.mkdtemp(prefix="jax-multiprocess-")
    env = dict(os.environ, JAX_NUM_CPU_DEVICES=str(devices), SUITE_PORT=str(port), JAX_PLATFORMS="cpu",
               SUITE_OUT=out, SUITE_EXCLUDE=exclude or "")
    env.pop("MPITRAMPOLINE_LIB", None)
    if backend == "plain":  # what a plain program's job script exports
        env["MPITRAMPOLINE_LIB"] = subprocess.check_output(
            [sys.executable, "-m", "mpi_collectives", "libpath"], text=True, cwd=out).strip()
    launching.allow_open_mpi_anywhere(env)
    try:
        proc = launching.run([launching.mpiexec_path(), "-n", str(processes), sys.executable,
                              os.path.abspath(__file__), "--worker", backend, path], env=env, timeout=timeout)
    except subprocess.TimeoutExpired:  # (the launcher and every rank are gone)
        return None, f"timed out after {timeout} s"
    stderr = proc.stderr
    outcomes = collections.defaultdict(set)
    finished = 0
    for rank in range(processes):
        try:
            lines = open(os.path.join(out, f"{backend}-{rank}.txt")).read().splitlines()
        except FileNotFoundError:
            continue
        finished += lines[-1:] == ["FINISHED"]
        for line in lines:
            word, _, test = line.partition(" ")
            if test:
                outcomes[test].add(word)
    problem = None if proc.returncode == 0 and finished == processes else (
        f"exit {proc.returncode}, {finished} of {processes} ranks finished: "
        f"{(stderr.strip().splitlines() or [''])[-1][:300]}")
    # A test's outcome is the worst any rank saw.
    order = ("error", "fail", "xfail", "skip", "ok")
    return {t: min(words, key=order.index) for t, words in outcomes.items()}, problem


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", nargs=2, metavar=("BACKEND", "FILE"))
    parser.add_argument("tests_dir", nargs="?")
    parser.add_argument("files", nargs="*")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--backends", default="mpi,gloo",
                        help="comma-separated, of mpi, plain and gloo (gloo is the reference, always run)")
    parser.add_argument("--exclude", help="regular expression: test ids to leave out (over both backends)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per launch")
    args = parser.parse_args()
    if args.worker:
        return worker(*args.worker)
    if not args.tests_dir:
        parser.error("JAX_TESTS_DIR is required")
    try:
        import absl  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "absl-py"], check=True)
    backends_run = [b for b in args.backends.split(",") if b and b != "gloo"] + ["gloo"]
    status = 0
    print(f"JAX's tests/multiprocess, {args.processes} processes x {args.devices} CPU devices")
    print("| file | tests | " + " | ".join(f"over {b}: ok / skip / fail+error" for b in backends_run)
          + " | differ from gloo |")
    print("|---|---|" + "---|" * len(backends_run) + "---|")
    differences = []
    tests_dir = os.path.abspath(args.tests_dir)
    names = args.files or sorted(n for n in os.listdir(tests_dir) if n.endswith("_test.py"))
    for name in names:
        path = os.path.join(tests_dir, name)
        if not os.path.exists(path):
            print(f"| {name} | (not in this checkout) |" + " |" * (len(backends_run) + 1))
            continue
        results = {b: launch(b, path, args.processes, args.devices, backends.launching.free_port(), args.exclude,
                             args.timeout) for b in backends_run}
        cells = []
        for backend in backends_run:
            outcomes, problem = results[backend]
            if outcomes is None:
                cells.append(problem)
                continue
            count = collections.Counter(outcomes.values())
            cell = f"{count['ok']} / {count['skip']} / {count['fail'] + count['error']}"
            cells.append(cell + (f" ({problem})" if problem else ""))
        gloo = results["gloo"][0] or {}
        differing = []
        for backend in backends_run[:-1]:
            ours = results[backend][0] or {}
            differ = sorted(t for t in set(ours) | set(gloo) if ours.get(t) != gloo.get(t))
            differences += [(name, backend, t, ours.get(t, "missing"), gloo.get(t, "missing")) for t in differ]
            differing.append(f"{backend} {len(differ)}")
            if differ or results[backend][1]:
                status = 1
        tests = set(gloo).union(*(set(results[b][0] or {}) for b in backends_run))
        print(f"| {name} | {len(tests)} | " + " | ".join(cells) + f" | {', '.join(differing)} |", flush=True)
    for name, backend, test, a, b in differences:
        print(f"differs: {name} {test}: {backend} {a}, gloo {b}")
    return status


if __name__ == "__main__":
    sys.exit(main())

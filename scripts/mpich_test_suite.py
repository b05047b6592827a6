"""MPICH's own test suite through the wrapper (issue 71): tests written by MPICH's developers, not ours,
run over the wrapper's MPIABI_* exports as MPItrampoline calls them, once with the MPI library alone
(MPI_COLLECTIVES_NODE_PATH=0: the baseline) and once with the node path on for every size and
collective (and, with --ways, reads in place off and the one round off). A test that passes on the
baseline and not through the path is a failure; one that fails on the baseline too cannot run here,
and is listed with the first line it printed.

    python scripts/mpich_test_suite.py [--dirs coll,comm,pt2pt,threads] [--only allred3,...]
                                       [--max-ranks 4] [--json out.json]

The source is MPICH 4.0.2's, from Debian's source package (`apt-get source mpich`, a deb-src entry
added where none is; as root), kept in --cache. Each test is built as a shared library with its main
renamed (tests/programs/mpich_suite/: an mpi.h generated from the wrapper's own mpiabi.h, a shim whose
MPI_COMM_WORLD is a split of the world as XLA splits it, so that the wrapper records it and its node
path takes the suite's collectives on it, and the suite's configuration) and run by run_test.py inside
Python. Tests that need MPICH's dtpools library, or more ranks than --max-ranks, are listed as not
built or skipped. Run it with the Python of a venv made by scripts/setup_env.sh."""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

from mpi_collectives.tools.launching import allow_open_mpi_anywhere, environment, mpiexec_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE = os.path.join(ROOT, "tests", "programs", "mpich_suite")
VERSION = "4.0.2"
EVERY = "all-reduce,all-gather,reduce-scatter,all-to-all"
# The suite's programs split and duplicate communicators their own way: the check of XLA's splits is off
# on both sides.
COMMON = {"MPI_COLLECTIVES_CHECK_SPLITS": "0"}
BASELINE = {**COMMON, "MPI_COLLECTIVES_NODE_PATH": "0"}
PATH_ON = {**COMMON, "MPI_COLLECTIVES_NODE_PATH": "1", "MPI_COLLECTIVES_NODE_PATH_MIN": "0",
           "MPI_COLLECTIVES_NODE_PATH_MAX": "0", "MPI_COLLECTIVES_NODE_PATH_COLLECTIVES": EVERY,
           "MPIR_CVAR_CH4_CMA_ENABLE": "0", "MPI_COLLECTIVES_VERBOSE": "2"}  # (the log says what the path took)
WAYS = {"path": {}, "window": {"MPI_COLLECTIVES_NODE_PATH_DIRECT": "0"},
        "no-round": {"MPI_COLLECTIVES_NODE_PATH_ROUND": "0"}}


def say(text):
    print(text, flush=True)


# ---- the source ----
def source(cache: str) -> str:
    """MPICH's test/mpi folder, extracted into the cache (downloaded once)."""
    tests = os.path.join(cache, f"mpich-{VERSION}", "test", "mpi")
    if os.path.isdir(os.path.join(tests, "coll")):
        return tests
    os.makedirs(cache, exist_ok=True)
    tarballs = glob.glob(os.path.join(cache, f"mpich_{VERSION}.orig.tar.*"))
    if not tarballs:
        if os.geteuid() == 0 and not _has_deb_src():
            with open("/etc/apt/sources.list.d/mpi-collectives-src.sources", "w") as f:
                f.write("Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n"
                        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=600)
        proc = subprocess.run(["apt-get", "source", "--download-only", f"mpich={VERSION}-3"], cwd=cache,
                              capture_output=True, text=True, timeout=600)
        tarballs = glob.glob(os.path.join(cache, f"mpich_{VERSION}.orig.tar.*"))
        if not tarballs:
            raise SystemExit(f"mpich_test_suite.py: MPICH {VERSION}'s source could not be downloaded "
                             f"(apt-get source mpich: {proc.stderr.strip()[-300:]}). Fix: put "
                             f"mpich_{VERSION}.orig.tar.xz in {cache}")
    with tarfile.open(tarballs[0]) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(f"mpich-{VERSION}/test/mpi/")]
        tar.extractall(cache, members=members)
    return tests


def _has_deb_src() -> bool:
    for path in glob.glob("/etc/apt/sources.list") + glob.glob("/etc/apt/sources.list.d/*"):
        with open(path) as f:
            text = f.read()
        if re.search(r"^\s*(deb-src\s|Types:.*deb-src)", text, re.M):
            return True
    return False


# ---- the build ----
# Lines of the suite that hold only where MPI_Datatype is an int (MPICH's own ABI), corrected to the
# standard's types: the wrapper's handles are 8 bytes (MPItrampoline's ABI, as Open MPI's pointers are),
# so an int array of datatypes truncates them. Each is a fault of the test, not of MPI; the result says
# which tests were corrected.
PORTABLE = {("coll", "nonblocking2"): [(r"\bint \*(send|recv)types\b", r"MPI_Datatype *\1types")],
            ("coll", "nonblocking3"): [(r"\bint \*(send|recv)types\b", r"MPI_Datatype *\1types")]}


# Tests that fail through the wrapper with the path off, pass natively, and stop by design: what each
# does is what the wrapper's checks stop on a communicator split as XLA splits (the shim's world is one).
BY_DESIGN = {("pt2pt", "rcancel"): "receives a 0-byte message into a 100-byte receive on the shim's world: the "
                                   "wrapper checks that each receive on a communicator split as XLA splits gets "
                                   "what it posted (XLA's permutes always do; a short one is ranks disagreeing "
                                   "about a shape: docs/design.md)"}


def source_file_of(tests: str, into: str, d: str, name: str) -> str:
    """The test's C file, or a corrected copy of it (PORTABLE)."""
    c_file = os.path.join(tests, d, name + ".c")
    if (d, name) not in PORTABLE:
        return c_file
    text = open(c_file).read()
    for pattern, replacement in PORTABLE[(d, name)]:
        text, n = re.subn(pattern, replacement, text)
        if not n:
            raise SystemExit(f"mpich_test_suite.py: the correction {pattern!r} no longer matches {d}/{name}.c")
    os.makedirs(os.path.join(into, "portable", d), exist_ok=True)
    patched = os.path.join(into, "portable", d, name + ".c")
    with open(patched, "w") as f:
        f.write(text)
    return patched

def cc(args, cwd, compiler="cc"):
    return subprocess.run([compiler, "-O1", "-fPIC", "-w", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def build(tests: str, into: str, dirs: list) -> dict:
    """{(dir, name): library path or None (with why)}: the suite's tests built against the wrapper."""
    inc = os.path.join(into, "include")
    os.makedirs(inc, exist_ok=True)
    generated = os.path.join(ROOT, "native", "generated")
    with open(os.path.join(inc, "mpi.h"), "w") as f:
        f.write(subprocess.check_output([sys.executable, os.path.join(SUITE, "make_mpi_h.py"),
                                         os.path.join(generated, "mpiabi.h")], text=True))
    shutil.copy(os.path.join(SUITE, "mpitestconf.h"), inc)
    flags = ["-I", inc, "-I", os.path.join(tests, "include"), "-I", generated]
    objects = []
    for source_file in ["util/mtest.c", "util/mtest_common.c", "util/dtypes.c", "util/mtest_thread.c",
                        os.path.join(SUITE, "shim.c")]:
        obj = os.path.join(into, os.path.basename(source_file)[:-2] + ".o")
        proc = cc([*flags, "-c", os.path.join(tests, source_file), "-o", obj], into)
        if proc.returncode:
            raise SystemExit(f"mpich_test_suite.py: building {source_file} failed:\n{proc.stderr[-2000:]}")
        objects.append(obj)
    built = {}
    for d in dirs:
        os.makedirs(os.path.join(into, d), exist_ok=True)
        for c_file in sorted(glob.glob(os.path.join(tests, d, "*.c"))):
            name = os.path.basename(c_file)[:-2]
            c_file = source_file_of(tests, into, d, name)
            lib = os.path.join(into, d, name + ".so")
            # -Bsymbolic: a test's own globals bind to itself, as in the executable it was written to be
            # (redscat2's `int err` bound to the C library's err() when loaded as a library)
            proc = cc(["-shared", "-Wl,-Bsymbolic", "-Dmain=conformance_main", *flags, c_file, *objects, "-o", lib,
                       "-lpthread", "-lm"], into)
            first = next((line for line in proc.stderr.splitlines() if "error" in line), proc.stderr[-200:])
            built[(d, name)] = (lib, "") if proc.returncode == 0 else (None, first.split("error: ")[-1])
    return built


def native_compiler():
    """The MPI library's own compiler wrapper beside its mpiexec (the mpich wheel's mpicc), or None."""
    mpicc = os.path.join(os.path.dirname(mpiexec_path()), "mpicc")
    return mpicc if os.access(mpicc, os.X_OK) else None


class Native:
    """The suite's tests built as MPICH's developers build them: executables against the library's own
    mpi.h, run without the wrapper. The reference for a test that fails through the wrapper with the path
    off: one that passes here fails because of the wrapper (coll/nonblocking2 found an MPI_Op_free fault
    there), one that fails here too cannot run on this machine. Built lazily, only for such tests."""

    def __init__(self, tests: str, into: str, mpicc: str):
        self.tests, self.into, self.mpicc, self.objects = tests, os.path.join(into, "native"), mpicc, None

    def _cc(self, args):
        return cc(["-I", self.into, "-I", os.path.join(self.tests, "include"), *args], self.into, self.mpicc)

    def executable(self, d: str, name: str):
        if self.objects is None:
            os.makedirs(self.into, exist_ok=True)
            shutil.copy(os.path.join(SUITE, "mpitestconf.h"), self.into)
            self.objects = []
            for source_file in ["util/mtest.c", "util/mtest_common.c", "util/dtypes.c", "util/mtest_thread.c"]:
                obj = os.path.join(self.into, os.path.basename(source_file)[:-2] + ".o")
                if self._cc(["-c", os.path.join(self.tests, source_file), "-o", obj]).returncode:
                    return None
                self.objects.append(obj)
        exe = os.path.join(self.into, d.replace("/", "_") + "_" + name)
        proc = self._cc([os.path.join(self.tests, d, name + ".c"), *self.objects, "-o", exe, "-lpthread", "-lm"])
        # (the original source: MPICH's int datatypes make PORTABLE's corrections moot natively)
        return exe if proc.returncode == 0 else None

    def run(self, d, name, ranks, args, timeout):
        exe = self.executable(d, name)
        if exe is None:
            return None
        cmd = [mpiexec_path(), "-n", str(ranks), exe, *args]
        try:
            proc = subprocess.run(cmd, env=environment({}), capture_output=True, text=True, timeout=timeout)
            out, code = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:
            out, code = ((e.stdout or b"") + (e.stderr or b"")).decode(errors="replace"), "timeout"
        return {"passed": code == 0 and "No Errors" in out, "code": code}


def testlist(tests: str, d: str) -> list:
    """(dir, name, ranks, args, seconds) of the folder's testlist.in; subfolders followed."""
    entries = []
    path = os.path.join(tests, d, "testlist.in")
    if not os.path.exists(path):
        return entries
    for line in open(path):
        line = line.split("#")[0].strip()
        if not line or "@" in line:  # configure's conditions (large tests, Fortran, ...): left out
            continue
        words = line.split()
        if len(words) == 1 and os.path.isdir(os.path.join(tests, d, words[0])):
            entries += testlist(tests, f"{d}/{words[0]}")
            continue
        if len(words) < 2 or not words[1].isdigit():
            continue
        options = dict(w.split("=", 1) for w in words[2:] if "=" in w)
        args = [a for w in words[2:] if w.startswith("arg=") for a in [w[4:]]]
        entries.append((d, words[0], int(words[1]), args, float(options.get("timeLimit", 60)),
                        options.get("xfail", "")))
    return entries


# ---- the runs ----
def xfail_why(xfail: str) -> str:
    """Why a test MPICH's own list expects to fail is not run (pt2pt's send-cancel tests, the only ones)."""
    return (f"cancels a send, which MPICH does not do (MPI 4.1 deprecates cancelling sends): MPICH's own test list "
            f"expects it to fail on MPICH itself (xfail={xfail}), and run, it waits until its time limit")


def run_one(lib, wrapper, ranks, args, env, timeout):
    cmd = [mpiexec_path(), "-n", str(ranks), sys.executable, os.path.join(SUITE, "run_test.py"), lib, wrapper, *args]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=environment(env), capture_output=True, text=True, timeout=timeout)
        out, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = ((e.stdout or b"") + (e.stderr or b"")).decode(errors="replace")
        code = "timeout"
    passed = code == 0 and "No Errors" in out
    said = next((line for line in out.splitlines() if "error" in line.lower() or "Found" in line), out[-200:])
    return {"passed": passed, "code": code, "seconds": round(time.monotonic() - start, 2), "said": said.strip()[:300],
            "windows": out.count("through a shared window"), "rounds": out.count("in one round through its window"),
            "command": " ".join(f"{k}={v}" for k, v in env.items()) + " " + " ".join(cmd)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dirs", default="coll,comm,pt2pt,threads")
    parser.add_argument("--only", default="", help="test names, comma-separated (default: every one listed)")
    parser.add_argument("--max-ranks", type=int, default=4, help="tests listed for more ranks run at this many")
    parser.add_argument("--ways", default="path", help=f"ways through the path: {','.join(WAYS)}")
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "mpi-collectives-mpich-src"))
    parser.add_argument("--wrapper", help="another build of the wrapper (default: the installed package's)")
    parser.add_argument("--no-native", action="store_true",
                        help="no native reference for tests that fail through the wrapper with the path off")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    allow_open_mpi_anywhere(os.environ)  # Open MPI's launcher as root, more ranks than cores
    tests = source(args.cache)
    wrapper = args.wrapper or subprocess.check_output([sys.executable, "-m", "mpi_collectives", "libpath"], text=True,
                                                      cwd=tempfile.gettempdir()).strip()
    only = set(filter(None, args.only.split(",")))
    dirs = args.dirs.split(",")
    entries = [e for d in dirs for e in testlist(tests, d) if not only or e[1] in only]
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as into:
        built = build(tests, into, sorted({e[0] for e in entries}))
        mpicc = None if args.no_native else native_compiler()
        native = Native(tests, into, mpicc) if mpicc else None
        results = []
        for d, name, ranks, test_args, seconds, xfail in entries:
            lib, why = built.get((d, name), (None, "no source file"))
            row = {"test": f"{d}/{name}", "ranks": min(ranks, args.max_ranks), "listed_ranks": ranks,
                   "args": test_args, **({"corrected": [p for p, _ in PORTABLE[(d, name)]]}
                                         if (d, name) in PORTABLE else {})}
            if lib is None:
                results.append({**row, "outcome": "not built", "why": why})
                continue
            if xfail:  # each cancels a send: run, it waits until its time limit
                results.append({**row, "outcome": "cannot run", "why": xfail_why(xfail)})
                continue
            timeout = max(seconds, 30) * 2
            base = run_one(lib, wrapper, row["ranks"], test_args, BASELINE, timeout)
            missing = re.search(r"undefined symbol: (MPI_\w+)", base["said"])
            if not base["passed"] and missing:  # MPI-4's additions (persistent collectives, large counts, ...)
                results.append({**row, "outcome": "cannot run", "why": f"calls {missing.group(1)}, which the MPIABI "
                                f"interface (jaxlib's MPItrampoline) does not have"})
                continue
            if not base["passed"]:
                ref = native.run(d, name, row["ranks"], test_args, timeout) if native else None
                if ref and ref["passed"] and (d, name) in BY_DESIGN:
                    results.append({**row, "outcome": "cannot run", "why": f"by design: {BY_DESIGN[(d, name)]}"})
                    continue
                if ref and ref["passed"]:  # the wrapper's fault, not the path's
                    results.append({**row, "outcome": "FAILED", "why": f"fails through the wrapper with the path "
                                    f"off ({base['code']}): {base['said']}; passes with the library natively\n"
                                    f"    reproduce: {base['command']}"})
                    say(f"FAILED     {d}/{name} at {row['ranks']} ranks\n  {results[-1]['why']}")
                    continue
                where = ("natively too" if ref else "natively: not built") if native else "(no native reference)"
                results.append({**row, "outcome": "cannot run", "why": f"fails with the library alone, {where} "
                                f"({base['code']}): {base['said']}"})
                continue
            row["library_seconds"] = base["seconds"]
            failed = []
            for way in args.ways.split(","):
                got = run_one(lib, wrapper, row["ranks"], test_args, {**PATH_ON, **WAYS[way]}, timeout)
                row[f"{way}_seconds"] = got["seconds"]
                row[f"{way}_windows"], row[f"{way}_rounds"] = got["windows"], got["rounds"]  # ranks' lines
                if not got["passed"]:
                    failed.append(f"{way}: ({got['code']}) {got['said']}\n    reproduce: {got['command']}")
            results.append({**row, "outcome": "FAILED" if failed else "passed", "why": "\n  ".join(failed)})
            say(f"{results[-1]['outcome']:10} {d}/{name} at {row['ranks']} ranks" +
                (f"\n  {results[-1]['why']}" if failed else ""))
    counts = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    summary = {"mpich_tests": VERSION, "dirs": dirs, "ways": args.ways.split(","), "max_ranks": args.max_ranks,
               "counts": counts, "seconds": round(time.monotonic() - start, 1),
               "venv": os.path.basename(os.path.dirname(os.path.dirname(mpiexec_path()))), "results": results}
    reached = sum(1 for r in results if r.get("path_windows") or r.get("path_rounds"))
    summary["reached_the_path"] = reached
    say(f"mpich test suite: {counts} in {summary['seconds']} s; {reached} of the tests run made a window or a round")
    for r in results:
        if r["outcome"] in ("cannot run", "not built"):
            say(f"  {r['outcome']}: {r['test']}: {r['why'][:200]}")
    if args.json:  # without this machine's paths (the reproducing commands above keep them)
        venv = os.path.dirname(os.path.dirname(mpiexec_path()))
        for r in results:
            r["why"] = portable(r["why"], venv)
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 1 if counts.get("FAILED") else 0


def portable(text: str, venv: str) -> str:
    """A result's words with the build folder, the venv and the checkout named instead of their paths."""
    text = re.sub(r"/\S*/tmp[^/\s]*/", "BUILD/", text.replace(venv, "VENV"))
    return text.replace(ROOT + "/", "").replace(ROOT, ".")


if __name__ == "__main__":
    sys.exit(main())

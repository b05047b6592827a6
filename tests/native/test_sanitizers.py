"""The wrapper under the sanitizers (issue 71): three expert reads in a row found faults that the
project's tests passed, one of them (slice bounds computed in int) a signed overflow that
UndefinedBehaviorSanitizer names at once. So the wrapper is built with -fsanitize=address,undefined
(native/build_native.py, MPI_COLLECTIVES_SANITIZE; -fno-wrapv, since Python's flags make signed
overflow defined and the check silent), and tests/programs/node_path_harness.c's scenarios run
through it, the path on for every size; then a UBSan build (no interceptors, so it loads where
MPItrampoline loads it, with RTLD_DEEPBIND) carries JAX's node-path exactness program, and a
ThreadSanitizer build runs the threaded scenarios under the harness built with it (JAX cannot carry
that one: MPItrampoline's RTLD_DEEPBIND, which the runtime refuses). Any report fails the test. Once, in the mpich configuration: the wrapper's own code is the same on every family
(CI time: about 60 s with the two builds; the UBSan one is tests/conftest.py's checked_package, which
the given-up calls' suite shares)."""
import os
import shutil
import subprocess
import sys

import pytest

from helpers import ONCE, PROGRAMS, ROOT, explain, extended, mpirun, wrapper_built

pytestmark = pytest.mark.skipif(not ONCE or not shutil.which("cc"),
                                reason="once (the mpich configuration), with a C compiler: the wrapper's own code")
REPORTS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer", "SUMMARY: UndefinedBehavior",
           "WARNING: ThreadSanitizer", "ThreadSanitizer:")
ON = {"MPI_COLLECTIVES_NODE_PATH": "1", "MPI_COLLECTIVES_NODE_PATH_MIN": "0"}


def build(into, kinds):
    return wrapper_built(into, MPI_COLLECTIVES_SANITIZE=kinds)


def clean(proc):
    text = proc.stdout + proc.stderr
    assert not any(report in text for report in REPORTS), explain(proc)


@pytest.fixture(scope="module")
def asan(tmp_path_factory):
    wrapper = build(tmp_path_factory.mktemp("asan"), "address,undefined")
    lib = str(tmp_path_factory.mktemp("harness") / "harness.so")
    cmd = ["cc", "-O1", "-Wall", "-shared", "-fPIC", "-Dmain=conformance_main", "-I", "native/generated", "-o", lib,
           "tests/programs/node_path_harness.c", "-ldl", "-lpthread"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, explain(proc)
    runtime = subprocess.check_output(["cc", "-print-file-name=libasan.so"], text=True).strip()
    # The sanitizers' runtimes refuse RTLD_DEEPBIND (the harness drops it); leaks are Python's own.
    env = {"LD_PRELOAD": runtime, "ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "print_stacktrace=1",
           "HARNESS_NO_DEEPBIND": "1"}
    return [sys.executable, os.path.join(PROGRAMS, "conformance_runner.py"), lib, wrapper], env


@pytest.mark.parametrize("n, scenario, extra", [
    (3, "round", {}),
    (3, "cycles", {}),
    (3, "user-types", {}),
    (3, "pair-then-reduce", {"MPI_COLLECTIVES_NODE_PATH_COLLECTIVES": "all-reduce,all-to-all"}),
    (3, "pair-then-reduce", {"MPI_COLLECTIVES_NODE_PATH_COLLECTIVES": "all-reduce,all-to-all",
                             "MPI_COLLECTIVES_NODE_PATH_DIRECT": "0"}),
    (2, "progress", {"MPIR_CVAR_CH4_CMA_ENABLE": "0"}),
    (2, "windows-at-once", {}),
])
def test_the_node_paths_scenarios_under_address_and_undefined_behaviour_sanitizers(asan, n, scenario, extra):
    harness, env = asan
    proc = mpirun(n, [*harness, scenario], env={**env, **ON, **extra}, timeout=180)
    clean(proc)
    assert proc.returncode == 0 and proc.stdout.count("DONE rank") == n, explain(proc)
    assert proc.stdout.count(f"RESULT {scenario} rank") >= n and "WRONG" not in proc.stdout, explain(proc)


def test_an_all_reduce_past_2_31_elements_times_ranks_under_the_sanitizers(asan):
    """The overflow the third read found by reading: UBSan names it on the old code
    ('signed integer overflow: 1100000000 * 2 cannot be represented in type int')."""
    if int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemAvailable:"))) < 3 << 20:
        pytest.skip("needs 3 GiB of free memory (two ranks of 1.1 GB)")
    harness, env = asan
    proc = mpirun(2, [*harness, "big"], env={**env, **ON, "MPI_COLLECTIVES_NODE_PATH_MAX": "0"}, timeout=180)
    clean(proc)
    assert proc.returncode == 0 and "1100000000 elements, 0 wrong" in proc.stdout, explain(proc)


@pytest.fixture(scope="module")
def tsan(tmp_path_factory):
    """The wrapper built with -fsanitize=thread, and the harness as an executable of its own built
    with it too: ThreadSanitizer's runtime must be the program's from its first instruction (preloaded
    into Python under MPICH it crashed before a rank's first line). UCX_MEM_EVENTS=no: UCX's memory
    hooks (the mpich wheel's libucm) take a pthread rwlock inside glibc's madvise of an exiting
    thread's stack, after ThreadSanitizer dropped that thread's state, and every rank ended with
    SIGSEGV at exit (UCX's own thread, "async"; the scenarios had passed)."""
    wrapper = build(tmp_path_factory.mktemp("tsan"), "thread")
    exe = str(tmp_path_factory.mktemp("harness") / "harness")
    cmd = ["cc", "-O1", "-g", "-Wall", "-fsanitize=thread", "-I", "native/generated", "-o", exe,
           "tests/programs/node_path_harness.c", "-ldl", "-lpthread"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, explain(proc)
    env = {"HARNESS_NO_DEEPBIND": "1", "UCX_MEM_EVENTS": "no", "TSAN_OPTIONS": "second_deadlock_stack=1"}
    return [exe, wrapper], env


@pytest.mark.parametrize("n, scenario, extra", [
    (3, "round", {}),
    (3, "cycles", {}),
    (3, "windows-at-once", {}),  # two threads, each on a communicator of its own
    (3, "sum", {}),
    (3, "pair-then-reduce", {"MPI_COLLECTIVES_NODE_PATH_COLLECTIVES": "all-reduce,all-to-all"}),
    (2, "progress", {"MPIR_CVAR_CH4_CMA_ENABLE": "0"}),
])
@extended  # (a build of its own and six scenarios, about 2 minutes; AddressSanitizer's run in CI)
def test_the_node_paths_scenarios_under_the_thread_sanitizer(tsan, n, scenario, extra):
    """Issue 71: the wrapper's threads (the round's waits, the windows' owners, the progress it drives)
    under ThreadSanitizer: any report fails the test (exit 66 is ThreadSanitizer's own)."""
    harness, env = tsan
    proc = mpirun(n, [*harness, scenario], env={**env, **ON, **extra}, timeout=180)
    clean(proc)
    assert proc.returncode == 0 and proc.stdout.count("DONE rank") == n, explain(proc)
    assert proc.stdout.count(f"RESULT {scenario} rank") >= n and "WRONG" not in proc.stdout, explain(proc)


@pytest.mark.jax
@extended  # (19 s: the node path's scenarios run under AddressSanitizer and UBSan in CI, the same code without JAX)
def test_jax_through_the_node_path_under_the_undefined_behaviour_sanitizer(checked_package):
    """JAX's own collectives through a UBSan build of the wrapper: a copy of the installed package with
    the sanitized library in its place (the package and MPItrampoline must load one file)."""
    env = {"PYTHONPATH": checked_package, "MPI_COLLECTIVES_NODE_PATH": "1", "UBSAN_OPTIONS": "print_stacktrace=1",
           "MPI_COLLECTIVES_NODE_PATH_COLLECTIVES": "all-reduce,all-gather,reduce-scatter,all-to-all",
           "MPI_COLLECTIVES_VERBOSE": "2"}
    proc = mpirun(3, [sys.executable, os.path.join(PROGRAMS, "node_path.py")], env=env, timeout=300)
    clean(proc)
    assert proc.returncode == 0 and proc.stdout.count("PASS node path rank") == 3, explain(proc)
    assert "through a shared window" in proc.stderr, explain(proc)

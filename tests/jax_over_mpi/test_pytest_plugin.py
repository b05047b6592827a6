"""The pytest plugin (mpi_collectives_pytest_plugin.py, mpi_collectives/testing/pytest_plugin.py):
a suite under mpiexec runs as one job. Each scenario suite of tests/programs/pytest_suites/ runs
under mpiexec; its outcomes, read from the one --junitxml rank 0 writes, are compared with what one
process would report for the same failures, and every launch ends within its bound with a line
saying why. In the mpich configuration every scenario; on the other families the issue's suite at 3
ranks and the wait that cannot be given up (docs/contributing.md)."""
import os
import re
import shutil
import sys
import time
import xml.etree.ElementTree as ElementTree

import pytest

from helpers import EXPECTED_FAMILY, FAMILY_CONFIG, ONCE, PROGRAMS, explain, extended, mpiexec_path, run, sigterm_once
from mpi_collectives.tools import launching

SUITES = os.path.join(PROGRAMS, "pytest_suites")
PY = sys.executable
# The issue's suite: what one process reports when the failures of every rank are its own.
ISSUE_OUTCOMES = {"test_1_passes": "passed", "test_2_rank0_fails_before_its_psum": "failed",
                  "test_3_same_shape_as_2_passes": "passed",
                  "test_4_last_rank_raises_before_a_psum_of_another_shape": "failed",
                  "test_5_rank0_fails_after_the_psums": "failed", "test_6_skipped_on_rank1_only": "skipped",
                  "test_7_passes": "passed", "test_8_rank0_fails_before_the_last_psum": "failed"}
once = pytest.mark.skipif(not ONCE, reason="the plugin's Python side, the same on every family: the mpich "
                          "configuration (the issue's suite and the wait that cannot be given up run on each)")


def suite_dir(tmp_path, *names):
    """The suites' files in a folder of their own, with an ini of their own (the repository's
    conftest and pytest settings stay out of the suite)."""
    folder = tmp_path / "suite"
    folder.mkdir()
    shutil.copy(os.path.join(SUITES, "common.py"), folder)
    for name in names:
        source = os.path.join(SUITES, name)
        (shutil.copytree if os.path.isdir(source) else shutil.copy)(source, folder / os.path.basename(name))
    (folder / "pytest.ini").write_text("[pytest]\n")
    return folder


def pytest_args(folder, *args):
    # pytest-mpi's summary imports mpi4py, whose wheel has no build for the MPI-5 standard ABI (as in
    # test_mpi_suites.py): it would load MPICH's libmpi.so.12 beside libmpi_abi.so.1.
    no_pytest_mpi = ["-p", "no:pytest_mpi"] if EXPECTED_FAMILY == "standard" else []
    return [PY, "-m", "pytest", "-p", "no:cacheprovider", *no_pytest_mpi, "-q", "--color=no",
            "-c", str(folder / "pytest.ini"), f"--junitxml={folder / 'report.xml'}", *args]


def launch(folder, n, *args, env=None, timeout=240):
    environment = {"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None, **(env or {})}
    return run([mpiexec_path(), "-n", str(n), *pytest_args(folder, *args)], env=environment, timeout=timeout,
               cwd=str(folder))


def outcomes(folder):
    """{test name: passed | failed | error | skipped | xfailed} from the one report rank 0 wrote."""
    found = {}
    for case in ElementTree.parse(folder / "report.xml").getroot().iter("testcase"):
        kinds = {child.tag: child for child in case}
        if "error" in kinds:
            found[case.get("name")] = "error"
        elif "failure" in kinds:
            found[case.get("name")] = "failed"
        elif "skipped" in kinds:
            found[case.get("name")] = "xfailed" if kinds["skipped"].get("type") == "pytest.xfail" else "skipped"
        else:
            found[case.get("name")] = "passed"
    return found


def one_report(proc):
    """Rank 0 alone printed the report."""
    text = proc.stdout + proc.stderr
    assert text.count("short test summary info") == 1, explain(proc)


@pytest.mark.jax
@pytest.mark.version_dependent
# 8 ranks in the long checks (issue 82: the suites at scale; 8 ranks oversubscribed 4x on 2 cores)
@pytest.mark.parametrize("n", [2, 3, pytest.param(8, marks=extended)] if not FAMILY_CONFIG else [3])
def test_a_failure_on_one_rank_is_the_tests_failure_and_never_a_wrong_number(tmp_path, n):
    folder = suite_dir(tmp_path, "test_issue_suite.py")
    proc = launch(folder, n, "test_issue_suite.py")
    assert proc.returncode == 1, explain(proc)
    assert outcomes(folder) == ISSUE_OUTCOMES, explain(proc)
    one_report(proc)
    text = proc.stdout
    # each failing rank's own traceback, under its number, in rank 0's report
    assert "rank 0 fails before its psum" in text and "the last rank raises before a psum" in text, explain(proc)
    assert f"rank {n - 1} ended test_issue_suite.py::test_4" in text or "rank 0 ended" in text, explain(proc)
    assert "4 failed, 3 passed, 1 skipped" in text, explain(proc)
    # each rank's traceback as pytest prints it, its first line indented too (issue 72)
    assert re.search(r"^_+ ranks? [\d, ]+ _+\n    def test_", text, re.M), explain(proc)
    assert not re.search(r"^_+ ranks? [\d, ]+ _+\ndef test_", text, re.M), explain(proc)


@pytest.mark.jax
def test_a_wait_that_cannot_be_given_up_ends_the_job_with_the_report_kept(tmp_path):
    folder = suite_dir(tmp_path, "test_stuck_suite.py")
    start = time.monotonic()
    proc = launch(folder, 2, "test_stuck_suite.py", timeout=120)
    assert proc.returncode != 0, explain(proc)
    assert time.monotonic() - start < 90, explain(proc)
    text = proc.stdout + proc.stderr
    assert "test_stuck_suite.py::test_rank0_leaves_before_a_ppermute cannot finish" in text, explain(proc)
    assert "which rank 0 has left" in text and "collective permute" in text, explain(proc)
    assert "The report of the tests run so far is above and in" in text, explain(proc)
    found = outcomes(folder)
    assert found == {"test_before_passes": "passed", "test_before_fails": "failed",
                     "test_rank0_leaves_before_a_ppermute": "failed"}, explain(proc)


@once
@pytest.mark.jax
def test_other_failures_on_one_rank_and_the_timeout(tmp_path):
    folder = suite_dir(tmp_path, "test_faults_suite.py")
    proc = launch(folder, 2, "--mpi-timeout", "10", "test_faults_suite.py", env={"SUITE_TIMEOUT": "1"})
    assert proc.returncode == 1, explain(proc)
    assert outcomes(folder) == {
        "test_first_fails_on_rank0_before_the_first_psum": "failed", "test_fixture_error": "error",
        "test_raises_catches_on_rank0_only": "failed", "test_sys_exit_on_last_rank": "failed",
        "test_fixtures": "passed", "test_needs_64_ranks": "skipped", "test_xfail": "xfailed",
        "test_last_rank_sleeps_past_the_timeout": "failed", "test_after_passes": "passed"}, explain(proc)
    one_report(proc)
    text = proc.stdout
    assert "DID NOT RAISE" in text and "SystemExit: 3" in text, explain(proc)
    assert "ran longer than --mpi-timeout=10 s on rank 1" in text, explain(proc)
    assert "past its limit of 10 s (--mpi-timeout)" in text, explain(proc)
    assert "needs 64 MPI ranks, the job has 2" in text or "skipped" in text, explain(proc)


@once
@pytest.mark.jax
def test_x_and_k_stop_and_select_on_every_rank(tmp_path):
    folder = suite_dir(tmp_path, "test_issue_suite.py")
    proc = launch(folder, 2, "-x", "test_issue_suite.py")
    assert proc.returncode == 1, explain(proc)
    assert outcomes(folder) == {"test_1_passes": "passed", "test_2_rank0_fails_before_its_psum": "failed"}, \
        explain(proc)
    proc = launch(folder, 2, "-k", "test_3 or test_7", "test_issue_suite.py")
    assert proc.returncode == 0, explain(proc)
    assert outcomes(folder) == {"test_3_same_shape_as_2_passes": "passed", "test_7_passes": "passed"}, explain(proc)


@once
@pytest.mark.jax
def test_two_devices_a_process(tmp_path):
    folder = suite_dir(tmp_path, "test_issue_suite.py")
    proc = launch(folder, 2, "test_issue_suite.py", env={"JAX_NUM_CPU_DEVICES": "2"})
    assert proc.returncode == 1, explain(proc)
    assert outcomes(folder) == ISSUE_OUTCOMES, explain(proc)


@once
@pytest.mark.jax
def test_a_suite_that_calls_jax_distributed_initialize_itself(tmp_path):
    folder = suite_dir(tmp_path, "jax_own_init")
    proc = launch(folder, 2, "jax_own_init")
    assert proc.returncode == 1, explain(proc)
    assert outcomes(folder) == {"test_joined": "passed", "test_rank0_fails": "failed", "test_after": "passed"}, \
        explain(proc)


@once
@pytest.mark.jax
def test_ranks_that_collect_different_tests_are_stopped_with_a_sentence(tmp_path):
    folder = suite_dir(tmp_path, "test_issue_suite.py")
    environment = launching.environment({"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None})
    command = [mpiexec_path(), "-n", "1", *pytest_args(folder, "-k", "test_1", "test_issue_suite.py"), ":",
               "-n", "1", *pytest_args(folder, "-k", "test_7", "test_issue_suite.py")]
    proc = launching.run(command, env=environment, timeout=120, cwd=str(folder))
    assert proc.returncode == 4, explain(proc)
    assert "the ranks collected different tests (rank 0: 1 tests, rank 1: 1 tests)" in proc.stdout + proc.stderr, \
        explain(proc)


@once
@pytest.mark.jax
def test_sigterm_to_the_launcher_keeps_the_report_of_the_tests_run(tmp_path):
    folder = suite_dir(tmp_path, "test_sigterm_suite.py")
    code, text = sigterm_once([mpiexec_path(), "-n", "2", *pytest_args(folder, "-s", "test_sigterm_suite.py")],
                              lambda got: "".join(got).count("running until stopped") == 2,
                              env={"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None},
                              cwd=str(folder), timeout=180)
    assert code != 0, text
    assert "rank 0/2 stopped by SIGTERM in test_sigterm_suite.py::test_runs_until_stopped; the report of the " \
           "tests run so far is above" in text, text
    assert "1 failed, 1 passed" in text, text
    assert outcomes(folder) == {"test_passes": "passed", "test_fails_on_rank0": "failed"}, text
    # each rank said how it ended; none is named killed by SIGKILL or the out-of-memory killer (issue 72)
    assert "out-of-memory killer" not in text, text


@once
@pytest.mark.jax
def test_phases_of_a_program_outside_pytest():
    from helpers import mpirun

    proc = mpirun(3, [PY, os.path.join(PROGRAMS, "phases_program.py"), SUITES],
                  env={"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}, timeout=240)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.count(": ok") == 3, explain(proc)
    assert "phase 'evaluation' failed on rank 0" in proc.stdout, explain(proc)


@once
@pytest.mark.jax
def test_a_members_vote_behind_another_groups_is_found(tmp_path):
    """Issue 71 (finding 8): rank 0 waits in its row's psum; the other row's votes come first, its
    member's a second later. A wait that looked at the oldest vote alone never saw it: 4 ranks hung
    until killed (the review's 240 s run)."""
    folder = suite_dir(tmp_path, "test_vote_order_suite.py")
    proc = launch(folder, 4, "test_vote_order_suite.py", timeout=150)
    assert proc.returncode == 1, explain(proc)
    assert outcomes(folder) == {"test_a_psum_over_rows": "passed", "test_b_rank1_fails_after_the_other_row_voted":
                                "failed", "test_c_psum_over_both": "passed"}, explain(proc)
    one_report(proc)
    assert "rank 1 ended" in proc.stdout, explain(proc)


@once
def test_collectives_a_test_dispatched_belong_to_that_test(tmp_path):
    """Issue 72: a test that dispatched 300 psums and returned without waiting left XLA running them in
    the next stages on one rank, and the job stopped with "the ranks are in different phases" (2 of 4
    runs here; NetKet's distributed tests at test 20-22 of 48). Run three times: it was a race."""
    folder = suite_dir(tmp_path, "test_async_dispatch_suite.py")
    for _ in range(3):
        proc = launch(folder, 2, "test_async_dispatch_suite.py", timeout=120)
        assert proc.returncode == 0, explain(proc)
        assert outcomes(folder) == {"test_a_dispatches_and_returns_without_waiting": "passed",
                                    "test_b_skipped": "skipped", "test_c_one_more_psum": "passed"}, explain(proc)


@once
@pytest.mark.skipif(EXPECTED_FAMILY == "standard", reason="mpi4py has no standard-ABI build")
def test_a_rank_stuck_in_an_mpi4py_call_ends_the_job_with_the_test_named(tmp_path):
    """Issue 72: rank 1 fails before comm.allreduce; rank 0 waited in mpi4py's call and rank 1 in the
    vote, silent for ever. Now the job ends after the 10 s hold, with the report of the test before."""
    folder = suite_dir(tmp_path, "test_mpi4py_stuck_suite.py")
    proc = launch(folder, 2, "test_mpi4py_stuck_suite.py", timeout=90)
    assert proc.returncode != 0, explain(proc)
    assert re.search(r"test_b_rank1_fails_before_its_allreduce cannot finish: rank 0 waits at "
                     r"test_mpi4py_stuck_suite.py:\d+ .*outside the package's collectives.* while rank 1 failed it",
                     proc.stdout + proc.stderr), explain(proc)
    assert outcomes(folder) == {"test_a_allreduce": "passed"}, explain(proc)
    assert (proc.stdout + proc.stderr).count("1 passed in") == 1, explain(proc)  # rank 0's summary, once


@once
@pytest.mark.skipif(EXPECTED_FAMILY == "standard", reason="mpi4py has no standard-ABI build")
def test_a_rank_only_slow_outside_mpi_is_not_taken_for_stuck(tmp_path):
    """The hold's other side: rank 0 waits 11 s for a subprocess while rank 1 waits in the vote."""
    folder = suite_dir(tmp_path, "test_slow_rank_suite.py")
    proc = launch(folder, 2, "test_slow_rank_suite.py", timeout=90)
    assert proc.returncode == 0, explain(proc)
    assert outcomes(folder) == {"test_a_rank0_runs_a_subprocess_past_the_hold": "passed",
                                "test_b_allreduce_after": "passed"}, explain(proc)


@once
@pytest.mark.skipif(EXPECTED_FAMILY == "standard", reason="pytest-mpi imports mpi4py (no standard-ABI build)")
def test_pytest_mpis_only_mpi_is_honoured(tmp_path):
    """The plugin set --with-mpi for every suite, and pytest-mpi then ran the unmarked tests too: its own
    suite failed with the package merely installed (issue 72)."""
    folder = suite_dir(tmp_path, "test_only_mpi_suite.py")
    proc = launch(folder, 2, "--only-mpi", "test_only_mpi_suite.py", timeout=120)
    assert proc.returncode == 0, explain(proc)
    assert outcomes(folder) == {"test_marked_runs": "passed",
                                "test_unmarked_is_skipped_under_only_mpi": "skipped"}, explain(proc)


GIVEN_UP_OUTCOMES = {"test_a_psum": "passed", "test_b_rank1_fails_and_rank0_calls_again_after_each_failure": "failed",
                     "test_c_psum_after_the_settled_calls": "passed",
                     "test_d_rank0_starved_after_posting_while_rank1_passes_and_votes": "passed"}
# The test build's waits are given up 50 ms after the vote instead of 2 s, so that 20 of them take a second.
FAST_GIVE_UP = {"MPI_COLLECTIVES_TEST_AFTER_VOTE_MS": "50"}


@once
@pytest.mark.parametrize("start", [None, "0x7ffffff8", "0xfffffff8"])
def test_collectives_given_up_again_and_again_are_all_settled(tmp_path, checked_package, start):
    """Issue 71's suspects 11 and 15, through the test build (UBSan and the hooks: tests/conftest.py). Rank 0
    catches 20 failed psums in a row (rank 1 failed the test first). The wrapper kept 16: the 17th waited
    in a call rank 1 never joins, and the job ended 43 s in, blaming a point-to-point wait (run on the old
    wrapper). Then, with the communicator's count started just below 2^31 and 2^32, the given-up calls'
    numbers cross both (rank 1 joins each by comparing counts: a plain `<` skipped the wrapped ones).
    Last, rank 0 sleeps 3 s right after entering a psum that rank 1 completes and votes on meanwhile
    (suspect 10: the first poll after it completes the call; the wait is not given up)."""
    folder = suite_dir(tmp_path, "test_given_up_suite.py")
    env = {"PYTHONPATH": checked_package, "GIVE_UPS": "20", "STARVE_MS": "3000" if start is None else "0",
           **FAST_GIVE_UP, **({"MPI_COLLECTIVES_TEST_SEQ_START": start} if start else {})}
    proc = launch(folder, 2, "test_given_up_suite.py", env=env, timeout=120)
    assert not any(report in proc.stdout + proc.stderr for report in ("runtime error:", "SUMMARY: Undefined")), \
        explain(proc)
    assert proc.returncode == 1 and outcomes(folder) == GIVEN_UP_OUTCOMES, explain(proc)
    one_report(proc)


@once
def test_past_64_given_up_collectives_the_job_ends_with_a_sentence(tmp_path, checked_package):
    folder = suite_dir(tmp_path, "test_given_up_suite.py")
    env = {"PYTHONPATH": checked_package, "GIVE_UPS": "70", **FAST_GIVE_UP}
    proc = launch(folder, 2, "test_given_up_suite.py", env=env, timeout=120)
    assert proc.returncode != 0, explain(proc)
    assert "64 collectives were given up in test_given_up_suite.py::test_b_rank1_fails_and_rank0_calls_again_" \
           "after_each_failure on this rank" in proc.stdout + proc.stderr, explain(proc)
    assert "Fix: let the test fail at the first failed collective" in proc.stdout + proc.stderr, explain(proc)


@once
def test_rank_0s_lookers_for_a_stuck_line_receive_it_once():
    """Issue 71's suspect 12, settled by a run: on the old code one of eight threads looking at once
    missed the line rank 1 sent (it probed after another had received it, before that one kept it),
    and two threads that both probed first left one receive posted over a buffer freed after."""
    from helpers import mpirun

    proc = mpirun(2, [PY, os.path.join(PROGRAMS, "stuck_receivers.py")],
                  env={"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}, timeout=120)
    assert proc.returncode == 0, explain(proc)
    assert "rank 0: 8 lookers, 8 found the line, 1 receives posted: ok" in proc.stdout, explain(proc)


@once
def test_xdist_under_a_launcher_is_refused_with_a_sentence_on_every_rank(tmp_path):
    """Issue 72: `mpiexec -n 2 python -m pytest -n 2`: each rank's xdist workers inherited the launcher's
    variables and died with "PMI_Init failed". pytest-xdist is in the test requirements for this test."""
    pytest.importorskip("xdist")
    folder = suite_dir(tmp_path, "test_given_up_suite.py")
    proc = launch(folder, 2, "-n", "2", "test_given_up_suite.py", timeout=60)
    assert proc.returncode == 4, explain(proc)  # pytest's usage error, on every rank
    assert (proc.stdout + proc.stderr).count("pytest-xdist's -n 2 starts worker processes that are not ranks of "
                                             "this MPI job") == 2, explain(proc)


@once
def test_xdist_from_the_suites_own_addopts_is_turned_off_with_a_line(tmp_path):
    """NetKet's ini holds `addopts = -n auto`: under the launcher it was refused, and NetKet's suite
    needed `-n 0` on the command line. A -n from the suite's settings, not the command line, is now
    turned off, rank 0 saying so once, and the suite runs."""
    pytest.importorskip("xdist")
    folder = suite_dir(tmp_path, "test_lazy_start_suite.py")
    (folder / "pytest.ini").write_text("[pytest]\naddopts = -n auto\n")
    proc = launch(folder, 2, "test_lazy_start_suite.py", timeout=120)
    assert proc.returncode == 1 and outcomes(folder)["test_3_jax_starts_in_this_test"] == "passed", explain(proc)
    assert len(outcomes(folder)) == 5, explain(proc)
    assert (proc.stdout + proc.stderr).count("the suite's settings ask pytest-xdist for -n auto (addopts); under the "
                                             "launcher every rank is already a process of the job, so it runs as "
                                             "-n 0") == 1, explain(proc)


@once
def test_a_test_for_rank_0_alone_runs_there_and_reports_its_outcome(tmp_path):
    """Issue 72: `skipif(rank > 0)` (mpi4py's and pytest-mpi's way of a rank-0 test) skipped the test on
    every rank, rank 0 included: it never ran. Now it runs where it was set up, and the ranks that
    skipped its setup vote on its call as skipped, so that every rank runs the same phases."""
    folder = suite_dir(tmp_path, "test_rank0_only_suite.py")
    proc = launch(folder, 2, "test_rank0_only_suite.py", timeout=120)
    assert proc.returncode == 1, explain(proc)
    assert outcomes(folder) == {"test_a_psum": "passed", "test_b_rank0_only_fails": "failed",
                                "test_c_rank0_only_passes": "passed", "test_d_on_the_other_ranks_alone": "passed",
                                "test_e_rank0_only_calls_a_collective_the_others_skipped": "skipped",
                                "test_f_psum_after": "passed"}, explain(proc)
    assert "rank 0's own failure" in proc.stdout, explain(proc)
    one_report(proc)


@once
def test_sigint_to_one_rank_during_a_vote_ends_the_job_with_a_line(tmp_path):
    """Issue 72: the peers waited in the vote for ever. Now rank 1 sends its line to rank 0, which ends
    the job with the report of the tests run so far (1.6 s after the signal here)."""
    import signal
    import subprocess

    folder = suite_dir(tmp_path, "test_sigint_suite.py")
    env = {k: v for k, v in os.environ.items() if k not in ("MPITRAMPOLINE_LIB", "JAX_CPU_COLLECTIVES_IMPLEMENTATION")}
    proc = subprocess.Popen([mpiexec_path(), "-n", "2", *pytest_args(folder, "test_sigint_suite.py")], cwd=str(folder),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        pid_file = folder / "rank1.pid"
        deadline = time.monotonic() + 90
        while not pid_file.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert pid_file.exists(), "rank 1 never wrote its pid"
        time.sleep(0.5)  # rank 1 in the vote on test_a, rank 0 still in it
        os.kill(int(pid_file.read_text()), signal.SIGINT)
        start = time.monotonic()
        out, _ = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:  # the whole launch, as run() ends one that passed its time
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert time.monotonic() - start < 15 and proc.returncode != 0, out
    assert "test_sigint_suite.py::test_a_rank0_slow was stopped: rank 1 was interrupted (SIGINT) while the ranks " \
           "voted on test_sigint_suite.py::test_a_rank0_slow" in out, out


@once
def test_a_suite_imports_jax_late_and_pays_for_it_there(tmp_path):
    """Issue 72 (3b): MPI starts with the plugin, JAX at the suite's first `import jax` (inside test_3
    here): the tests before it run without JAX in the process, rank 1's failure among them is the
    test's failure, and every psum after is exact. (What it saves is measured in the bench's
    pytest-cost figures, not here.)"""
    folder = suite_dir(tmp_path, "test_lazy_start_suite.py")
    proc = launch(folder, 2, "test_lazy_start_suite.py", timeout=120)
    assert proc.returncode == 1, explain(proc)
    assert outcomes(folder) == {"test_1_no_jax_yet": "passed", "test_2_rank1_fails_before_jax": "failed",
                                "test_3_jax_starts_in_this_test": "passed", "test_4_psums_after[1.0]": "passed",
                                "test_4_psums_after[3.0]": "passed"}, explain(proc)
    assert "rank 1's own failure, before JAX started" in proc.stdout, explain(proc)
    one_report(proc)


@once
def test_a_failed_jax_start_at_the_first_import_ends_the_job_with_a_sentence(tmp_path):
    """Bad input met at the late start: the ranks ask for different numbers of CPU devices (an
    environment that differs between the launcher's programs). Each rank says why and the job ends,
    rather than a half-imported jax failing every test after."""
    folder = suite_dir(tmp_path, "test_lazy_start_suite.py")
    args = pytest_args(folder, "test_lazy_start_suite.py")
    environment = {"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None, "JAX_NUM_CPU_DEVICES": None}
    proc = run([mpiexec_path(), "-n", "1", "-env", "JAX_NUM_CPU_DEVICES", "1", *args, ":",
                "-n", "1", "-env", "JAX_NUM_CPU_DEVICES", "2", *args], env=environment, timeout=120, cwd=str(folder))
    assert proc.returncode != 0, explain(proc)
    text = proc.stdout + proc.stderr
    assert "the pytest suite's first `import jax` starts JAX over MPI, and it failed: the ranks ask JAX for " \
           "different numbers of CPU devices per process (rank 0: 1, rank 1: 2)" in text, explain(proc)


@once
def test_jax_imported_on_one_rank_alone_ends_the_job_with_a_line(tmp_path):
    """The late start's limit (docs/testing.md): JAX's start is collective, so a rank that imports jax
    where the others do not waits in it; the job ends with the stuck line (12 s here), not a hang."""
    folder = suite_dir(tmp_path, "test_jax_on_one_rank_suite.py")
    proc = launch(folder, 2, "test_jax_on_one_rank_suite.py", timeout=90)
    assert proc.returncode != 0, explain(proc)
    assert "test_jax_on_one_rank_suite.py::test_a_jax_on_rank_0_alone cannot finish: rank 0 waits" in proc.stderr, \
        explain(proc)
    assert "which rank 1 has left" in proc.stderr, explain(proc)
    assert "rank 0 is inside JAX's start at the suite's first `import jax`, which every rank must reach" in \
        proc.stderr, explain(proc)



@once
def test_jax_looked_up_then_imported_in_a_thread_starts_over_every_rank(tmp_path):
    """Issue 80 (the fourth read's B1, B8): `importlib.util.find_spec("jax")` in a conftest, then the
    suite's first `import jax` in a test's worker thread: JAX runs over MPI on every rank and the global
    sum is exact. Before, the look-up disarmed the late start (1.0 where 3.0 is right at 2 ranks: each
    rank its own one-process JAX, no line), and the import in a thread raised ValueError."""
    folder = suite_dir(tmp_path, "jax_looked_up")
    proc = launch(folder, 2, "jax_looked_up", timeout=120)
    assert proc.returncode == 0, explain(proc)
    assert outcomes(folder) == {"test_a_jax_imported_first_in_a_thread": "passed",
                                "test_b_jax_runs_over_every_rank": "passed"}, explain(proc)


@once
@pytest.mark.parametrize("how, who", [("exit", 1), ("sigint", 1), ("exit", 0), ("internal", 1)])
def test_a_rank_that_leaves_pytests_loop_ends_the_job_with_its_line(tmp_path, how, who):
    """Issue 80 (the fourth read's B2): pytest.exit() or a KeyboardInterrupt on one rank inside a test.
    pytest ends that rank's loop without the stage's vote; the others waited for it for ever (it voted on
    the next phase's tag). Now it says once that it left, and every wait for it ends on that: one line
    naming the rank, the test and the reason, rank 0's report of the test before. Outside test that
    would have found it: any suite run with -x or a debugger's stop on one rank."""
    folder = suite_dir(tmp_path, "leave_suite")
    start = time.monotonic()
    proc = launch(folder, 2, "leave_suite", env={"LEAVE_HOW": how, "LEAVE_RANK": str(who)}, timeout=60)
    took = time.monotonic() - start
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and took < 30, (took, explain(proc))
    reason = {"sigint": "KeyboardInterrupt (SIGINT)", "exit": "pytest.exit('this rank is done')",
              "internal": "INTERNALERROR (RuntimeError: a hook's own error on this rank)"}[how]
    assert f"rank {who} left the suite in leave_suite/test_leave_suite.py::test_b_one_rank_leaves" in out, \
        explain(proc)
    assert reason in out, explain(proc)
    assert outcomes(folder).get("test_a_passes") == "passed", explain(proc)
    assert "test_c_never_reached" not in outcomes(folder), explain(proc)


@once
@pytest.mark.skipif(EXPECTED_FAMILY == "standard", reason="mpi4py has no standard-ABI build")
@pytest.mark.parametrize("case", ["first", "attribute"])
def test_a_rank_in_mpi4py_holding_pythons_lock_or_called_through_an_attribute_is_stuck(tmp_path, case):
    """Issue 80 (the fourth read's B4, B5): rank 1 fails before mpi4py's first lowercase allreduce, which
    holds Python's lock on rank 0 (its Python watcher cannot run: the native watchdog ends the job), and
    `self.comm.bcast(...)` (the receiver an attribute, as mpi4py's own suite calls): both hung silently.
    Outside test that would have found it: mpi4py's own test suite with a failure injected on one rank."""
    folder = suite_dir(tmp_path, "test_mpi4py_first_call_suite.py")
    start = time.monotonic()
    proc = launch(folder, 2, "--mpi-hold", "3", "test_mpi4py_first_call_suite.py", env={"FIRST_CALL_CASE": case},
                  timeout=90)
    took = time.monotonic() - start
    out = proc.stdout + proc.stderr
    # --mpi-hold 3: the line in both watchers' ways within 12 s (10 s holds: 12.8-14.7 s)
    assert proc.returncode != 0 and took < 12, (took, explain(proc))
    if case == "first":
        assert "test_mpi4py_first_call_suite.py::test_a_rank1_fails_before_the_first_allreduce cannot finish: rank " \
               "0 waits in a call that holds Python's lock, while every other rank ended the phase, for 3 s" in out, \
            explain(proc)
    else:
        assert re.search(r"test_c_rank1_fails_before_bcast cannot finish: rank 0 waits at "
                         r"test_mpi4py_first_call_suite.py:\d+ .*an mpi4py or mpi4jax call.* while rank 1 failed it "
                         r"\(AssertionError: rank 1 fails before its bcast", out), explain(proc)
        assert outcomes(folder) == {"test_a_rank1_fails_before_the_first_allreduce": "passed",
                                    "test_b_warm": "passed"}, explain(proc)


@once
@pytest.mark.skipif(EXPECTED_FAMILY == "standard", reason="mpi4py has no standard-ABI build")
def test_a_rank_waiting_for_a_peer_that_has_not_voted_is_not_stuck(tmp_path):
    """Issue 80 (the fourth read's B6): 3 ranks, rank 0 in comm.recv from rank 2, which computes 7 s
    (past the hold of 3 s, six holds short of 18) while rank 1 votes at once. A correct suite: it passes."""
    folder = suite_dir(tmp_path, "test_three_ranks_slow_peer_suite.py")
    proc = launch(folder, 3, "--mpi-hold", "3", "test_three_ranks_slow_peer_suite.py", timeout=120)
    assert proc.returncode == 0, explain(proc)
    assert outcomes(folder) == {"test_a_rank0_waits_for_a_slow_rank2": "passed", "test_b_after": "passed"}, \
        explain(proc)
    # the layout note speaks of JAX programs: a suite that never imports jax is not told it (issue 80)
    assert "mpi-collectives: note:" not in proc.stdout + proc.stderr, explain(proc)


@once
def test_a_conftest_that_imports_jax_on_one_rank_ends_the_job_with_a_line(tmp_path):
    """Issue 80 (the fourth read's B3): the rootdir's conftest imports jax on rank 0 alone, before
    pytest's session and before, any phase: rank 0 waited in JAX's collective start, nothing printed."""
    folder = suite_dir(tmp_path, "jax_one_rank_conftest")
    (folder / "pytest.ini").unlink()
    inner = folder / "jax_one_rank_conftest"
    (inner / "pytest.ini").write_text("[pytest]\n")
    environment = {"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}
    start = time.monotonic()
    proc = run([mpiexec_path(), "-n", "2", *pytest_args(inner, "--mpi-hold", "3")], env=environment, timeout=90,
               cwd=str(inner))
    took = time.monotonic() - start
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and took < 30, (took, explain(proc))  # 13.8 s with the default hold of 10 s
    assert "the suite's start (its conftests, before pytest's session) cannot finish: rank 0 waits" in out, \
        explain(proc)
    assert "rank 0 is inside JAX's start at the suite's first `import jax`, which every rank must reach" in out, \
        explain(proc)


@once
@pytest.mark.skipif(EXPECTED_FAMILY == "standard", reason="mpi4py has no standard-ABI build")
def test_sigterm_while_rank_0_waits_in_mpi4py_keeps_the_report(tmp_path):
    """Issue 80 (item 8): SIGTERM while rank 0's main thread waits in comm.recv: its Python handler cannot
    run there; the watcher thread writes the report of the five tests run and the junit file."""
    folder = suite_dir(tmp_path, "test_sigterm_in_mpi4py_suite.py")
    code, text = sigterm_once([mpiexec_path(), "-n", "2",
                               *pytest_args(folder, "-s", "test_sigterm_in_mpi4py_suite.py")],
                              lambda got: "".join(got).count("waiting until stopped") == 2,
                              env={"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None},
                              cwd=str(folder), timeout=120)
    assert code != 0, text
    assert "rank 0/2 stopped by SIGTERM in test_sigterm_in_mpi4py_suite.py::test_rank0_waits_in_recv_until_stopped;" \
           " the report of the tests run so far is above" in text, text
    assert "5 passed" in text, text
    assert outcomes(folder) == {f"test_passes[{i}]": "passed" for i in range(5)}, text


@once
@pytest.mark.skipif(EXPECTED_FAMILY == "standard", reason="mpi4py has no standard-ABI build")
def test_a_rank_0_test_first_to_use_a_collective_session_fixture_passes(tmp_path):
    """Issue 80 (the fourth read's B5, a regression of issue 72's rank-0 tests): the skipping ranks set
    the test's fixtures up with rank 0, so a session fixture's mpi4py collective is joined by all."""
    folder = suite_dir(tmp_path, "rank0_fixture")
    proc = launch(folder, 2, "rank0_fixture", timeout=90)
    assert proc.returncode == 0, explain(proc)
    assert outcomes(folder) == {"test_a_rank0_writes_a_summary": "passed", "test_b_every_rank": "passed"}, \
        explain(proc)

"""A pytest suite under a launcher, run as one job (mpi_collectives_pytest_plugin.py loads this).

What a person who runs `mpiexec -n 4 python -m pytest` expects of pytest:

- One outcome a test on every rank. After each stage of a test (setup,
  call, teardown) the ranks vote (mpi_collectives.services.phases): a stage
  that failed or was skipped on any rank has that outcome on every rank, its
  report holding each rank's own traceback under the rank's number. Rank 0
  prints the report; the others are quiet (--mpi-report-all); every rank
  exits with the same code; --junitxml is written by rank 0 alone, with
  every rank's failures.
- Never a wrong number across tests: each stage is a phase of the program;
  a collective of one never meets a collective of another. A rank waiting
  in a collective for a rank that already ended the stage gives the wait up,
  and the collective raises in that rank's test, naming the rank that left.
- Where a wait cannot be given up (a point-to-point transfer, a collective
  whose data already move), the job ends within seconds with one line
  naming the test, the rank that left and where the other waits; rank 0
  prints and writes the report of the tests already run first.
- --mpi-timeout SECONDS: a stage that runs longer on any rank fails on every
  rank, with where each rank was.
- The `mpi` marker's min_size, as pytest-mpi honours it, with or without it.
"""
import collections
import hashlib
import os
import signal
import sys
import threading
import time

import pytest

from .. import Info, InitializeError, initialize
from ..base import log
from ..base.ending import end_job
from ..integration.phases import phases as _process_phases
from ..services import exit_hooks
from ..services import phases as _phases

_HOOK_KEY = "mpi_collectives pytest plugin"
_STARTED = None  # this rank's rank and size: MPI's start (jax_setup.MpiStarted), or initialize()'s Info
_AFTER_JAX = []  # what the plugin redoes once JAX's part of the start has run (Plugin._report_on_sigterm)


def start(config) -> None:
    """MPI's start, once, before conftests and test modules import mpi4py.MPI or jax: the ranks meet
    and vote from here on. JAX's part (initialize(): jax.distributed joined, the backend, every
    device's communicator) runs at the suite's first `import jax` (a conftest, a test module, a test),
    on every rank at that same point, so that a suite that never imports JAX pays MPI's start alone
    (issue 72: pytest-mpi's own suite, with its 5 s limits, paid 1-10 s for JAX it never used); where
    JAX is imported already (by another plugin), at once. A suite that calls
    mpi_collectives.initialize() itself gets the same Info back; one that calls
    jax.distributed.initialize() itself finds it done (the call returns, as the package's cluster
    environment makes it)."""
    global _STARTED
    if _STARTED is not None:
        return
    from ..base import import_hooks
    from ..base import settings as _settings
    from ..base.ending import launch_ends_if_start_up_fails
    from ..integration import jax_setup

    try:
        if "jax" in sys.modules:
            _STARTED = _start_jax()
        else:
            with launch_ends_if_start_up_fails():
                _STARTED = jax_setup.start_mpi(_settings.read())
    except InitializeError as e:
        raise pytest.UsageError(str(e)) from None
    _begin_the_suites_start(config)
    if "jax" not in sys.modules:
        import_hooks.after_import("jax", _start_jax_at_import, key=_HOOK_KEY)


# The first phase: the conftests pytest loads before its session starts. Every rank votes on it at the
# session's start, so that a rank that waits alone in it (a conftest that imports jax on one rank
# only: JAX's start is collective) is seen by the watchers as any stage's wait is; before, no phase
# existed yet, and such a job hung with nothing printed (the fourth read's B3).
_LOADING = "the suite's start (its conftests, before pytest's session)"


def _begin_the_suites_start(config) -> None:
    phases = _process_phases(mpi_only=True)  # collective: every rank here at once
    phases.set_hold(_hold(config))
    phases.watch(lambda line: end_job(f"{phases.name} cannot finish: {line}"))
    phases.begin(_LOADING)
    exit_hooks.before_atexit(_leave_at_exit)


def _hold(config) -> float:
    try:
        return float(config.known_args_namespace.mpi_hold or 10.0)
    except (AttributeError, TypeError, ValueError):
        return 10.0


def _leave_at_exit() -> None:
    """A rank whose Python ends without pytest's session end (a conftest's sys.exit, a usage error on one
    rank, os._exit excepted): its peers are told, at the phase it was in."""
    from ..integration.phases import current

    phases = current()
    if phases is not None and not phases.closed:
        phases.leave(f"rank {phases.rank} left the suite in {phases.name or 'its start'}: its Python exited "
                     f"before the end of pytest's session")


def rank_size() -> tuple:
    """This rank's rank and the job's size, from MPI's start (no JAX)."""
    return _STARTED.rank, _STARTED.size


def _start_jax():
    """JAX's part of the start, on every rank at once. A rank that comes here alone (jax imported where
    the other ranks do not) waits for them: its stuck line says where it is."""
    from ..integration.phases import current

    phases = current()
    if phases is not None:
        phases.inside = "JAX's start at the suite's first `import jax`, which every rank must reach"
    try:
        _dispatch_in_the_test()
        info = initialize()
        _after_jax_started()
    finally:
        if phases is not None:
            phases.inside = ""
    return info


_FINISHED = False


def _after_jax_started() -> None:
    """The plugin's own steps once initialize() has run, once: where the suite called initialize()
    itself before its first `import jax` (a conftest), at the next stage's start, on every rank."""
    global _FINISHED, _STARTED
    if _FINISHED:
        return
    from ..integration import jax_setup
    from ..integration.phases import prepare_devices

    info = jax_setup.info()
    if info is None:
        return
    _FINISHED = True
    _STARTED = info
    _allow_jax_distributed_again(info)
    prepare_devices()
    _redo_after_jax()


_REDONE = False


def _redo_after_jax() -> None:
    """The plugin's handlers again, over those JAX's start installed. Python sets a signal handler from
    the main thread alone: where the suite's first `import jax` ran in a thread of its own (a test's
    worker; issue 80: it failed with "signal only works in main thread"), at the next stage's start."""
    global _REDONE
    if _REDONE or not _FINISHED or threading.current_thread() is not threading.main_thread():
        return
    _REDONE = True
    for redo in _AFTER_JAX:
        redo()


def _jax_started_where_imported() -> None:
    """At each stage's start, on the main thread: a `jax` in sys.modules that the plugin's start never
    saw (imported past every hook: a loader of another kind, a module put in sys.modules by hand) is
    started now, on every rank at once (every rank is at this stage's start), rather than leave each
    rank its own one-process JAX, where a global sum is the rank's own value (issue 80)."""
    from ..base import import_hooks
    from ..integration import jax_setup

    if _FINISHED or "jax" not in sys.modules or jax_setup.starting_here():
        return
    if import_hooks.armed(_HOOK_KEY) and jax_setup.info() is None:
        _start_jax()
    _after_jax_started()


def _start_jax_at_import(module) -> None:
    """Right after the suite's first `import jax` has run jax's own code. An error here is the same on
    every rank (the ranks' settings are compared at MPI's start): each rank ends the job with its
    sentence, since an exception would leave jax half imported. Where the import is initialize()'s own
    (a conftest that calls it), only the dispatch setting: initialize() goes on, the rest follows."""
    from ..integration import jax_setup

    if jax_setup.starting_here():
        _dispatch_in_the_test()
        return
    try:
        _start_jax()
    except InitializeError as e:
        end_job(f"the pytest suite's first `import jax` starts JAX over MPI, and it failed: "
                f"{str(e).removeprefix('mpi-collectives: ')}")


def _dispatch_in_the_test() -> None:
    """A test's collectives run in that test. JAX dispatches asynchronously: a test that calls a jitted
    psum 300 times and returns without waiting leaves XLA running them after the test ended, on one
    rank while another is already in the next test, and the ranks' phases then differ at one collective
    (NetKet's distributed tests stopped at test 20-22 of 48 so; issue 72). JAX's CPU client runs a
    process's computation inline where it is told to (jax_cpu_enable_async_dispatch, JAX 0.4.31 on: a
    computation on one local device per process); JAX_CPU_ENABLE_ASYNC_DISPATCH set leaves JAX's default. What stays
    asynchronous (several devices per process) is waited for at each stage's end (_wait_for_dispatched)."""
    if os.environ.get("JAX_CPU_ENABLE_ASYNC_DISPATCH"):  # the suite's own choice (JAX itself does not read it)
        return
    import jax  # (imported already, or by initialize() next)

    try:
        jax.config.update("jax_cpu_enable_async_dispatch", False)  # before the backend is made
    except Exception:  # a JAX before the flag (0.4.31)
        pass


def _wait_for_dispatched() -> None:
    """The computations a stage dispatched, run before its vote: every live array is waited for
    (cheap for those already computed). Nothing where JAX was never imported."""
    jax = sys.modules.get("jax")
    if jax is None or not hasattr(jax, "live_arrays"):
        return
    try:
        arrays = jax.live_arrays()
        jax.block_until_ready(arrays)
    except Exception:  # one deleted or donated meanwhile, or a computation failed: the others one by one
        for a in locals().get("arrays", []):
            try:
                a.block_until_ready()
            except Exception:  # the test's to say
                pass


def _allow_jax_distributed_again(info) -> None:
    """A suite written for JAX's own way calls jax.distributed.initialize() in a conftest or a
    fixture; the plugin joined the ranks already, so that call finds the job running, as it would
    have made it. Only calls that ask for this job (no arguments, or this job's own process count
    and id) return; others get JAX's own error."""
    import jax

    original = jax.distributed.initialize
    if getattr(original, "_mpi_collectives_plugin", False):
        return

    def initialize_once(*args, **kwargs):
        asked_size = kwargs.get("num_processes", args[1] if len(args) > 1 else None)
        asked_id = kwargs.get("process_id", args[2] if len(args) > 2 else None)
        if asked_size in (None, info.size) and asked_id in (None, info.rank):
            log.log("jax.distributed.initialize(): already joined by the pytest plugin", level=1)
            return None
        return original(*args, **kwargs)

    initialize_once._mpi_collectives_plugin = True
    jax.distributed.initialize = initialize_once


class Plugin:
    """The hooks, registered once per run on every rank (mpi_collectives_pytest_plugin.py)."""

    def __init__(self, config):
        start(config)
        self.config = config
        self.rank, self.size = _STARTED.rank, _STARTED.size
        self.phases = _process_phases(mpi_only=True)  # the process's phases: mpi_collectives.phase's too
        self.phases.watch(self._stuck)
        self.phases.on_tick = self._sigterm_from_the_watcher
        self._leaving = ""  # why this rank leaves pytest's loop (pytest.exit, KeyboardInterrupt, INTERNALERROR)
        self._left_line = ""  # the line this rank sent when it left
        self._failed_tests, self._tests_done = set(), 0  # rank 0: the tests so far (the native watchdog's words)
        self._last_failed = collections.deque(maxlen=5)
        self.timeout = float(config.getoption("mpi_timeout") or 0)
        self.report_all = bool(config.getoption("mpi_report_all"))
        self.has_pytest_mpi = config.pluginmanager.hasplugin("pytest_mpi")
        if self.has_pytest_mpi and hasattr(config.option, "with_mpi") and not getattr(config.option, "only_mpi", False):
            # Under a launcher of several ranks the suite runs with MPI: pytest-mpi would otherwise skip
            # every test marked `mpi` ("need --with-mpi option to run"). Not over --only-mpi, which
            # asks pytest-mpi to skip the tests without the mark, and which --with-mpi would override
            # (issue 72: pytest-mpi's own suite).
            config.option.with_mpi = True
        config.addinivalue_line("markers", "mpi(min_size=N): a test for N or more MPI ranks")
        if self.rank != 0:
            config.option.xmlpath = None  # rank 0 writes the one file, with every rank's failures
        self._stage = None
        self._setup_skipped = set()  # the ranks that skipped the current test's setup while others ran it
        self._left_to_others = None  # this rank's skip reason, where it is one of them
        self._report_on_sigterm()
        if not isinstance(_STARTED, Info):  # JAX's start, later, installs its own: this one again after it
            _AFTER_JAX.append(self._report_on_sigterm)

    # ---- SIGTERM: the report of the tests run so far is kept ----

    def _report_on_sigterm(self):
        """The launcher, scancel or a CI's time limit stops a suite with SIGTERM. The package's
        native handler ends a rank at once (stop_signals.c); under pytest it hands the signal to this
        Python handler first, which writes the report of the tests run so far (rank 0) and ends the
        rank; where the main thread does not get to it within 5 s (waiting in a collective), the
        native handler ends the rank with its line."""
        from ..base import mpi

        signal.signal(signal.SIGTERM, self._on_sigterm)
        mpi.stop_on_sigterm(self.rank, self.size)  # the native handler again, this one before it
        mpi.preemption_grace(self.rank, self.size, 5)
        where = f"rank {self.rank}/{self.size}"
        mpi.stop_grace_words(
            f"mpi-collectives: {where} was asked to stop (SIGTERM: the launcher, scancel or a time limit) "
            f"during a pytest suite; it writes what it must and ends within 5 s",
            f"mpi-collectives: {where} was asked to stop (SIGTERM) 5 s ago and its pytest session did not end "
            f"(its main thread waits in a collective); ending it now, without the report of this rank")

    _sigterm_taken = threading.Lock()

    def _on_sigterm(self, signum, frame):
        if not self._sigterm_taken.acquire(blocking=False):  # the other thread (main or watcher) ends it
            while True:
                time.sleep(1)
        stage = self._stage_name()
        if self.rank != 0:
            # Rank 0 writes the report; a rank that ends first makes the launcher end the others, rank 0
            # among them, before it has (its main thread may wait in C, where the watcher writes it within
            # a second: issue 80). Within the native handler's 5 s.
            time.sleep(2.5)
        if self.rank == 0 and self.phases.ending():
            try:
                self._write_report_so_far(None)
            except Exception as e:
                self._write(f"mpi-collectives: the report could not be written: {type(e).__name__}: {e}")
        self.phases.leave(f"rank {self.rank} was stopped by SIGTERM in {stage}")  # a rank killed alone: its peers
        log.line(f"mpi-collectives: rank {self.rank}/{self.size} stopped by SIGTERM in {stage}"
                 + (f"; the report of the tests run so far is above{self._junit_words()}" if self.rank == 0 else ""))
        # This rank said how it ends: its watcher process must not name it killed by SIGKILL or the
        # out-of-memory killer when it leaves through os._exit (issue 72).
        from ..base import mpi

        try:
            mpi.watch_self_quiet()
        except Exception:  # no watcher (MPI not started this far): nothing would speak
            pass
        os._exit(128 + signal.SIGTERM)

    # ---- rank 0 speaks ----

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session):
        config = session.config
        if self.rank != 0 and not self.report_all:
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter._tw._file = open(os.devnull, "w")  # the report is rank 0's, for every rank
        self._vote_or_leave(_phases.PASSED)
        self._share_given_basetemp(config)

    def _vote_or_leave(self, outcome, text=""):
        """A phase that pytest's own code fills (the start, collection): its vote; a peer that left ends
        the job here with its line."""
        try:
            return self.phases.end(outcome, text)
        except _phases.Stuck as e:
            self._stuck(str(e), left=isinstance(e, _phases.Left))

    def _share_given_basetemp(self, config):
        """`--basetemp DIR`, which every rank is given alike: pytest empties and makes DIR at its first
        temporary directory, and ranks that the plugin's start left in step did so at the same moment,
        one of them failing with FileExistsError (pytest-mpi's own mpi_tmp_path tests, 2 of 10 failed;
        without the plugin the ranks' skew hid it). Rank 0 makes it, the others use it once it is
        there; each rank's directories in it are its own (pytest's numbered names)."""
        factory = getattr(config, "_tmp_path_factory", None)
        given = getattr(factory, "_given_basetemp", None)
        if given is None or getattr(factory, "_basetemp", 1) is not None:
            return  # no --basetemp (each rank gets its own numbered one), or another pytest's factory
        self.phases.begin("pytest's --basetemp")
        failure = ""
        if self.rank == 0:
            try:
                factory.getbasetemp()
            except OSError as e:
                failure = f"{type(e).__name__}: {e}"
        vote = self._vote_or_leave(_phases.FAILED if failure else _phases.PASSED, failure)
        if vote.ranks(_phases.FAILED):
            raise pytest.UsageError(f"mpi-collectives: rank 0 could not make --basetemp {given}: {vote.texts[0]}")
        if self.rank != 0:
            given.mkdir(mode=0o700, parents=True, exist_ok=True)  # (a node that does not share rank 0's disk)
            factory._basetemp = given.resolve()

    @pytest.hookimpl(trylast=True)
    def pytest_report_header(self, config):
        return [f"mpi-collectives: {self.size} ranks (this is rank {self.rank}); outcomes agreed across ranks, "
                f"the report from rank 0"]

    # ---- the same tests everywhere ----

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session):
        """Collection is a phase: test modules and the folders' conftests are imported in it (one that
        imports jax on one rank only leaves that rank alone in JAX's collective start)."""
        self.phases.begin("collection")

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session):
        """Every rank must run the same tests in the same order: a rank-dependent collection (a
        test module that skips on some ranks at import, a rank-dependent parametrize) would pair
        each rank's tests with another's. Collection errors on one rank stop every rank."""
        _after_jax_started()
        ids = "\n".join(item.nodeid for item in session.items).encode()
        digest = hashlib.sha1(ids).hexdigest()
        if not self.phases.is_open():  # (a pytest that finishes collection without its pytest_collection hook)
            self.phases.begin("collection")
        failed = bool(session.testsfailed)
        vote = self._vote_or_leave(_phases.FAILED if failed else _phases.PASSED, f"{digest} {len(session.items)}")
        if vote is None:
            return
        bad = vote.ranks(_phases.FAILED)
        if bad:
            if not failed:
                session.testsfailed += 1  # pytest then stops after collection here too
            if self.rank == 0:
                self._write(f"mpi-collectives: collection failed on rank{'s' if len(bad) > 1 else ''} "
                            f"{', '.join(map(str, bad))} (that rank's errors are in its own output with "
                            f"--mpi-report-all); every rank stops")
            return
        seen = {text for text in vote.texts}
        if len(seen) > 1:
            counts = ", ".join(f"rank {r}: {text.split()[1]} tests" for r, text in enumerate(vote.texts))
            self.phases.close()  # every rank ends here, together: nobody leaves anyone waiting
            pytest.exit(f"mpi-collectives: the ranks collected different tests ({counts}), so each rank would "
                        f"run another test at the same time. Fix: collect the same tests on every rank (no "
                        f"rank-dependent parametrize, collect_ignore or skip at import; give every rank the "
                        f"same -k, -m and paths)", returncode=pytest.ExitCode.USAGE_ERROR)

    # ---- each stage of a test is a phase ----

    def _begin(self, item, when):
        _jax_started_where_imported()
        _after_jax_started()  # where the suite's own initialize() started JAX since
        _redo_after_jax()
        self.phases.begin(f"{item.nodeid} ({when})" if when != "call" else item.nodeid, self.timeout)
        self._stage = (item, when)
        if self.timeout > 0:
            # Half a second after the native layer's limit on a wait in a collective: a rank waiting
            # there gives up first and says where it waited; this stops a rank anywhere else.
            signal.signal(signal.SIGALRM, self._alarm)
            signal.setitimer(signal.ITIMER_REAL, self.timeout + 0.5)

    def _alarm(self, signum, frame):
        if self._stage is not None:
            item, when = self._stage
            pytest.fail(f"mpi-collectives: {item.nodeid} ({when}) ran longer than --mpi-timeout="
                        f"{self.timeout:g} s on rank {self.rank}; it was here when stopped", pytrace=True)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        skips_here = self._skip_marks_agreed(item)
        self._begin(item, "setup")
        if skips_here:
            # Its fixtures, set up here too, where the others set them up: a session fixture whose first
            # user this test is may make a collective (an mpi4py allgather) that every rank must join
            # (issue 80: a skipif(rank > 0) test first to use such a fixture ended the job as stuck).
            # pytest's skip mark then skips it here, as before.
            item.session._setupstate.setup(item)
        for mark in item.iter_markers(name="mpi"):
            min_size = mark.kwargs.get("min_size")
            if min_size is not None and self.size < min_size and not self._pytest_mpi_decides(item):
                pytest.skip(f"needs {min_size} MPI ranks, the job has {self.size}")

    def _skip_marks_agreed(self, item) -> bool:
        """For a test with skipif marks (the same on every rank: collections agree): does this rank skip it
        by its marks while another rank runs it? The ranks vote on it first, a phase of its own (tests
        without skipif marks pay nothing)."""
        if next(item.iter_markers(name="skipif"), None) is None:
            return False
        try:
            from _pytest.skipping import evaluate_skip_marks

            skip = evaluate_skip_marks(item) is not None
        except Exception:  # a condition that raises: pytest's own evaluation reports it in the setup
            skip = False
        self.phases.begin(f"{item.nodeid} (its skipif marks)")
        vote = self._vote_or_leave(_phases.SKIPPED if skip else _phases.PASSED)
        return bool(skip and vote is not None and len(vote.ranks(_phases.SKIPPED)) < self.size)

    def _pytest_mpi_decides(self, item) -> bool:
        return self.has_pytest_mpi and bool(item.config.getoption("--with-mpi", default=False))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item):
        self._begin(item, "call")
        if self._left_to_others is not None:  # a test this rank skipped in setup, the others run: not here
            item.runtest = _runs_elsewhere

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item, nextitem):
        self._begin(item, "teardown")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        if self.timeout > 0:
            signal.setitimer(signal.ITIMER_REAL, 0)
        self._stage = None
        _wait_for_dispatched()  # before the vote: the stage's collectives are the stage's
        outcome = yield
        report = outcome.get_result()
        try:
            self._agree(item, report)
        except _phases.Stuck as e:
            self._stuck(str(e), report=report, left=isinstance(e, _phases.Left))
        if self.rank == 0:
            self._note_progress(item, report)

    def _agree(self, item, report):
        mine = _phases.FAILED if report.failed else _phases.SKIPPED if report.skipped else _phases.PASSED
        text = ""
        if report.failed:
            text = _failure_text(report) or "failed"
        elif report.skipped:
            text = ("xfail: " + report.wasxfail) if hasattr(report, "wasxfail") else _skip_reason(report)
        if report.when == "call" and self._left_to_others is not None:  # its vote: skipped, the outcome theirs
            mine, text, self._left_to_others = _phases.SKIPPED, self._left_to_others, None
            item.__dict__.pop("runtest", None)
        vote = self.phases.end(mine, text)
        failed = vote.ranks(_phases.FAILED)
        if report.when == "setup":
            # A test some ranks skip in setup (`skipif(rank > 0)`: rank 0's alone, as mpi4py and pytest-mpi
            # suites write them) runs on the others, and its outcome is theirs, on every rank: a rank
            # that skipped it goes on to its call, runs nothing there and votes skipped, then takes the
            # others' outcome. It was skipped everywhere, and never ran (issue 72).
            skipped = vote.ranks(_phases.SKIPPED)
            self._setup_skipped = set(skipped) if not failed and len(skipped) < self.size else set()
            if self._setup_skipped:
                if mine == _phases.SKIPPED:
                    self._left_to_others = f"skipped in its setup here: {text}"
                    report.outcome, report.longrepr = "passed", None
                    if hasattr(report, "wasxfail"):
                        del report.wasxfail
                return
        # A rank whose failure is a wait it gave up failed because another rank left: that rank's
        # outcome is the test's (a skip on one rank is a skip; a failure, the failure).
        caused = [r for r in failed if vote.given[r]]
        cleared = bool(caused and len(caused) == len(failed) and vote.ranks(_phases.SKIPPED))
        if cleared:
            failed = []
        if failed:
            if mine != _phases.FAILED or len(failed) < self.size or len(set(vote.texts)) > 1:
                report.longrepr = _failures(report.when, vote, failed)
            report.outcome = "failed"
            if hasattr(report, "wasxfail"):
                del report.wasxfail
            return
        skipped = vote.ranks(_phases.SKIPPED)
        if report.when == "call" and not cleared:  # ranks that left a test to others do not skip it here
            skipped = [r for r in skipped if r not in self._setup_skipped]
        if skipped and not report.skipped:
            if hasattr(report, "wasxfail"):
                del report.wasxfail
            first = skipped[0]
            reason = vote.texts[first]
            report.outcome = "skipped"
            if reason.startswith("xfail: "):
                report.wasxfail = reason[len("xfail: "):]
                report.longrepr = None
            else:
                path, line = str(item.path), (item.location[1] or 0) + 1
                report.longrepr = (path, line, f"{reason} (skipped on rank{'s' if len(skipped) > 1 else ''} "
                                               f"{', '.join(map(str, skipped))})")

    # ---- one exit status; every way out of pytest's loop ends in a vote or in leave() ----

    def pytest_keyboard_interrupt(self, excinfo):
        """KeyboardInterrupt (SIGINT to this rank: kill -INT, an IDE's stop, Ctrl-C) or pytest.exit() on
        this rank: pytest ends its loop without this stage's vote (its runner re-raises both)."""
        value = excinfo.value
        if isinstance(value, KeyboardInterrupt):
            self._leaving = "KeyboardInterrupt (SIGINT)"
        else:
            self._leaving = f"pytest.exit({str(getattr(value, 'msg', value))[:200]!r})"

    def pytest_internalerror(self, excrepr, excinfo):
        last = str(excrepr).strip().splitlines()[-1:] or ["?"]
        self._leaving = f"INTERNALERROR ({last[0].lstrip('E ').strip()[:200]})"

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.phases.closed:  # every rank ended together (the ranks collected different tests)
            return
        if self._leaving or self.phases.is_open():
            self._leave(self._leaving or f"pytest's session ended with exit status {int(exitstatus)} before the "
                                         f"stage was voted")
            return
        try:
            self.phases.begin("end of the session")
            vote = self.phases.end(int(exitstatus))
            session.exitstatus = max(o for o in vote.outcomes)
            self.phases.close()
        except _phases.Stuck as e:
            self._stuck(str(e), left=isinstance(e, _phases.Left))

    def _leave(self, why):
        """This rank leaves pytest's loop without voting the stage: every other rank is told (their waits
        end on it: services/phases.py's invariant). Rank 0 goes on to print its report, and ends the job
        once it is written (pytest_unconfigure); another rank gives rank 0 10 s to do so, then ends it."""
        self._left_line = self.phases.leave(f"rank {self.rank} left the suite in {self._stage_name()}: {why}")
        if not self._left_line or self.rank == 0:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.1)
        end_job(f"{self._left_line}; rank 0 did not end the job within 10 s")

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        if self.rank == 0 and self._left_line:
            end_job(f"{self._left_line}. The report of the tests run so far is above{self._junit_words()}")

    def _note_progress(self, item, report):
        """Rank 0, after each stage's agreed outcome: the tests so far, for the native watchdog's line where
        this rank's report cannot be written (its main thread holding Python's lock). A test counts as
        failed where any of its stages failed; the words go to the native layer once a test is done."""
        if report.failed and item.nodeid not in self._failed_tests:
            self._failed_tests.add(item.nodeid)
            self._last_failed.append(item.nodeid)
        if report.when != "teardown":
            return
        self._tests_done += 1
        failed = len(self._failed_tests)
        words = f"{self._tests_done - failed} passed or skipped, {failed} failed"
        if failed:
            words += " (" + ", ".join(self._last_failed) + ")"
        try:
            from ..base import mpi

            mpi.phases_progress(words)
        except Exception:  # (words only)
            pass

    def _sigterm_from_the_watcher(self):
        """SIGTERM while the main thread waits in C (an mpi4py call): its Python handler cannot run until
        the call returns, and the native handler ended the rank after 5 s without the report (the fourth
        read: 14 finished tests lost). The watcher thread writes it instead, within a second of the signal."""
        from ..base import mpi

        if not mpi.stop_asked():
            self._stop_seen = None
            return
        seen = getattr(self, "_stop_seen", None)
        if seen is None:
            self._stop_seen = time.monotonic()
        elif time.monotonic() - seen > 0.3:
            self._on_sigterm(signal.SIGTERM, None)

    # ---- a wait nothing can give up: end the job, the report kept ----

    def _stuck(self, line, report=None, left=False):
        if not self.phases.ending():  # the first caller (main thread or watcher) ends the job
            return
        left = left or line == self.phases.peer_left()
        stage = self._stage_name()
        if self.rank != 0:
            # Rank 0 ends the job with its report: it has the same LEFT line, or this rank's stuck line
            # (the watcher sent it), and hears of it at its next look. 10 s, then this rank ends it.
            self._wait_for_rank_0(10)
        else:
            try:
                self._write_report_so_far(report)
            except Exception as e:  # the job must still end, with its line
                self._write(f"mpi-collectives: the report could not be written: {type(e).__name__}: {e}")
        if left:
            end_job(f"{line}; {stage} cannot finish without it. The report of the tests run so far is above"
                    f"{self._junit_words()}")
        if _phases.INTERRUPTED in line:
            end_job(f"{stage} was stopped: {line}. The report of the tests run so far is above"
                    f"{self._junit_words()}. (SIGINT to one rank ends the whole job: the others wait for its votes)")
        end_job(f"{stage} cannot finish: {line}, a wait that cannot be given up. "
                f"The report of the tests run so far is above{self._junit_words()}. Fix: make every rank reach "
                f"the same point-to-point transfers and MPI calls (ppermute, all_to_all, mpi4py's and mpi4jax's) "
                f"in each test, or fail the test on every rank (the test's report names each rank's failure)")

    @staticmethod
    def _wait_for_rank_0(seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.1)

    def _stage_name(self) -> str:
        return self.phases.name or "the test"

    def _junit_words(self) -> str:
        path = getattr(self.config.option, "xmlpath", None)
        return f" and in {path}" if path and self.rank == 0 else ""

    def _write_report_so_far(self, report):
        """Rank 0: the summary and --junitxml of the tests run so far, written now (the job ends next),
        with pytest's capture of the test under way suspended, so that it reaches the terminal."""
        import contextlib

        capture = self.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            self._write_report_now(report)

    def _write_report_now(self, report):
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if report is not None:
            self.config.hook.pytest_runtest_logreport(report=report)
        if reporter is not None:
            reporter.summary_failures()
            reporter.summary_errors()
            reporter.summary_warnings()
            reporter.summary_stats()
        from _pytest.junitxml import xml_key
        xml = self.config.stash.get(xml_key, None)
        if xml is not None:
            # The test under way: kept where it has a failure to say (the stuck test's own), else left out
            # (pytest writes a test's entry once its teardown is reported, which will not come now).
            for key, reporter in list(xml.node_reporters.items()):
                xml.node_reporters.pop(key)
                if getattr(reporter, "nodes", None):
                    reporter.finalize()
                elif reporter in xml.node_reporters_ordered:
                    xml.node_reporters_ordered.remove(reporter)
            xml.pytest_sessionfinish()

    def _write(self, text):
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(text)
        else:
            log.line(text)


def _failure_text(report) -> str:
    """The failure as pytest prints it. Not report.longreprtext, which strips the text and so took the
    indentation off the first line of every rank's traceback in the report (issue 72)."""
    try:
        import io

        from _pytest._io import TerminalWriter

        out = io.StringIO()
        writer = TerminalWriter(out)
        writer.hasmarkup = False
        report.toterminal(writer)
        return out.getvalue().strip("\n").rstrip()
    except Exception:  # another pytest's internals: its own text
        return report.longreprtext


def _runs_elsewhere():
    """The call of a test this rank skipped in its setup while other ranks run it (Plugin._agree)."""


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "skipped")


def _crash_line(text: str) -> str:
    """The exception's line of a failure's text (pytest's `E   ` lines), for the summary."""
    lines = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    for line in lines:
        if line and not line.startswith(("+", "where")):
            return line[:200]
    return (text.strip().splitlines() or ["failed"])[-1][:200]


def _failures(when: str, vote, failed: list) -> str:
    """Each failing rank's own report under its number; ranks with the same text once."""
    groups = {}
    for r in failed:
        groups.setdefault(vote.texts[r], []).append(r)
    stage = {"setup": "its setup", "teardown": "its teardown"}.get(when, "the test")
    first = next((r for r in failed if not vote.given[r]), failed[0])
    head = (f"rank {first}: {_crash_line(vote.texts[first])} -- mpi-collectives: {stage} failed on "
            f"rank{'s' if len(failed) > 1 else ''} {', '.join(map(str, failed))} of {len(vote.outcomes)}")
    others = [r for r, o in enumerate(vote.outcomes) if o != _phases.FAILED]
    if others:
        head += (f" (and so fails on every rank; rank{'s' if len(others) > 1 else ''} "
                 f"{', '.join(map(str, others))} did not fail it)")
    caused = [r for r in failed if vote.given[r]]
    if caused and len(caused) < len(failed):
        head += (f"; rank{'s' if len(caused) > 1 else ''} {', '.join(map(str, caused))} failed in a collective, "
                 f"waiting for a rank that was not in it")
    parts = [head]
    for text, ranks in sorted(groups.items(), key=lambda group: (bool(vote.given[group[1][0]]), group[1])):
        parts.append(f"{'_' * 20} rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))} {'_' * 20}")
        parts.append(text)
    return "\n".join(parts)


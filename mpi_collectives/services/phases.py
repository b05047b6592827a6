"""Phases of a program: the ranks end each phase together, with one outcome.

A phase is a stretch of a program that every rank runs (a test of a pytest
suite is three: its setup, its call and its teardown; `mpi_collectives.phase`
marks a program's own). While phases are on, the native layer stamps every
collective's check block with the phase, and a rank waiting in a collective
gives the wait up when a member of its communicator has already ended the
phase (native/src/services/phases.h): the wait returns an MPI error, which
XLA raises as an exception in that rank's phase.

At the end of a phase every rank votes: its outcome (passed, skipped,
failed), the text that goes with it, and the waits it gave up. The votes are
messages on a communicator of the phases' own (never XLA's), sent to every
rank, so that a rank waiting in a collective sees a member's vote arrive
(an MPI_Iprobe in its wait) and gives up. Once every vote is in, the waits
given up are settled (every member that did not give one up joins it), and
the next phase starts on whole communicators: a collective of one phase
never meets a collective of another.

A wait that cannot be given up (a collective's data, once every rank had
agreed on it; a point-to-point transfer) is `stuck`: the rank sees it and
tells rank 0 (a `stuck` message), which ends the job with the line after
the caller has kept what it must (the pytest plugin's report).

THE INVARIANT (issue 80), kept here and nowhere else: every rank either votes
every phase, or says once that it left (leave(): at which phase, why). Every
vote travels on one tag and carries its phase's number, so the next vote a
rank receives from a peer is that peer's vote on this phase, its word that it
left, or a number that differs, which is named; a wait never waits on a tag
the peer will not use. Every way out of a program ends in leave() (the pytest
plugin: pytest.exit, KeyboardInterrupt, an INTERNALERROR, SIGTERM; a program
that leaves through atexit), and every wait ends on a peer's word that it
left: a vote (at once), a collective of the package's (the native layer sees
the vote arrive and gives the wait up), the watchers below (at once).

Stuck, decided in one place (_where_stuck), by the Python watcher while it can
run and by the native watchdog (native/src/services/phases_watchdog.c) while
the main thread holds Python's lock in C (mpi4py's first lowercase collective
on a communicator does): a rank is stuck when a peer left; when every other
rank has voted the phase (nobody can still send to it) and its main thread
has waited on one line for the hold (`hold`, 10 s; a wait not seen to be a
call into MPI, 6 holds: a rank computing alone in one long C call is slow,
not stuck); or past the phase's time limit. A rank that waits while some
peer has not voted is never stuck: that peer may still send to it.
"""
import os
import sys
import threading
import time

import numpy as np

from ..base import mpi
from . import exit_hooks

# The header each rank sends every other rank when it ends a phase: the phase, the outcome, the
# length of its text, how many waits it gave up, and those (kind, id, sequence) triples.
_GIVEN_MAX = 64  # as the wrapper's MPIC_GIVEN_MAX (native/src/services/phases.c): past it the job ends
_HEADER = 4 + 3 * _GIVEN_MAX
# Tags (native/src/services/phases_watchdog.h has the same): the votes' own is mpi.phase_tag().
TEXT_TAG = 30001   # the outcome's text, after the header
STUCK_TAG = 30002  # a rank stuck in a wait that cannot be given up, to rank 0
LEFT_TAG = 30003   # a rank's line saying it left, to every rank (beside its LEFT vote)
LINE_MAX = 511     # a STUCK or LEFT line's bytes (the receivers' buffers are 512)

PASSED, SKIPPED, FAILED, LEFT = 0, 1, 2, 3


class Vote:
    """Every rank's vote on one phase: outcome, text, and waits given up (per rank)."""

    def __init__(self, outcomes, texts, given):
        self.outcomes, self.texts, self.given = outcomes, texts, given

    def ranks(self, outcome: int) -> list:
        return [r for r, o in enumerate(self.outcomes) if o == outcome]


class Stuck(Exception):
    """A rank waits where no wait can be given up; its words are the message."""


class Left(Stuck):
    """A rank left the program (its words are the message); no wait for it can end."""


# A rank interrupted (SIGINT) alone while the ranks vote: the words its line carries to rank 0.
INTERRUPTED = "was interrupted (SIGINT) while the ranks voted on"


class Phases:
    """The phases of this process: start() once on every rank, then begin() and end() each phase."""

    def __init__(self, rank: int, size: int, hold: float = 10.0):
        self.rank, self.size = rank, size
        self.hold = float(hold) if hold and hold > 0 else 10.0
        self.comm = mpi.phases_start()  # collective: every rank at once
        self.left = ""  # this rank's line once it left (leave()): it votes no more
        self.closed = False  # the last phase voted (close()): leaving then is ending
        self._open = False  # a phase begun and not yet voted
        self._receiving_votes = False  # the main thread receives votes: the watcher receives none
        self._kept = []  # sends and receives whose buffers must outlive this call
        mpi.phases_watchdog(rank, size, self.hold)
        self.number = 0
        self.name = ""
        self.inside = ""  # what this rank's main thread is inside, said with its stuck line (the pytest plugin's JAX start)
        self._watch = None
        self._stuck_line = None
        self._voting = False
        self._on_stuck = None
        self.on_tick = None  # called by the watcher at each look (the pytest plugin: SIGTERM's report)
        self._ending = False
        self._stop = threading.Event()
        # Before every atexit handler, JAX's MPI_Finalize among them: the watcher calls MPI, and a call
        # after MPI_Finalize ends the process (MPICH aborts). Not atexit's own order: the pytest
        # plugin makes the phases before JAX starts (at the suite's first `import jax`), so JAX's
        # handler, registered later, would run first ("internal_Iprobe ... after finalizing MPICH").
        exit_hooks.before_atexit(self.stop)
        self._lock = threading.Lock()
        self._receiving = threading.Lock()  # one receive of a stuck line at a time (_received_stuck)
        self._stuck_buffers = []  # their buffers, kept while a receive may be posted
        self._begun_at, self._timeout = time.monotonic(), 0.0  # the phase's start and --mpi-timeout
        self._main_at = (None, 0.0, None)  # the main thread's place, since when, whether it calls into MPI
        self._outside = None  # (ranks that ended the phase, its tag) while this rank waits outside
        self._taken = {}  # rank: (header, text) of votes the watcher received (_how_ended)
        self._left_seen = ""  # a peer's LEFT line, once received (_left_line)
        self._taking = threading.Lock()

    def begin(self, name: str, timeout: float = 0) -> int:
        """The next phase (numbered alike on every rank: every rank begins the same phases)."""
        if self.left:
            raise Left(self.left)
        self.number += 1
        self.name = name
        self._open = True
        self._begun_at, self._timeout = time.monotonic(), float(timeout or 0)
        mpi.phase_enter(self.number, name, timeout)
        return self.number

    def end(self, outcome: int, text: str = "", on_wait=None) -> Vote:
        """Vote on the current phase and settle what was given up; returns every rank's vote.
        `on_wait(seconds)` is called while the votes are not all in (at most every 0.2 s).
        Raises Stuck when a rank waits where nothing can be given up."""
        if self.left:
            raise Left(self.left)
        self._voting = True
        try:
            return self._end(outcome, text, on_wait)
        except KeyboardInterrupt:
            raise Stuck(self._interrupted()) from None
        finally:
            self._voting = False
            self._open = False

    def set_hold(self, seconds: float) -> None:
        """The hold (module docstring), here and in the native watchdog."""
        if seconds and seconds > 0:
            self.hold = float(seconds)
            mpi.phases_watchdog(self.rank, self.size, self.hold)

    def is_open(self) -> bool:
        """A phase begun and not voted: leaving now leaves the peers waiting on this rank's vote."""
        return self._open

    def close(self) -> None:
        """The last phase has been voted on every rank: from now on this rank votes no more, and
        leaving is no news to anyone."""
        self.closed = True

    def leave(self, why: str) -> str:
        """This rank leaves the program: every other rank is told once, with `why` (at which phase
        and why, in the caller's words), and no wait of theirs for this rank lasts. Returns the line
        sent ("" where there was nobody to tell: a job of one rank, the last phase voted, told before).
        The vote on the current phase is a LEFT vote (received where the peers vote), its text the
        line; the same line goes on LEFT_TAG to every rank, for their watchers (a peer in a test, not
        a vote). Safe from a signal handler's Python code on the main thread."""
        if self.left or self.closed or self.size == 1:
            return ""
        line = why.encode(errors="replace")[:LINE_MAX].decode(errors="ignore")
        self.left = line
        data = np.frombuffer(line.encode(), np.uint8)
        header = np.zeros(_HEADER, np.int64)
        header[:4] = (self.number, LEFT, len(data), 0)
        notice = np.zeros(LINE_MAX + 1, np.uint8)
        notice[:len(data)] = data
        tag = mpi.phase_tag(self.number)
        requests = []
        try:
            for r in range(self.size):
                if r != self.rank:
                    requests += [mpi.isend(header, r, tag, self.comm), mpi.isend(data, r, TEXT_TAG, self.comm),
                                 mpi.isend(notice, r, LEFT_TAG, self.comm)]
            self._kept += requests  # eager messages: complete at once; kept if not (a peer already gone)
            mpi.wait_all(requests, 2.0)
        except Exception:  # MPI finalized or failing: the peer watch and the launcher are left to say it
            pass
        return line

    def _interrupted(self) -> str:
        """SIGINT to one rank during a vote (kill -INT; Ctrl-C at the launcher reaches every rank): its
        peers would wait in the vote for ever (issue 72: a teardown error with an empty traceback, then a
        hang). The line goes to rank 0, which ends the job with the report of the tests run so far (in its
        own vote, or its watcher); this rank ends the job itself if that has not happened in 10 s."""
        line = f"rank {self.rank} {INTERRUPTED} {self.name}"
        line = line.encode(errors="replace")[:LINE_MAX].decode(errors="ignore")  # rank 0's buffer holds 512 bytes
        if self.rank != 0:
            with self._lock:
                self._stuck_line = line
            self._sent = np.frombuffer(line.encode(errors="replace"), np.uint8)  # kept until sent
            mpi.isend(self._sent, 0, STUCK_TAG, self.comm)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                time.sleep(0.1)
        return line

    def _end(self, outcome, text, on_wait) -> Vote:
        tag = mpi.phase_tag(self.number)
        given = mpi.phase_given_up(_GIVEN_MAX)
        data = text.encode(errors="replace") if text else b""
        header = np.zeros(_HEADER, np.int64)
        header[:4] = (self.number, outcome, len(data), len(given))
        for i, triple in enumerate(given):
            header[4 + 3 * i: 7 + 3 * i] = triple
        others = [r for r in range(self.size) if r != self.rank]
        with self._taking:  # votes the watcher already received (_how_ended), this phase's; it takes no more
            self._receiving_votes = True
            taken, self._taken = self._taken, {}
        try:
            return self._votes(tag, header, data, text, given, others, taken, on_wait)
        finally:
            with self._taking:
                self._receiving_votes = False

    def _votes(self, tag, header, data, text, given, others, taken, on_wait) -> Vote:
        # This rank's header and text to every rank at once: a peer's watcher may read both while this
        # rank waits here (the stuck line then says how this rank ended the phase).
        payload = np.frombuffer(data, np.uint8) if data else None
        sends = [mpi.isend(header, r, tag, self.comm) for r in others]
        if payload is not None:
            sends += [mpi.isend(payload, r, TEXT_TAG, self.comm) for r in others]
        self._kept = sends  # until this vote's end
        headers = {r: taken[r][0] if r in taken else np.zeros(_HEADER, np.int64) for r in others}
        receives = {r: mpi.irecv(headers[r], r, tag, self.comm) for r in others if r not in taken}
        self._wait(list(receives.values()), on_wait,
                   until=lambda: self._left_among(headers, receives))
        texts = {self.rank: text}
        buffers = {r: np.zeros(int(headers[r][2]), np.uint8) for r in others if headers[r][2] > 0}
        for r in taken:
            if r in buffers and len(taken[r][1]) == len(buffers[r]):
                buffers[r] = taken[r][1]
        left = self._left_among(headers, receives)
        if left:  # its text is its line
            r = left[0]
            line = np.zeros(max(int(headers[r][2]), 1), np.uint8)
            self._kept.append(mpi.irecv(line, r, TEXT_TAG, self.comm))
            mpi.wait_all(self._kept[-1:], 2.0)
            raise Left(bytes(line).rstrip(b"\0").decode(errors="replace") or f"rank {r} left the job")
        if any(int(h[0]) != self.number for h in headers.values()):
            bad = [r for r in others if int(headers[r][0]) != self.number]
            raise Stuck(f"rank {bad[0]} voted on phase {int(headers[bad[0]][0])} where rank {self.rank} is in "
                        f"phase {self.number} ({self.name}): the ranks do not run the same phases")
        requests = [mpi.irecv(buffers[r], r, TEXT_TAG, self.comm) for r in buffers
                    if not (r in taken and buffers[r] is taken[r][1])]
        self._wait(requests + sends, on_wait)
        for r in others:
            texts[r] = bytes(buffers[r]).decode(errors="replace") if r in buffers else ""
        outcomes, given_by = [], []
        for r in range(self.size):
            h = header if r == self.rank else headers[r]
            outcomes.append(int(h[1]))
            given_by.append([tuple(int(v) for v in h[4 + 3 * i: 7 + 3 * i]) for i in range(int(h[3]))])
        triples = sorted({t for g in given_by for t in g})
        if triples and mpi.phase_settle(triples, 30.0) != 0:
            raise Stuck(f"the waits given up in {self.name} could not be settled within 30 s "
                        f"({len(triples)} of them, on communicators {sorted({t[1] for t in triples})})")
        return Vote(outcomes, [texts[r] for r in range(self.size)], given_by)

    @staticmethod
    def _left_among(headers, receives) -> list:
        """The ranks whose vote, received, says they left."""
        return [r for r, h in headers.items() if int(h[1]) == LEFT and (r not in receives or mpi.test(receives[r][0]))]

    def _wait(self, requests, on_wait, until=None):
        """Polls the requests; between polls, a stuck rank's line ends the wait (Stuck), and `until()`
        true ends it (a peer's vote says it left)."""
        start = last = time.monotonic()
        pending = list(range(len(requests)))
        delay = 0.0
        while pending:
            pending = [i for i in pending if not mpi.test(requests[i][0])]
            if not pending:
                return
            now = time.monotonic()
            if now - last >= 0.2:
                last = now
                if until is not None and until():
                    return
                line = self.stuck_line()
                if line:
                    raise Stuck(line)
                if on_wait:
                    on_wait(now - start)
            if now - start < 0.002:  # the first 2 ms polled, yielding the core: a phase's votes come together,
                os.sched_yield()  # and where ranks outnumber cores the rank still voting needs it
            else:
                delay = min(0.002, delay + 0.00005)  # a long wait (a rank still in its test) costs no CPU
                time.sleep(delay)

    # ---- stuck waits: a thread that looks each 0.5 s ----

    def watch(self, on_stuck):
        """Start the thread that sees this rank stuck (two looks in a row). A stuck rank tells rank 0;
        rank 0 calls on_stuck(line) from the thread where its main thread cannot (it is not in a
        vote: stuck itself), and must end the job there. A rank that told rank 0 and is still
        stuck 30 s later ends the job itself with on_stuck."""
        self._on_stuck = on_stuck
        if self._watch is None:
            self._watch = threading.Thread(target=self._run, name="mpi-collectives-phases", daemon=True)
            self._watch.start()

    def _run(self):
        first_seen, told = {}, False
        self._main_at = (None, 0.0, None)
        while not self._stop.wait(0.5):
            if self._ending:
                return
            try:
                if self.on_tick is not None:
                    self.on_tick()
                mpi.phases_beat(self._voting)  # the native watchdog decides while this thread cannot
                where, at_once = self._where_stuck(time.monotonic())
            except Exception:
                return  # MPI finalized: nothing to watch
            now = time.monotonic()
            if not where:
                first_seen, told = {}, False
                continue
            since = first_seen.setdefault(where, now)
            if not told and (at_once or now - since >= self.hold):
                told = True
                line = where if at_once else f"{where} ({self.name}), for {now - since:.0f} s since it left"
                if self._outside and not at_once:  # which outcome they voted
                    ended, tag = self._outside
                    with self._taking:
                        how = self._how_ended(ended, tag)
                    line = f"{where.rsplit(' while ', 1)[0]} while {how} ({self.name}), for {now - since:.0f} s"
                if self.inside and at_once is not True:
                    line += f"; rank {self.rank} is inside {self.inside}"
                line = line.encode(errors="replace")[:LINE_MAX].decode(errors="ignore")
                with self._lock:
                    self._stuck_line = line
                if self.rank == 0 or at_once == "left":
                    if not self._voting:  # the main thread waits in the program: this thread ends the job
                        self._on_stuck(line)
                else:
                    self._sent = np.frombuffer(line.encode(errors="replace"), np.uint8)  # kept until sent
                    mpi.isend(self._sent, 0, STUCK_TAG, self.comm)
                    self._told_at = now
            elif told and self.rank != 0 and now - self._told_at > 30:
                self._on_stuck(self._stuck_line + "; rank 0 did not end the job within 30 s")

    def _where_stuck(self, now):
        """(line, how soon) where this rank is stuck, else ("", False); how soon: False (after the
        hold), True (at once), "left" (at once, and every rank ends the job itself: the line is a
        peer's own, sent to every rank). The rules of the module's docstring, in their one place
        (the native watchdog applies them where this thread cannot run)."""
        self._outside = None
        if self._voting:  # the vote itself waits: it sees a peer's LEFT vote and the stuck lines
            return "", False
        left = self._left_line()
        if left:
            return left, "left"
        where = mpi.phase_stuck()  # in a collective of the package's, which a member has left
        if where:
            return where, False
        if self.rank == 0:
            received = self.stuck_line()  # a stuck rank's line, kept once received
            if received:
                return received, True
        return self._outside_wait(now)

    def _left_line(self) -> str:
        """A peer's line saying it left (LEFT_TAG), received once and kept."""
        with self._receiving:
            if self._left_seen:
                return self._left_seen
            if not mpi.probe(-1, LEFT_TAG, self.comm):
                return ""
            buffer = np.zeros(LINE_MAX + 1, np.uint8)
            self._stuck_buffers.append(buffer)
            if mpi.wait_all([mpi.irecv(buffer, -1, LEFT_TAG, self.comm)], 5.0):
                return ""
            self._left_seen = bytes(buffer).rstrip(b"\0").decode(errors="replace")
            return self._left_seen

    def peer_left(self) -> str:
        """A peer's line saying it left, once a watcher received it; "" before."""
        return self._left_seen

    def _outside_wait(self, now):
        """(line, at once) where this rank's main thread waits outside the package's collectives while
        every other rank ended the phase, or ("", False). The native layer sees its own waits
        (phase_stuck); a wait in an mpi4py or mpi4jax call, or in other C code, it never sees (issue 72:
        a suite whose rank 1 failed before comm.allreduce, silent for ever). A rank is stuck there only
        once every other rank has voted (while one has not, it may still send to this rank: the fourth
        read's B6, rank 0 in comm.recv from a rank computing), and its main thread stays on one line: a
        call into MPI (an object of mpi4py's or mpi4jax's on the line, reached through attributes too,
        `self.comm.bcast(...)`, or a frame of theirs) for the hold, any other line for six holds (a rank
        busy in a subprocess or one long C call is slow, not stuck). Past --mpi-timeout (a stage's limit,
        which the alarm cannot enforce while the main thread is in C) at once."""
        frame = sys._current_frames().get(threading.main_thread().ident)
        if frame is None or self.number == 0 or not self._open:
            return "", False
        line = (frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, self.number, frame.f_lasti)
        if line != self._main_at[0]:
            self._main_at = (line, now, None)
            return "", False
        if self._main_at[2] is None:  # read once a place: the line's instructions do not change
            self._main_at = (line, self._main_at[1], _calls_into_mpi(frame))
        still = now - self._main_at[1]
        place = f"{os.path.basename(line[0])}:{line[1]} ({line[2]})"
        if self._timeout > 0 and now - self._begun_at > self._timeout + 2 and still >= 2:
            return (f"rank {self.rank} ran past --mpi-timeout={self._timeout:g} s in {self.name}, its main thread "
                    f"at {place} outside Python (a call into MPI or other C code), where the stage's alarm cannot "
                    f"stop it"), True
        tag = mpi.phase_tag(self.number)
        others = [r for r in range(self.size) if r != self.rank]
        ended = [r for r in others if r in self._taken or mpi.probe(r, tag, self.comm)]
        if len(ended) < len(others) or not others:
            return "", False
        if not (self._main_at[2] or self.inside) and still < 5 * self.hold:  # (the hold itself runs in _run)
            return "", False
        self._outside = (ended, tag)
        kind = ("outside the package's collectives (an mpi4py or mpi4jax call)" if self._main_at[2] else
                "outside Python (a call into C that is not seen to be MPI's)")
        return (f"rank {self.rank} waits at {place}, {kind}, while "
                f"{'rank' if len(ended) == 1 else 'every other rank:'} {', '.join(map(str, ended))} "
                f"ended the phase"), False

    def _how_ended(self, ended, tag) -> str:
        """"rank 1 failed it (AssertionError: ...)": the votes of the ranks that ended the phase, read
        when the hold ran out and the job ends (kept in self._taken, where the vote would find them
        should this rank still get there)."""
        words = []
        for r in ended:
            if r not in self._taken and self._receiving_votes:  # the main thread receives it now
                words.append(f"rank {r} ended the phase")
                continue
            if r not in self._taken:
                header = np.zeros(_HEADER, np.int64)
                if mpi.wait_all([mpi.irecv(header, r, tag, self.comm)], 2.0):
                    words.append(f"rank {r} ended the phase")
                    continue
                text = np.zeros(int(header[2]), np.uint8)
                self._stuck_buffers.append(text)  # kept while its receive may be posted (the fourth read's B9)
                if header[2] > 0 and mpi.wait_all([mpi.irecv(text, r, TEXT_TAG, self.comm)], 2.0):
                    text = np.zeros(0, np.uint8)  # (never late now: a vote's text is sent with its header)
                self._taken[r] = (header, text)
            header, text = self._taken[r]
            said = bytes(text).decode(errors="replace")
            first = next((ln[1:].strip() for ln in said.splitlines() if ln.startswith("E ")), "")
            outcome = {PASSED: "passed", SKIPPED: "skipped", FAILED: "failed"}.get(int(header[1]), "ended")
            words.append(f"rank {r} {outcome} it" + (f" ({first[:160]})" if first else ""))
        return ", ".join(words)

    def stop(self):
        """The watcher looks no more (at exit, before MPI_Finalize)."""
        self._stop.set()
        if self._watch is not None and self._watch is not threading.current_thread():
            self._watch.join(timeout=2)

    def ending(self) -> bool:
        """True for the first caller only: it ends the job (the watcher looks no more)."""
        with self._lock:
            first, self._ending = not self._ending, True
        return first

    def stuck_line(self) -> str:
        """This rank's own stuck line, or (rank 0) one a stuck rank sent; "" when none."""
        with self._lock:
            if self._stuck_line:
                return self._stuck_line
        return self._received_stuck() if self.rank == 0 else ""

    def _received_stuck(self) -> str:
        # Rank 0's watcher and its main thread both look (issue 71): one receives at a time, and the
        # other finds the line it kept, so that no second receive stays posted for one message; a
        # buffer stays this object's while its receive may be posted (a receive not completed in 5 s
        # is left posted, and would write into a freed array).
        with self._receiving:
            with self._lock:
                if self._stuck_line:
                    return self._stuck_line
            if not mpi.probe(-1, STUCK_TAG, self.comm):
                return ""
            buffer = np.zeros(512, np.uint8)
            self._stuck_buffers.append(buffer)
            request = mpi.irecv(buffer, -1, STUCK_TAG, self.comm)
            if mpi.wait_all([request], 5.0):  # still pending
                return ""
            line = bytes(buffer).rstrip(b"\0").decode(errors="replace")
            with self._lock:
                self._stuck_line = line
            return line


_MPI_MODULES = ("mpi4py", "mpi4jax")


def _of_mpi(value) -> bool:
    """Is `value` an object, function or module of mpi4py's or mpi4jax's, by its module's installed name
    (never a path: a checkout of either repository holds any code; the fourth read's B6)?"""
    if isinstance(value, type(sys)):
        module = value.__name__
    elif callable(value) and not isinstance(value, type) and getattr(value, "__module__", None):
        module = value.__module__
    else:
        module = getattr(type(value), "__module__", "")
    module = str(module or "")
    return any(module == m or module.startswith(m + ".") for m in _MPI_MODULES)


def _calls_into_mpi(frame) -> bool:
    """Is the main thread in a call of mpi4py or mpi4jax? A frame of their modules on its stack
    (mpi4jax's Python functions), or, on the innermost frame's line, an object or module of theirs among
    the values the line loads, attributes followed (`comm.allreduce(x)`, `MPI.COMM_WORLD.Barrier()`,
    `self.comm.bcast(x)` as mpi4py's own suite writes it: mpi4py's methods are C, with no frame of their
    own). Attributes are read without running code (inspect.getattr_static: no property runs in this
    thread). mpi4jax's operations inside a jitted function run in XLA, where no Python frame says so:
    not seen (docs/testing.md)."""
    f = frame
    while f is not None:
        name = str(f.f_globals.get("__name__", ""))
        if any(name == m or name.startswith(m + ".") for m in _MPI_MODULES):
            return True
        f = f.f_back
    try:
        import dis
        import inspect

        instructions = list(dis.get_instructions(frame.f_code))
        at = next(i for i, ins in enumerate(instructions) if ins.offset >= frame.f_lasti)
        start = at
        for i in range(at, -1, -1):  # the line's own instructions, up to the one running
            ins = instructions[i]
            # (Python 3.13 on: line_number on every instruction; before it, starts_line on each line's first)
            line = getattr(ins, "line_number", None) if sys.version_info >= (3, 13) else ins.starts_line
            if line is not None and line != frame.f_lineno and ins.offset < frame.f_lasti:
                break
            start = i
        names, missing = frame.f_locals, object()
        value = missing
        for ins in instructions[start:at + 1]:
            if ins.opname in ("LOAD_FAST", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_FAST_CHECK",
                              "LOAD_FAST_BORROW"):
                value = names.get(ins.argval, frame.f_globals.get(ins.argval, missing))
                if value is missing:
                    value = getattr(frame.f_builtins, "get", lambda *_: missing)(ins.argval, missing)
            elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and value is not missing:
                value = inspect.getattr_static(value, ins.argval, missing)
                if type(value).__name__ in ("method_descriptor", "function", "builtin_function_or_method"):
                    continue  # the method itself: its owner was looked at
            else:
                continue
            if value is not missing and _of_mpi(value):
                return True
    except Exception:  # a frame that changed under this look: not taken for a call into MPI
        return False
    return False

"""No silent wait: a rank that does not arrive is named, with where it is.

When a rank has waited in one collective (or in XLA's communicator
creation, or in the device groups' exchange) for MPI_COLLECTIVES_STALL_REPORT
seconds, the job prints, from one rank, one line naming the collective (kind,
dtype, count, its number on its communicator) and the ranks that have not
arrived, each with where it is: in another collective (which, since when) or
outside MPI (for how long). Each missing rank then prints its Python stacks
(every thread) under a line that names it. The report repeats at doubling
intervals while the wait lasts; the job goes on and finishes normally when
the rank arrives. With MPI_COLLECTIVES_STALL_TIMEOUT, the job ends after
that many seconds of one wait, with the report, and every rank prints its
flight record (its last collectives: native/src/services/flight.c).

How, without the stalled rank entering MPI: every rank runs this watcher, a
thread that samples its own state each second (the native layer counts the
calls that wait for other ranks and keeps the collective it is in). A state
that has held still for two samples (waiting in one collective, or outside
MPI) is published in jax.distributed's key-value store (the coordinator,
which every rank reaches, across hosts too); a rank that is busy, in and out
of MPI, publishes nothing. A rank whose state has held still for half the
report time also looks, each second, for requests addressed to it there (its
stacks, its record). So a healthy job costs nothing: no request, no write,
and on the hot path only what the flight record costs (two clock reads per
collective). The report's rank is the lowest-numbered rank that has arrived,
so exactly one rank prints it.
"""
import faulthandler
import os
import socket
import threading
import time

from . import exit_hooks, liveness
from ..base import log, mpi, rank_ranges, terminal
from ..base.ending import end_job

_PREFIX = "mpi_collectives/services/stall/"
_WATCH = None
SPLIT_KINDS = ("communicator creation", "device groups' exchange")  # over every rank of the job


def _client():
    try:
        from jax._src import distributed
        return distributed.global_state.client
    except Exception:
        return None


def _set(client, key: str, value: str) -> None:
    try:
        client.key_value_set(key, value, allow_overwrite=True)
    except TypeError:  # jax before allow_overwrite: a key is written once, so delete it first
        try:
            client.key_value_delete(key)
        except Exception:
            pass
        client.key_value_set(key, value)


class State:
    """What a rank is doing, as published: waiting in a collective, or outside MPI, since when."""

    def __init__(self, waiting: bool, since: float, sig: int = 0, comm: int = 0, seq: int = 0):
        self.waiting, self.since, self.sig, self.comm, self.seq = waiting, since, sig, comm, seq

    def text(self) -> str:
        return f"{int(self.waiting)} {self.since:.3f} {self.sig} {self.comm} {self.seq}"

    @staticmethod
    def parse(text: str):
        try:
            waiting, since, sig, comm, seq = text.split()
            return State(waiting == "1", float(since), int(sig), int(comm), int(seq))
        except ValueError:
            return None

    def same_collective(self, other) -> bool:
        return self.waiting and other.waiting and (self.comm, self.seq, self.sig) == (other.comm, other.seq, other.sig)

    def where(self, now: float) -> str:
        """Where a rank is, for the report ("outside MPI for 62 s")."""
        if not self.waiting:
            return f"outside MPI for {now - self.since:.0f} s"
        return f"in {_collective(self.sig, self.comm, self.seq)} for {now - self.since:.0f} s"


def _missing_text(missing: list, states: dict, now: float, most: int = 8) -> str:
    """The missing ranks grouped by where they are, each group's ranks as ranges and its times as a span:
    "ranks 1-16, 18-63 (outside MPI for 12-14 s); rank 17 (in all-reduce ... for 3 s)", one readable
    line at 64 ranks and more (issue 82; it listed sixteen ranks one by one, then "and 47 more")."""
    groups = {}
    for r in missing:
        state = states.get(r)
        if state is None:
            key = "busy, or not yet seen"
        elif not state.waiting:
            key = "outside MPI"
        else:
            key = f"in {_collective(state.sig, state.comm, state.seq)}"
        groups.setdefault(key, []).append((r, now - state.since if state is not None else None))
    parts = []
    for key, members in sorted(groups.items(), key=lambda item: min(r for r, _ in item[1])):
        times = [t for _, t in members if t is not None]
        where = f"{key} for {rank_ranges.span(times)}" if times else key
        parts.append(f"{rank_ranges.ranks_text([r for r, _ in members])} ({where})")
    more = f"; and {len(parts) - most} more groups" if len(parts) > most else ""
    return "; ".join(parts[:most]) + more


def _collective(sig: int, comm: int, seq: int) -> str:
    words = mpi.describe(sig) if sig else "a call that waits for other ranks"
    if words in SPLIT_KINDS or not sig:
        return words
    return f"{words} (#{seq} on communicator {comm})"


class Watch:
    def __init__(self, rank: int, size: int, report_after: float, limit: float, hosts: liveness.Table):
        self.rank, self.size, self.hosts = rank, size, hosts
        self.report_after, self.limit = report_after, limit
        self.host = socket.gethostname()
        self.stop = threading.Event()
        self.published = None
        self.requests_seen = set()
        self.thread = threading.Thread(target=self._run, name="mpi-collectives stall watch", daemon=True)
        # The host check on a thread of its own: the report's thread talks to the coordinator, and
        # when the coordinator's host is the one lost, its calls wait; this one needs no coordinator.
        self.hosts_thread = threading.Thread(target=self._run_hosts, name="mpi-collectives liveness", daemon=True)

    # ---- this rank's own state, sampled each second ----
    def _sample(self, now: float):
        """(waiting, the collective or None, a key that changes when the state does)."""
        waiting, begun = mpi.wait_state()
        current = mpi.current_collective() if waiting > 0 else None
        # The count of calls begun is in the key outside MPI too: a rank that ran thousands of
        # collectives between two samples was not "outside MPI" since the first sample (issue 74:
        # "outside MPI for 16 s" for a rank stopped 2-3 s); the figure is the time since its last call.
        return waiting > 0, current, (waiting > 0, begun)

    def _run(self):
        last_key, held_since, state = None, None, None
        next_report = self.report_after
        while not self.stop.wait(1.0):
            now = time.monotonic()
            waiting, current, key = self._sample(now)
            if key != last_key:
                last_key, held_since, state, next_report = key, now, None, self.report_after
                continue
            sig, comm, seq, started = current if current else (0, -1, 0, held_since)
            started = min(started, held_since)
            if state is None:  # held still for two samples: publish
                state = State(waiting, time.time() - (now - started), sig, comm, seq)
                self._publish(state)
            held = now - started
            if held >= min(x for x in (self.report_after, self.limit) if x > 0) / 2:
                self._answer_requests(state)
            if waiting and self.report_after > 0 and held >= next_report:
                self._report(state, held)
                next_report *= 2
            if waiting and self.limit > 0 and held >= self.limit:
                self._report(state, held, ending=True)

    def _publish(self, state: State):
        client = _client()
        if client is None:
            return
        try:
            _set(client, f"{_PREFIX}state/{self.rank}", state.text())
            self.published = state
        except Exception:  # the coordinator is gone: JAX reports that itself
            pass

    # ---- requests addressed to this rank ----
    def _answer_requests(self, state: State):
        client = _client()
        if client is None:
            return
        try:
            requests = client.key_value_dir_get(f"{_PREFIX}to/{self.rank}/")
        except Exception:
            return
        for key, value in sorted(requests):
            if key in self.requests_seen:
                continue
            self.requests_seen.add(key)
            what, _, who = value.partition(" ")
            if what == "stacks":
                self._print_stacks(state, who)
            elif what == "record":
                self._print_record()

    def _print_stacks(self, state: State, waiting_rank: str):
        now = time.time()
        log.line(f"mpi-collectives: rank {self.rank}/{self.size} (pid {os.getpid()} on {self.host}) has not "
                 f"arrived where rank {waiting_rank} waits; it is {state.where(now)}. Its Python stacks, "
                 f"most recent call first:")
        faulthandler.dump_traceback(file=terminal.fd(), all_threads=True)

    def _print_record(self):
        """On stderr, or in MPI_COLLECTIVES_TRACE_DIR as the native layer writes it when it ends a job."""
        record = mpi.flight_record()
        if not record:
            return
        text = f"mpi-collectives: rank {self.rank}/{self.size}'s last collectives (its flight record, oldest first):\n"
        folder = os.environ.get("MPI_COLLECTIVES_TRACE_DIR")
        if folder:
            path = os.path.join(folder, f"mpi-collectives-rank{self.rank}.txt")
            try:
                # (appended: the native layer adds its own when the job ends under it)
                with open(path, "a") as f:
                    f.write(text + record)
                return
            except OSError as e:  # the record must not be lost: on stderr, saying why not in the folder
                text = f"mpi-collectives: could not write {path} ({e.strerror}); the record here instead:\n" + text
        log.line((text + record).rstrip("\n"))

    # ---- a host lost: liveness.py ----
    def _run_hosts(self):
        first_check = min([liveness.CHECK_AFTER] + [x / 2 for x in (self.report_after, self.limit) if x > 0])
        last_key, held_since, next_check, pause = None, None, first_check, 1.0
        while not self.stop.wait(pause):
            now, pause = time.monotonic(), 1.0
            waiting, current, key = self._sample(now)
            if key != last_key:
                last_key, held_since, next_check = key, now, first_check
                continue
            if not waiting:
                continue
            sig, comm, seq, started = current if current else (0, -1, 0, held_since)
            held = now - min(started, held_since)
            if held >= next_check:
                self._check_hosts(State(True, time.time() - held, sig, comm, seq), held)
                next_check *= 2
            elif next_check - held < 1.0:
                # On the dot, not at this thread's next sample: every rank waiting in this collective
                # then checks at the same moment and ends with its own line, before the first one's
                # abort reaches it.
                pause = max(0.01, next_check - held)

    def _check_hosts(self, mine: State, held: float):
        members = [] if mpi.describe(mine.sig) in SPLIT_KINDS or not mine.sig else mpi.members(mine.comm)
        members = members or list(range(self.size))
        asked = time.monotonic()
        silent = liveness.silent_hosts(self.hosts, members)
        if not silent:
            return
        # "No route" can come back before the deadline, at a moment set by each host's own neighbour
        # (ARP) table, seconds apart between the askers: the first to end the job would then abort
        # the others before their lines. Every asker concludes at the deadline instead, and its
        # line goes out within the second that the ending leaves the launcher (seen in CI: rank 0
        # ended 8 s into its check, before rank 2's line).
        self.stop.wait(max(0.0, asked + liveness.ANSWER_TIMEOUT - time.monotonic()))
        what = _collective(mine.sig, mine.comm, mine.seq)
        others = self.hosts.hosts_of(members)
        named = "; ".join(f"{host} ({rank_ranges.ranks_text(ranks)})" for host, ranks in silent[:8]) + (
            f"; and {len(silent) - 8} more hosts" if len(silent) > 8 else "")
        if len(silent) == len(others) and len(others) > 1:
            who = (f"no other host answers over the network within {liveness.ANSWER_TIMEOUT:.0f} s ({named}): "
                   f"the host it runs on ({self.host}) has most likely lost its network")
            # Most likely this rank is the one cut off: the ranks on the hosts that still reach each
            # other name the lost host, which is what the user needs, so they go first (an abort
            # from here could reach them through the launcher before they print). They conclude
            # at their own deadlines, within a second of this one, and print then.
            self.stop.wait(liveness.AFTER_THE_OTHERS)
        else:
            who = (f"{named} {'does' if len(silent) == 1 else 'do'} not answer over the network within "
                   f"{liveness.ANSWER_TIMEOUT:.0f} s: the host is cut off or stopped (a link down, the node "
                   f"frozen or powered off)")
        end_job(f"rank {self.rank}/{self.size} on {self.host} has waited {held:.0f} s in {what}; {who}. Ending "
                f"the whole job, which cannot finish without it. Fix: check that host (its link, its state) and "
                f"start again from the last checkpoint on hosts that answer")

    # ---- the report ----
    def _states(self, client) -> dict:
        states = {}
        try:
            for key, value in client.key_value_dir_get(f"{_PREFIX}state/"):
                parsed = State.parse(value)
                if parsed is not None:
                    states[int(key.rsplit("/", 1)[1])] = parsed
        except Exception:
            pass
        return states

    def _report(self, mine: State, held: float, ending: bool = False):
        client = _client()
        if client is None:
            return
        states = self._states(client)
        states[self.rank] = mine
        members = [] if mpi.describe(mine.sig) in SPLIT_KINDS or not mine.sig else mpi.members(mine.comm)
        members = members or list(range(self.size))
        arrived = [r for r in members if r in states and states[r].same_collective(mine)]
        missing = [r for r in members if r not in arrived]
        if not arrived or min(arrived) != self.rank:
            if ending and held >= self.limit + 10:  # the reporting rank did not end the job: this one does
                end_job(self._line(mine, held, missing, states, ending=True))
            return
        line = self._line(mine, held, missing, states, ending)
        requests = [(r, "stacks") for r in missing] + ([(r, "record") for r in range(self.size)] if ending else [])
        for r, what in requests:
            try:
                _set(client, f"{_PREFIX}to/{r}/{time.time_ns()}-{self.rank}", f"{what} {self.rank}")
            except Exception:
                pass
        if ending:
            time.sleep(3)  # the other ranks look for their requests each second
            end_job(line)
        log.line("mpi-collectives: " + line)

    def _line(self, mine: State, held: float, missing: list, states: dict, ending: bool) -> str:
        now = time.time()
        what = _collective(mine.sig, mine.comm, mine.seq)
        if missing:
            who = f"not arrived: {_missing_text(missing, states, now)}"
        else:
            who = "every member has arrived: the wait is inside the MPI library or its network"
        if ending:
            return (f"rank {self.rank}/{self.size} waited {held:.0f} s in {what}, the limit "
                    f"(MPI_COLLECTIVES_STALL_TIMEOUT={self.limit:.0f}); {who}. Ending the whole job. Fix: see "
                    f"the missing ranks' stacks above for where they are (a rank-dependent branch, a deadlock, "
                    f"a slow read), or raise MPI_COLLECTIVES_STALL_TIMEOUT if they are only slow")
        if missing and what in SPLIT_KINDS:
            # XLA's MPI_Comm_split of the world, or the device groups' exchange, needs every process:
            # a program over part of the mesh never gets past it over MPI (docs/devices.md, Limits).
            who += (" (if they do not run this program at all, a collective over part of the mesh, it can "
                    "never start over MPI: every process must run every program with a collective; see "
                    "the Limits in docs/devices.md)")
        return (f"stall: rank {self.rank}/{self.size} has waited {held:.0f} s in {what}; {who}. Their Python "
                f"stacks follow. The job goes on; MPI_COLLECTIVES_STALL_TIMEOUT=S ends it after S s, "
                f"MPI_COLLECTIVES_STALL_REPORT=0 silences this")

    def start(self):
        self.thread.start()
        self.hosts_thread.start()
        # Stopped before Python finalizes and before JAX's atexit shutdown: a daemon thread still
        # inside one of the key-value store's C++ calls then would end the process with
        # "terminate called without an active exception" (seen with jax 0.12 when a program
        # ended while this thread read the liveness rows).
        exit_hooks.before_atexit(self.close)

    def close(self):
        self.stop.set()
        for thread in (self.thread, self.hosts_thread):
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(timeout=5)


def wanted(report_after: float, limit: float) -> bool:
    """Whether the stall watcher runs (a report time or a limit set); the liveness answer runs with it."""
    return report_after > 0 or limit > 0


def watch(rank: int, size: int, report_after: float, limit: float, ranks) -> None:
    """Start this rank's stall watcher (once; initialize()'s finish step calls it). `ranks`: the
    ranks' table (ranks_table.py), where every rank wrote where it answers liveness checks."""
    global _WATCH
    if _WATCH is None and size > 1 and wanted(report_after, limit):
        _WATCH = Watch(rank, size, report_after, limit, liveness.Table(rank, size, ranks.answers()))
        _WATCH.start()

"""Watching the other ranks, so that a broken job ends with one line saying
which rank broke it, instead of hanging.

Two ways a job hangs that MPI itself does not report:

- A rank dies without Python's exit path (SIGKILL, the OOM killer, a crash,
  os._exit). The launcher usually ends the job, but Hydra names only a PID,
  and srun without --kill-on-bad-exit leaves the others waiting. Each rank
  watches the processes of the ranks on its own node (a C thread of the
  native layer polling pidfds: peer_watch.c), and a watcher process of its
  own names the first of them to end, seen in order through one epoll set
  (each rank's "life pipe" and its main thread's pidfd: a process's pidfd
  alone comes too late on a busy node, when the launcher or MPI has already
  ended the next rank). No rank's process can end
  normally while another is still running its program, because JAX's
  shutdown waits at a barrier for every process, so a peer that ends while
  this rank still runs is a failure.

- A rank finishes its program (returns, sys.exit) while the others wait for
  it in a collective it will never join. When its main thread finishes it
  writes "finished" into jax.distributed's key-value store. A rank that has
  waited in one MPI call for `exit_timeout` seconds (the wrapper counts the
  calls that wait for other ranks) looks there, and if some rank has
  finished, ends the job naming it.

Ranks on other nodes that die are left to the launcher and to JAX's own
heartbeat.
"""
import hashlib
import os
import socket
import sys
import threading
import time
import traceback

from . import exit_hooks
from ..base import log, mpi, rank_ranges
from ..base.ending import end_job

_KEY = "mpi_collectives/finished/"
_WATCHER = None


def life_pipe(enabled: bool):
    """What makes this rank's life pipe for its row of the ranks' table (ranks_table.py), called once,
    before the exchange; -1 where this rank does not watch."""
    return mpi.watch_self_prepare if enabled else (lambda: -1)


class Watcher:
    def __init__(self, rank: int, size: int, exit_timeout: float, job: str, ranks):
        self.rank, self.size, self.exit_timeout = rank, size, exit_timeout
        self.job_key = hashlib.sha256(f"{job}|{size}".encode()).hexdigest()[:20]
        self.host = socket.gethostname()
        self.local = ranks.on_this_node()
        self.life_fds = {r: ranks.life_pipe(r) for r in self.local}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="mpi-collectives peers", daemon=True)

    def start(self):
        mpi.watch_peers(self.local, self.rank, self.size, self.host)
        mpi.watch_self(self.local, self.life_fds, self.rank, self.size, self.host, self.job_key)
        self.thread.start()
        # Before atexit: JAX's atexit MPI_Finalize, on a rank that finished early, can block until
        # the others finalize too, which would keep the "finished" mark from being written.
        exit_hooks.before_atexit(self.finish)

    def finish(self):
        """This rank's program is done: say so, and stop watching (its peers may now end)."""
        mpi.watch_stop()
        mpi.watch_self_finished()
        self.stop.set()
        self.thread.join(timeout=5)
        client = _client()
        if client is not None:
            try:
                client.key_value_set(f"{_KEY}{self.rank}", str(time.time()))
            except Exception:  # the coordinator is gone: nobody is left to tell
                pass

    def _run(self):
        """The watch, until finish(). An error of the watch's own does not end a job that runs
        well (the thread excepthook would: MPI_COLLECTIVES_ABORT_ON_EXCEPTION): it is printed,
        with one line saying what this rank now goes without. Seen once in a NetKet run on
        Debian's Open MPI (an AttributeError, its traceback lost; 8 reruns did not show it)."""
        try:
            self._watch()
        except Exception:
            log.line(traceback.format_exc().rstrip("\n"))
            log.line(f"mpi-collectives: warning: rank {self.rank}/{self.size}: the thread that watches for a rank "
                  "that finished the program while the others wait for it stopped on the error above; this "
                  "rank runs on without it (such a rank is then reported by MPI_COLLECTIVES_STALL_REPORT and "
                  "the launcher). Please report it with the lines above.")

    def _watch(self):
        wait_since, last_begun, last_look = None, None, 0.0
        startup_since = None
        while not self.stop.wait(0.5):
            now = time.monotonic()
            # Where this rank can wait for others without being in MPI: JAX's
            # start-up exchange, when its backend is made (a rank that finished
            # before its first collective never joins it).
            startup_since = (startup_since or now) if _main_thread_making_backend() else None
            if startup_since is not None and self._late(now - startup_since, now, last_look):
                last_look = now
                self._name_finished(f"{now - startup_since:.0f} s in JAX's start-up exchange (making its backend)")
            waiting, begun = mpi.wait_state()
            if waiting <= 0 or begun != last_begun:
                wait_since, last_begun = (now if waiting > 0 else None), begun
                continue
            if self._late(now - wait_since, now, last_look):
                last_look = now
                self._name_finished(f"{now - wait_since:.0f} s in MPI for a collective")

    def _late(self, waited: float, now: float, last_look: float) -> bool:
        """Waited long enough to ask who has finished (and not asked just now)?"""
        return self.exit_timeout > 0 and waited >= self.exit_timeout and now - last_look >= self.exit_timeout / 2

    def _name_finished(self, waiting_where: str):
        finished = _finished_ranks()
        if finished:
            names = rank_ranges.ranges(finished)  # (63 of 64 finished: "1-63", not sixteen and "...")
            self._fatal(f"rank(s) {names} finished the program while rank {self.rank} has waited "
                        f"{waiting_where}, which they will never join")

    def _fatal(self, what: str):
        end_job(f"{what}; ending the whole job (seen by rank {self.rank}/{self.size}). Fix: every rank must "
                "run every collective; see the failed rank's own output above for why it stopped.")


def _main_thread_making_backend() -> bool:
    """Is the main thread inside JAX's backend creation (jax/_src/xla_bridge.py)?"""
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        if frame.f_code.co_filename.replace("\\", "/").endswith("jax/_src/xla_bridge.py"):
            return True
        frame = frame.f_back
    return False


def _client():
    try:
        from jax._src import distributed
        return distributed.global_state.client
    except Exception:
        return None


def _finished_ranks():
    client = _client()
    if client is None:
        return []
    try:
        entries = client.key_value_dir_get(_KEY)
    except Exception:  # the coordinator's process is gone: its own failure is reported elsewhere
        return []
    return sorted(int(key.rsplit("/", 1)[1]) for key, _ in entries)


def watch(rank: int, size: int, exit_timeout: float, job: str, ranks, enabled=True) -> None:
    """Start watching (once per process; initialize() calls it on every rank, after the exchange of
    the ranks' table, `ranks`: ranks_table.py, where a rank that does not watch sent no life pipe;
    the others then watch its process but not its pipe). `job` is a text every rank of this job
    shares and no other job does (the coordinator's address)."""
    global _WATCHER
    if _WATCHER is not None or size < 2 or not enabled:
        return
    _WATCHER = Watcher(rank, size, exit_timeout, job, ranks)
    _WATCHER.start()

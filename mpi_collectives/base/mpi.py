"""The one door from Python into the native layer, mpi_collectives._mpiabi
(the same library jaxlib uses, so MPI is initialized once and shared): no
other module of the package touches its ffi or lib.

- what the native layer found when it was loaded: family(), library(),
  family_detail(), load_report(), missing_functions(), library_version(),
  we_initialized(), thread_policy(), trampoline_attached(),
  not_loaded_message();
- MPI itself, only what initialize() and the host helpers need: init(),
  is_initialized(), rank_size(), barrier(), bcast(), allgather(),
  allreduce(), isend()/irecv()/test()/wait_all(), handle(); note_for_init_crash(), what a rank
  says if the library crashes inside MPI_Init (native/src/services/init_crash.c);
- the peers watcher (native/src/services/ending/): watch_peers(), watch_self_prepare(), watch_self(),
  watch_stop(), watch_self_finished(), watch_self_quiet(), wait_state();
- end_job(line): the native layer's one way to end the whole job.

Loading the native layer loads MPI: each function above loads it on first
use; loaded() says whether it is loaded, without loading it.
"""
import importlib.util
import os

import numpy as np

from .settings import REQUESTED, THREAD_LEVELS

_DTYPES = {
    "int8": "INT8_T", "int16": "INT16_T", "int32": "INT32_T", "int64": "INT64_T",
    "uint8": "UINT8_T", "uint16": "UINT16_T", "uint32": "UINT32_T", "uint64": "UINT64_T",
    "float32": "FLOAT", "float64": "DOUBLE", "complex64": "C_COMPLEX", "complex128": "C_DOUBLE_COMPLEX",
    "bool": "C_BOOL",
}
_OPS = {"sum": "SUM", "prod": "PROD", "max": "MAX", "min": "MIN",
        "land": "LAND", "lor": "LOR", "band": "BAND", "bor": "BOR", "bxor": "BXOR"}


class MPIError(RuntimeError):
    pass


_NATIVE = None


def _native():
    """(ffi, lib) of the native layer; loading it loads MPI."""
    global _NATIVE
    if _NATIVE is None:
        try:
            from .. import _mpiabi
        except ImportError as e:
            if importlib.util.find_spec("mpi_collectives._mpiabi") is not None:
                raise  # built, and failing to load: its own words
            from ._paths import not_built
            raise not_built() from e
        _NATIVE = _mpiabi.ffi, _mpiabi.lib
        from . import terminal
        if terminal.fd() != 2:  # the stderr kept before pytest captured descriptor 2 (terminal.py)
            _mpiabi.lib.mpic_terminal_keep(terminal.fd())
    return _NATIVE


def loaded() -> bool:
    """Is the native layer loaded in this process (by us, or by jaxlib)? Does not load it."""
    import sys
    return _NATIVE is not None or "mpi_collectives._mpiabi" in sys.modules


def _str(p) -> str:
    return _native()[0].string(p).decode(errors="replace")


# ---- what the native layer found when it was loaded ----

def family() -> str:
    """The ABI family of the loaded MPI library, or "none"."""
    return _str(_native()[1].mpic_family_name())


def library() -> str:
    """The path of the MPI library the native layer loaded."""
    return _str(_native()[1].mpic_library_path())


def family_detail() -> str:
    """Why the native layer took the library for its ABI family."""
    return _str(_native()[1].mpic_family_detail())


def load_report() -> str:
    """Where the native layer looked for an MPI library, and what it found."""
    return _str(_native()[1].mpic_load_report())


def load_rule() -> str:
    """Which of the loader's rules chose the library (native/src/base/loader.c)."""
    return _str(_native()[1].mpic_load_rule_text())


def passed_over() -> str:
    """The other MPI libraries the loader's rules could have taken, and why they were not."""
    return _str(_native()[1].mpic_passed_over_text())


def missing_functions() -> list:
    """MPI functions that the loaded library lacks."""
    return _str(_native()[1].mpic_missing_functions()).split()


def not_loaded_message() -> str:
    """The one sentence for a process without an MPI library: "no MPI library
    could be loaded (...). Fix: ..." (callers put their own prefix in front)."""
    return _str(_native()[1].mpic_not_loaded_message())


def library_version() -> str:
    """The first line of MPI_Get_library_version, or None without an MPI library."""
    if family() == "none":
        return None
    ffi, lib = _native()
    buf, n = ffi.new("char[]", 8192), ffi.new("int *")
    if lib.MPIABI_Get_library_version(buf, n) != 0:
        return None
    lines = ffi.string(buf).decode(errors="replace").strip().splitlines()
    return lines[0] if lines else ""


def library_name() -> str:
    """The MPI library's name and version, never its path (for reports that
    leave the machine): "MPICH 5.0.2", "Intel(R) MPI Library 2021.18.1",
    "Open MPI v5.0.11"."""
    import re
    text = (library_version() or "an unknown MPI").split(",")[0]
    text = re.sub(r"\s+for\s+.*$", "", text)
    text = re.sub(r"\s*Version:\s*", " ", text)
    return " ".join(text.split())


def we_initialized() -> bool:
    """Did the native layer itself initialize MPI (so it finalizes it too)?"""
    return bool(_native()[1].mpic_we_initialized())


def thread_policy() -> str:
    """The thread level the native layer asks of MPI (MPI_COLLECTIVES_THREAD_LEVEL):
    one of settings.THREAD_LEVELS, or settings.REQUESTED for what the caller asked."""
    value = _native()[1].mpic_thread_policy_value()  # an index into the setting's words
    words = THREAD_LEVELS + (REQUESTED,)
    return words[value] if 0 <= value < len(words) else str(value)


def trampoline_attached() -> bool:
    """Has jaxlib's MPItrampoline loaded this same native layer as its MPI wrapper?"""
    return bool(_native()[1].mpic_trampoline_attached())


# ---- MPI ----

def _check(ret: int, what: str) -> None:
    if ret != 0:
        ffi, lib = _native()
        buf = ffi.new("char[]", 1024)
        n = ffi.new("int *")
        text = ffi.string(buf).decode() if lib.MPIABI_Error_string(ret, buf, n) == 0 else ""
        raise MPIError(f"mpi-collectives: {what} failed with MPI error {ret}: {text}")


_FINALIZE_REGISTERED = False


def _finalize_at_exit() -> None:
    # The wrapper finalizes only what it initialized, and only once (JAX's own
    # atexit MPI_Finalize may have run first). A process that leaves MPI
    # unfinalized is reported by the launcher as a failure.
    _native()[1].MPIABI_Finalize()


def init() -> int:
    """Initialize MPI (once; the wrapper's policy picks the thread level). Returns the level."""
    global _FINALIZE_REGISTERED
    ffi, lib = _native()
    provided = ffi.new("int *")
    _check(lib.MPIABI_Init_thread(ffi.NULL, ffi.NULL, lib.MPIABI_THREAD_FUNNELED, provided), "MPI_Init_thread")
    if not _FINALIZE_REGISTERED:
        import atexit
        atexit.register(_finalize_at_exit)
        _FINALIZE_REGISTERED = True
    return provided[0]


def max_local_devices() -> int:
    """The most CPU devices per process the native layer supports."""
    return _native()[1].mpic_max_local_devices()


def set_local_devices(n: int) -> None:
    """Tell the native layer how many CPU devices each process has (1 to max_local_devices())."""
    _ffi, lib = _native()
    if lib.mpic_set_local_devices(n) != 0:
        raise ValueError(n)


def set_node_path(mode: int, collectives: str, min_bytes: int, max_bytes: int, across_nodes: int, direct: int,
                  round_bytes: int) -> None:
    """Give the native layer the node path's settings (MPI_COLLECTIVES_NODE_PATH, _COLLECTIVES as
    the setting writes it, _MIN, _MAX, _ACROSS_NODES, _DIRECT, _ROUND), before XLA creates its first
    communicator: what `mpi-collectives tune` measured (library_settings.py)."""
    from .settings import TABLE
    words = TABLE["node_path_collectives"].allowed.words
    bits = sum(1 << words.index(w) for w in collectives.split(",") if w)
    if _native()[1].mpic_set_node_path(mode, bits, min_bytes, max_bytes, across_nodes, direct, round_bytes) != 0:
        raise ValueError((mode, collectives, min_bytes, max_bytes, across_nodes, direct, round_bytes))


def set_finalize_waits(report_s: float, limit_s: float) -> None:
    """The stall report's and limit's seconds for the native layer's own wait at MPI_Finalize (the
    node path's windows, whose ranks free them together; the stall watcher may be gone by then)."""
    if _native()[1].mpic_set_finalize_waits(report_s, limit_s) != 0:
        raise ValueError((report_s, limit_s))


def bind_callers(cpus) -> None:
    """Move each thread that calls MPI through the wrapper onto `cpus` at its first call
    (MPI_COLLECTIVES_BIND_CPUS=2); an empty set turns that off."""
    ffi, lib = _native()
    chosen = sorted(cpus)
    if lib.mpic_bind_callers(ffi.new("int[]", chosen or [0]), len(chosen)) != 0:
        raise ValueError(chosen)


def callers_moved() -> int:
    """How many threads have moved onto the slice of bind_callers so far."""
    return _native()[1].mpic_callers_moved()


def thread_level_name(level: int) -> str:
    """The name (one of settings.THREAD_LEVELS) of a level init() returned."""
    lib = _native()[1]
    levels = (lib.MPIABI_THREAD_SINGLE, lib.MPIABI_THREAD_FUNNELED, lib.MPIABI_THREAD_SERIALIZED,
              lib.MPIABI_THREAD_MULTIPLE)
    return dict(zip(levels, THREAD_LEVELS)).get(level, str(level))


def is_initialized() -> bool:
    """Is MPI initialized and not yet finalized? (False without an MPI library.)"""
    if family() == "none":
        return False  # any MPI call would end the process with not_loaded_message()
    ffi, lib = _native()
    initialized, finalized = ffi.new("int *"), ffi.new("int *")
    if lib.MPIABI_Initialized(initialized) != 0 or not initialized[0]:
        return False
    return lib.MPIABI_Finalized(finalized) == 0 and not finalized[0]


def rank_size():
    ffi, lib = _native()
    r, s = ffi.new("int *"), ffi.new("int *")
    _check(lib.MPIABI_Comm_rank(lib.MPIABI_COMM_WORLD, r), "MPI_Comm_rank")
    _check(lib.MPIABI_Comm_size(lib.MPIABI_COMM_WORLD, s), "MPI_Comm_size")
    return r[0], s[0]


def barrier() -> None:
    lib = _native()[1]
    _check(lib.MPIABI_Barrier(lib.MPIABI_COMM_WORLD), "MPI_Barrier")


def _buffer(array: np.ndarray):
    ffi = _native()[0]
    return ffi.from_buffer(array, require_writable=False)


def bcast(array: np.ndarray, root: int) -> np.ndarray:
    """Broadcast a contiguous array in place from root (same shape on every rank)."""
    lib = _native()[1]
    array = np.ascontiguousarray(array)
    _check(lib.MPIABI_Bcast(_buffer(array), array.nbytes, lib.MPIABI_BYTE, root, lib.MPIABI_COMM_WORLD),
           "MPI_Bcast")
    return array


def allgather(array: np.ndarray, size: int = None) -> np.ndarray:
    """Every rank's array (same shape everywhere), stacked along a new axis 0."""
    lib = _native()[1]
    size = size or rank_size()[1]
    array = np.ascontiguousarray(array)
    out = np.empty((size,) + array.shape, array.dtype)
    _check(lib.MPIABI_Allgather(_buffer(array), array.nbytes, lib.MPIABI_BYTE, _buffer(out), array.nbytes,
                                lib.MPIABI_BYTE, lib.MPIABI_COMM_WORLD), "MPI_Allgather")
    return out


def allreduce(array: np.ndarray, op: str = "sum") -> np.ndarray:
    lib = _native()[1]
    array = np.asarray(array, order="C")  # (keeps 0-d shapes, unlike ascontiguousarray)
    kind = _DTYPES.get(array.dtype.name)
    if kind is None:
        raise TypeError(f"mpi-collectives: allreduce does not support dtype {array.dtype}; "
                        f"supported: {', '.join(_DTYPES)}")
    if op not in _OPS:
        raise ValueError(f"mpi-collectives: unknown reduction {op!r}; known: {', '.join(_OPS)}")
    out = np.empty_like(array)
    _check(lib.MPIABI_Allreduce(_buffer(array), _buffer(out), array.size, getattr(lib, "MPIABI_" + kind),
                                getattr(lib, "MPIABI_" + _OPS[op]), lib.MPIABI_COMM_WORLD), "MPI_Allreduce")
    return out


def isend(array: np.ndarray, dest: int, tag: int, comm: int = None):
    """Start sending a contiguous array (on MPI_COMM_WORLD unless `comm`); keep the returned
    (request, array) until done."""
    ffi, lib = _native()
    array = np.ascontiguousarray(array)
    req = ffi.new("uintptr_t *")
    comm = lib.MPIABI_COMM_WORLD if comm is None else comm
    _check(lib.MPIABI_Isend(_buffer(array), array.nbytes, lib.MPIABI_BYTE, dest, tag, comm, req), "MPI_Isend")
    return req, array


def irecv(array: np.ndarray, source: int, tag: int, comm: int = None):
    ffi, lib = _native()
    req = ffi.new("uintptr_t *")
    comm = lib.MPIABI_COMM_WORLD if comm is None else comm
    source = lib.MPIABI_ANY_SOURCE if source < 0 else source
    _check(lib.MPIABI_Irecv(ffi.from_buffer(array), array.nbytes, lib.MPIABI_BYTE, source, tag, comm, req),
           "MPI_Irecv")
    return req, array


def test(request) -> bool:
    ffi, lib = _native()
    flag = ffi.new("int *")
    _check(lib.MPIABI_Test(request, flag, lib.MPIABI_STATUS_IGNORE), "MPI_Test")
    return bool(flag[0])


def wait_all(requests, timeout: float) -> list:
    """Poll (request, array) pairs of isend()/irecv() until all complete or `timeout` seconds
    pass; the indices of those still pending. (Polling, never MPI_Wait: a caller can give up.)"""
    import time
    deadline = time.monotonic() + timeout
    pending = list(range(len(requests)))
    while pending and time.monotonic() < deadline:
        pending = [i for i in pending if not test(requests[i][0])]
        if pending:
            time.sleep(0.001)
    return pending


# ---- phases of a program (native/src/services/phases.h; mpi_collectives.services.phases drives them) ----

def phases_start() -> int:
    """Collective over the world: the phases' own communicator; returns it."""
    lib = _native()[1]
    _check(lib.mpic_phases_begin_all(), "MPI_Comm_dup")
    return lib.mpic_phases_comm_handle()


def phases_watchdog(rank: int, size: int, hold: float) -> None:
    """Start the native watchdog of the phases (native/src/services/phases_watchdog.h), once."""
    _native()[1].mpic_phases_watchdog(rank, size, float(hold))


def phases_beat(voting: bool) -> None:
    """The Python watcher runs (the native watchdog leaves the deciding to it while it beats)."""
    _native()[1].mpic_phases_beat(1 if voting else 0)


def phases_progress(words: str) -> None:
    """Rank 0: the tests so far, in words, for the native watchdog's line."""
    _native()[1].mpic_phases_progress(words.encode(errors="replace")[:1000])


def stop_asked() -> bool:
    """Has SIGTERM reached this rank (the package's native handler)?"""
    return bool(_native()[1].mpic_stop_asked())


def phase_tag(phase: int) -> int:
    return _native()[1].mpic_phases_tag(phase)


def phase_enter(phase: int, name: str, timeout: float) -> None:
    _native()[1].mpic_phases_enter(phase, name.encode(errors="replace")[:150], float(timeout or 0))


def phase_given_up(most: int) -> list:
    """(kind, communicator id, sequence) of each wait this rank gave up and has not settled, at most `most`."""
    ffi, lib = _native()
    out = ffi.new("int[]", 3 * most)
    n = lib.mpic_phases_given_up(out, most)
    return [(out[3 * i], out[3 * i + 1], out[3 * i + 2]) for i in range(n)]


def phase_settle(triples: list, timeout: float) -> int:
    """Every rank's given-up waits (the same list on every rank): waited for or joined; 0 when done."""
    ffi, lib = _native()
    flat = ffi.new("int[]", [v for t in triples for v in t] or [0])
    return lib.mpic_phases_settle(flat, len(triples), float(timeout))


def phase_stuck() -> str:
    """Where this rank waits in a call that cannot be given up while a member ended the phase, or ""."""
    ffi, lib = _native()
    out = ffi.new("char[]", 512)
    return _str(out) if lib.mpic_phases_stuck(out, 512) else ""


def probe(source: int, tag: int, comm: int) -> bool:
    """Has a message from `source` (-1: any) with `tag` arrived on `comm`?"""
    ffi, lib = _native()
    flag = ffi.new("int *")
    any_source = lib.MPIABI_ANY_SOURCE
    _check(lib.MPIABI_Iprobe(any_source if source < 0 else source, tag, comm, flag, lib.MPIABI_STATUS_IGNORE),
           "MPI_Iprobe")
    return bool(flag[0])


def handle(name: str) -> int:
    """The MPIABI handle of a datatype, reduction or communicator: handle("FLOAT")
    is MPIABI_FLOAT (for code that calls MPIABI functions from C: the benchmark's loop)."""
    return getattr(_native()[1], "MPIABI_" + name)


# ---- the peers watcher (native/src/services/ending/; mpi_collectives.services.peers drives it) ----

def _ranks_pids(local: dict):
    ffi = _native()[0]
    ranks = list(local)
    return ffi.new("int[]", ranks), ffi.new("int[]", [local[r] for r in ranks]), len(ranks)


def watch_peers(local: dict, rank: int, size: int, host: str) -> None:
    """Start the thread that ends the job when a process of `local` ({rank: pid}
    of the other ranks on this node) ends while this rank still runs."""
    ranks, pids, n = _ranks_pids(local)
    _native()[1].mpic_watch_peers(ranks, pids, n, rank, size, host.encode())


def note_for_init_crash(text: str) -> None:
    """What this rank writes if the MPI library crashes inside MPI_Init (native init_crash.c)."""
    _native()[1].mpic_set_init_crash_note(text.encode())


def watch_self_prepare() -> int:
    """Make this rank's life pipe (before the node's ranks exchange pids);
    returns the number of its write end for the others' watchers, or -1."""
    return int(_native()[1].mpic_watch_self_prepare())


def watch_self(local: dict, life_fds: dict, rank: int, size: int, host: str, job_key: str) -> None:
    """Start this rank's watcher process, which names the first process of the
    job on this node to end before finishing (`local`: {rank: pid} of the
    others here, `life_fds`: {rank: watch_self_prepare() of that rank};
    `job_key`: a name of this job's own, shared by its ranks)."""
    ranks, pids, n = _ranks_pids(local)
    fds = _native()[0].new("int[]", [life_fds[r] for r in local])
    _native()[1].mpic_watch_self(ranks, pids, fds, n, rank, size, host.encode(), job_key.encode())


def watch_stop() -> None:
    """Stop the thread of watch_peers (this rank is done: its peers may end now)."""
    _native()[1].mpic_watch_stop()


def watch_self_finished() -> None:
    """Tell this rank's watcher process that the rank finished its program."""
    _native()[1].mpic_watch_self_finished()


def watch_self_quiet() -> None:
    """Tell this rank's watcher process to say nothing: the rank reports its own end."""
    _native()[1].mpic_watch_self_quiet()


def wait_state() -> tuple:
    """(how many MPI calls that wait for other ranks are under way, how many
    have begun so far): a call that keeps waiting shows as the same count."""
    ffi, lib = _native()
    waiting, begun = ffi.new("long *"), ffi.new("unsigned long *")
    lib.mpic_wait_state(waiting, begun)
    return waiting[0], begun[0]


# ---- ending the job ----

def stop_on_sigterm(rank: int, size: int) -> None:
    """From now on SIGTERM ends this rank at once with one line (the native
    layer's handler replaces JAX's, which only notes the signal)."""
    _native()[1].mpic_stop_on_sigterm(rank, size)


def stop_grace_words(grace: str, too_late: str) -> None:
    """The two lines of the SIGTERM grace (after preemption_grace), in the words of its user."""
    _native()[1].mpic_stop_grace_words(grace.encode(errors="replace"), too_late.encode(errors="replace"))


def preemption_grace(rank: int, size: int, grace: int) -> None:
    """From now on SIGTERM is passed on to JAX's preemption notifier, and the rank is ended only if
    it has not ended `grace` seconds later (stop_signals.c); called when the program first asks
    JAX's preemption sync point."""
    if _native()[1].mpic_preemption_grace(rank, size, grace) != 0:
        raise OSError("mpi-collectives: the preemption grace could not be armed (a thread could not start)")


def abort_launch_before_init(code: int = 1) -> bool:
    """Ask the launcher to end the job, where this process has not begun MPI_Init and its launcher
    takes PMI's abort from it (native launcher_abort.c: Hydra, srun --mpi=pmi2); False where there
    was nothing to ask."""
    return bool(_native()[1].mpic_abort_launch_before_init(code))


def end_job(line: str):
    """Print `line` on stderr, quiet this rank's watcher process, give the
    launcher a second to forward the line, then MPI_Abort (when MPI is up) or
    _exit(1): the whole job ends. Never returns. (Python callers use
    mpi_collectives.base.ending.end_job, which writes the line.)"""
    _native()[1].mpic_end_job(line.encode(errors="replace"))
    os._exit(1)  # (not reached: mpic_end_job does not return)


# ---- the stall watcher's view (native/src/services/flight.c; mpi_collectives.services.stall drives it) ----
def current_collective():
    """(signature, communicator id, sequence number, start in time.monotonic() seconds) of the
    collective this rank has begun and not ended, or None."""
    ffi, lib = _native()
    sig, comm, seq, start = ffi.new("uint64_t *"), ffi.new("int *"), ffi.new("unsigned *"), ffi.new("int64_t *")
    if not lib.mpic_stall_current(sig, comm, seq, start):
        return None
    return int(sig[0]), int(comm[0]), int(seq[0]), start[0] / 1e9


def describe(signature: int) -> str:
    """A collective's signature in words ("all-reduce sum f32 x4")."""
    ffi, lib = _native()
    out = ffi.new("char[]", 256)
    lib.mpic_stall_describe(signature, out, 256)
    return ffi.string(out).decode(errors="replace")


def members(comm_id: int) -> list:
    """The world ranks of the communicator the wrapper knows by `comm_id`, or [] if none."""
    ffi, lib = _native()
    out = ffi.new("int[]", 65536)
    n = lib.mpic_stall_members(comm_id, out, 65536)
    return [int(out[i]) for i in range(min(n, 65536))] if n > 0 else []


def flight_record() -> str:
    """This rank's last collectives, a line each, oldest first."""
    ffi, lib = _native()
    out = ffi.new("char[]", 16384)
    lib.mpic_flight_record(out, 16384)
    return ffi.string(out).decode(errors="replace")


def set_node_crowded(yes: bool) -> None:
    """Tell the node path whether this node's ranks outnumber the CPUs they may run on: its round's
    waits then give their core away almost at once (native/src/services/node/round.c)."""
    _native()[1].mpic_set_node_crowded(1 if yes else 0)


def counts() -> dict:
    """This process's counts of what its collectives cost (native/src/base/counts.h): the wrapper's
    own calls beside XLA's, the node path's rounds and reads of its peers. {name: count}."""
    ffi, lib = _native()
    n = lib.mpic_counts(ffi.NULL, 0)
    out = ffi.new("long long[]", n)
    lib.mpic_counts(out, n)
    return {ffi.string(lib.mpic_counts_name(i)).decode(): int(out[i]) for i in range(n)}


def node_windows() -> dict:
    """The node path's windows this rank belongs to: live, kept (freed by the program, kept for the
    next), their bytes here, and how many are being given back."""
    ffi, lib = _native()
    live, kept, returning = ffi.new("int *"), ffi.new("int *"), ffi.new("int *")
    nbytes = ffi.new("long long *")
    lib.mpic_node_windows(live, kept, nbytes, returning)
    return {"live": live[0], "kept": kept[0], "bytes": int(nbytes[0]), "returning": returning[0]}


def liveness_listen(address: str, rank: int) -> int:
    """Answer other hosts' "are you there?" on `address` from a C thread (services/ending/liveness.c);
    the port, or -1 when it cannot listen there."""
    return int(_native()[1].mpic_liveness_listen(address.encode(), rank))

"""initialize(): jax.distributed from MPI, so JAX's collectives run over MPI.

    import mpi_collectives
    mpi_collectives.initialize()
    import jax

Every rank: load MPI through the native layer (the library jaxlib's
MPItrampoline uses too), initialize it, take rank and size from MPI, meet the
other ranks (meeting.py: rank 0 checks that all run the same versions and
picks the coordinator: an address of its own that every rank reaches and a
port it has just bound there), then call jax.distributed.initialize with
what rank 0 sent, its service listening on that address only.
"""
import dataclasses
import os
import socket
import sys
import threading

from ..services import (coordinator, exit_hooks, job_choices, layout, library_settings, liveness, meeting,
                        open_files, peers, ranks_table, stall, tuning)
from . import gpus, jax_compat, narrow_dtypes, preemption
from ..base import ending, launchers, mpi
from ..base import settings as _settings
from ..base._paths import libpath
from ..base.ending import end_job
from ..base.errors import InitializeError
from ..base.log import line as say_line, log

_coordinator = coordinator  # (initialize() has a keyword argument of that name)

__all__ = ["initialize", "Info", "InitializeError"]


@dataclasses.dataclass(frozen=True)
class Info:
    """What initialize() set up in this process.

    Attributes:
        rank: this process's rank in MPI_COMM_WORLD (and JAX's process index).
        size: the number of processes.
        library: the path of the MPI library loaded.
        family: its ABI family: mpich, openmpi or standard.
        thread_level: the thread level MPI granted (multiple unless configured otherwise).
        coordinator: host:port of jax.distributed's coordinator, agreed over MPI.
        wrapper: the path of the native layer, the value of MPITRAMPOLINE_LIB.
        tunings: what the tunings did, a line each (applied, or why not).
        local_devices: CPU devices per process.
    """
    rank: int
    size: int
    library: str
    family: str
    thread_level: str
    coordinator: str
    wrapper: str
    tunings: tuple = ()  # what tuning.py applied, or why not, one line each
    local_devices: int = 1  # CPU devices per process, from JAX's settings at initialize()


_INFO = None
_ASKED = False  # initialize() or the cluster environment's start has been called in this process


def asked() -> bool:
    """Whether this process has called initialize() (or jax.distributed.initialize() through the cluster
    environment), whatever came of it: the plugin hook's line for a rank that never joined waits for it."""
    return _ASKED


def _jax_loaded() -> bool:
    return "jaxlib._jax" in sys.modules or "jax" in sys.modules


def _backend_exists() -> bool:
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge
        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):
        return False


def too_late_message() -> str:
    """initialize() after JAX made its backend: what made it, where the plugin hook saw an import
    under way then (mpi_collectives_jax_plugin.started_by_import), and the two fixes."""
    hook = sys.modules.get("mpi_collectives_jax_plugin")
    by = getattr(hook, "started_by_import", None)
    if by:
        cause = (f"`import {by}` made it (some libraries start JAX's backend when imported: netket does), "
                 "before initialize() ran")
    else:
        cause = ("a JAX computation ran before initialize(), or a library that starts JAX's backend when "
                 "imported (netket does) was imported before it")
    return ("mpi-collectives: initialize() was called after JAX created its backend, so JAX's collectives are "
            f"already set up without MPI: {cause}. Fix: call mpi_collectives.initialize() right after `import "
            "mpi_collectives`, before importing such libraries and before the first JAX computation; or launch "
            "the script unchanged with `mpi-collectives run --initialize script.py`, which calls it before the "
            "script starts.")


def _check_jax_can_use_us() -> None:
    """jaxlib reads MPITRAMPOLINE_LIB once, when `import jax` loads it."""
    ours = libpath()
    if not _jax_loaded():
        os.environ["MPITRAMPOLINE_LIB"] = ours
        return
    if mpi.trampoline_attached():
        return
    current = os.environ.get("MPITRAMPOLINE_LIB")
    if current and os.path.realpath(current) != os.path.realpath(ours):
        raise InitializeError(
            f"mpi-collectives: jax was loaded with MPITRAMPOLINE_LIB={current}, another MPI wrapper than "
            f"ours ({ours}). Fix: unset it or set it to `python -m mpi_collectives libpath`, and import "
            "mpi_collectives before jax.")
    raise InitializeError(
        "mpi-collectives: jax was imported before MPITRAMPOLINE_LIB was set, so JAX cannot use MPI in "
        "this process. Fix: `import mpi_collectives` before `import jax` (anywhere, even in another "
        "module), or run the script with `python -m mpi_collectives run script.py`, or "
        "`export MPITRAMPOLINE_LIB=$(python -m mpi_collectives libpath)` before starting Python.")


def _check_native_settings(settings) -> None:
    """Settings the native layer reads when loaded cannot change afterwards. Each is compared as a value
    (parsed as the native layer parses it), never as text: `Multiple` and `multiple`, `01024` and `1024`
    are one value. A keyword that differs from what the loaded layer uses (its variable's value, else the
    default) is refused, also where the variable is unset: it was ignored in silence, and os.environ then
    showed a value that was never used (issue 81)."""
    loaded = mpi.loaded() or _jax_loaded()
    for name, row in _settings.TABLE.items():
        wanted = getattr(settings, name)
        if not row.native or wanted in (None, "") or not loaded:
            continue
        in_force = _settings.value_from_environment(name)
        used = row.default if in_force is None else in_force
        if wanted == used:
            continue
        source = (f"with {row.var}={os.environ.get(row.var)!r}" if in_force is not None
                  else f"with {row.var} unset, so {row.default!r}" if row.default is not None
                  else f"with {row.var} unset")
        raise InitializeError(
            f"mpi-collectives: initialize({name}={wanted!r}) comes after the native layer was loaded "
            f"{source}, which it keeps. Fix: set {row.var} in the environment before "
            "starting Python, or call initialize() before importing jax.")
    _settings.export_native(settings)


def _check_jax_version() -> None:
    jax_version = jax_compat.installed_jax()
    if jax_version is None:
        raise InitializeError("mpi-collectives: jax is not installed. Fix: pip install 'mpi-collectives[jax]' "
                              f"(jax {'.'.join(map(str, jax_compat.MINIMUM_JAX))} or newer).")
    if jax_compat.version_tuple(jax_version) < jax_compat.MINIMUM_JAX:
        raise InitializeError(jax_compat.too_old_message(jax_version))


def init_mpi_or_end_job(settings) -> int:
    """MPI_Init waits for every process of the job (the launcher's PMI fence),
    so a process that never gets here makes it hang: a watchdog ends the job
    after settings.timeout seconds, saying so. Returns the thread level."""
    watchdog = threading.Timer(float(settings.timeout), end_job, [
        f"MPI_Init did not complete within {settings.timeout} s: some process of this job never "
        "initialized MPI (it never called initialize(), or died before). Fix: call "
        "mpi_collectives.initialize() on every rank, or raise MPI_COLLECTIVES_INIT_TIMEOUT if startup is "
        "just slow."])
    watchdog.daemon = True
    watchdog.start()
    try:
        return mpi.init()
    finally:
        watchdog.cancel()


_DEVICES_HOW = ("set JAX_NUM_CPU_DEVICES (or jax.config.update('jax_num_cpu_devices', N), or XLA_FLAGS="
                "--xla_force_host_platform_device_count=N) to the same N on every rank before initialize()")


def check_local_devices(devices: int, level: str = "multiple") -> None:
    """InitializeError when `devices` CPU devices per process cannot run over
    MPI here: more than the native layer serves, a jax whose XLA cannot, or a
    thread level below MPI_THREAD_MULTIPLE (`level`, as MPI granted it)."""
    most = mpi.max_local_devices()
    if devices > most:
        raise InitializeError(f"mpi-collectives: {devices} CPU devices per process; collectives over MPI support "
                              f"1 to {most}. Fix: {_DEVICES_HOW}, with N at most {most}, and "
                              "start more processes instead.")
    if devices > 1 and jax_compat.version_tuple(jax_compat.installed_jax()) < jax_compat.LOCAL_DEVICES_JAX:
        need = ".".join(map(str, jax_compat.LOCAL_DEVICES_JAX))
        raise InitializeError(f"mpi-collectives: {devices} CPU devices per process need jax {need} or newer over "
                              f"MPI (jax {jax_compat.installed_jax()}'s XLA creates the communicators of a "
                              f"process's devices from several threads without a lock). Fix: pip install "
                              f"'jax>={need}', or use one CPU device per process.")
    if devices > 1 and level != "multiple":
        raise InitializeError(f"mpi-collectives: {devices} CPU devices per process need MPI_THREAD_MULTIPLE (their "
                              f"collectives call MPI from several threads at once), and MPI granted {level}. Fix: "
                              "unset MPI_COLLECTIVES_THREAD_LEVEL, or use an MPI built with thread support, or "
                              "one CPU device per process.")


def _agree_on_local_devices(rank: int, size: int, level: str) -> int:
    """CPU devices per process, from JAX's settings, the same on every rank
    (checked here, where it can still be said before JAX starts); the native
    layer needs it before XLA's first collective (native/src/services/devices/)."""
    import numpy as np
    devices = jax_compat.configured_cpu_devices()
    every = mpi.allgather(np.array([devices], np.int32), size)[:, 0]
    if len(set(every.tolist())) > 1:
        counts = ", ".join(f"rank {r}: {n}" for r, n in enumerate(every.tolist()) if n != every[0] or r == 0)
        raise InitializeError(f"mpi-collectives: the ranks ask JAX for different numbers of CPU devices per process "
                              f"({counts}); every process must have the same number. Fix: {_DEVICES_HOW}.")
    check_local_devices(devices, level)
    mpi.set_local_devices(devices)
    if devices > 1:
        log(f"{devices} CPU devices per process: collectives go through device groups")
    return devices


@dataclasses.dataclass(frozen=True)
class Started:
    """What start_up() did: MPI up, the ranks met, JAX configured; what is
    left is jax.distributed.initialize and the steps after it (finish())."""
    rank: int
    size: int
    family: str
    level: str
    choice: object  # meeting.meet's answer: the coordinator's address, and where it listens
    tunings: tuple
    devices: int
    settings: object
    gpu_ids: object = None  # local_device_ids for jax.distributed.initialize (gpus.py), None: JAX's default
    finish_at_backend_start: bool = False  # the cluster environment's start: plain_programs finishes it


@dataclasses.dataclass(frozen=True)
class MpiStarted:
    """What start_mpi() did: MPI up, the ranks met and agreed, each on its cores; JAX untouched."""
    rank: int
    size: int
    family: str
    level: str
    choice: object
    tunings: tuple
    settings: object
    gpu_ids: object
    implementation: str
    placements: list = None  # where the ranks sit (the layout note, said when JAX starts)


_STARTED = None
_MPI_STARTED = None
_START_LOCK = threading.Lock()
_STARTING = threading.local()  # .now: this thread is inside start_up() (which imports jax)


def starting_here() -> bool:
    """Is this thread inside start_up()? Its `import jax` then is the start's own (the pytest
    plugin's import hook must not start JAX again from inside it)."""
    return getattr(_STARTING, "now", False)


def start_mpi(settings, *, collectives="mpi") -> MpiStarted:
    """The part of start_up() that needs no JAX, once per process: the pytest plugin's start for a
    suite that has not imported JAX yet (JAX's part follows at its first `import jax`:
    docs/testing.md), and the first half of every start_up()."""
    global _MPI_STARTED, _ASKED
    _ASKED = True
    with _START_LOCK:
        if _MPI_STARTED is None:
            _MPI_STARTED = _start_mpi(settings, collectives)
        return _MPI_STARTED


def mpi_started() -> "MpiStarted | None":
    """What start_mpi() did in this process, if it ran (start_up() runs it)."""
    return _MPI_STARTED


def start_up(settings, *, collectives="mpi") -> Started:
    """Everything before jax.distributed.initialize, once per process:
    initialize() calls it, and so does the cluster environment (cluster.py)
    when a program calls jax.distributed.initialize() itself, so that both
    get the same checks, tunings, float16 rules and device count.
    `collectives`: the value for JAX's jax_cpu_collectives_implementation;
    None keeps what the environment names (the cluster environment's way:
    a user who exported gloo gets gloo), "mpi" when it names nothing.
    Where start_mpi() ran already (the pytest plugin's start), its part is not run again."""
    global _STARTED, _MPI_STARTED, _ASKED
    _ASKED = True
    with _START_LOCK:
        if _STARTED is None:
            _check_jax_version()
            if _backend_exists():
                raise InitializeError(too_late_message())
            if _MPI_STARTED is None:
                _MPI_STARTED = _start_mpi(settings, collectives)
            _STARTING.now = True
            try:
                _STARTED = _start_jax(_MPI_STARTED, collectives)
            finally:
                _STARTING.now = False
        return _STARTED


def _start_mpi(settings, collectives) -> MpiStarted:
    users_node_path = library_settings.users_node_path(settings)  # before the export below
    environ_before = dict(os.environ)  # what you set, for the listing of the settings in force below
    _check_native_settings(settings)
    # A misspelt setting, or a tuning file that is not there, changes nothing: say so, on every rank, with
    # the rank and host that say it (one rank's environment may differ from the others').
    here = f"mpi-collectives [{launchers.where()} on {socket.gethostname()}]: "
    for line in _settings.unknown_variables() + library_settings.missing_file_lines(settings):
        say_line(here + line[len("mpi-collectives: "):])
    _check_jax_can_use_us()
    os.environ.setdefault("JAX_CPU_COLLECTIVES_IMPLEMENTATION", "mpi")

    family = mpi.family()
    if family == "none":
        raise InitializeError("mpi-collectives: " + mpi.not_loaded_message())
    # Before MPI and JAX allocate: their buffers are served the same way.
    tunings = [tuning.keep_freed_memory(settings.keep_memory)]
    tunings.append(tuning.one_arena(tunings[0]))
    mpi_settings = library_settings.set_for_this_process(settings)  # MPI_Init reads them
    tunings.append(mpi_settings)
    mpi.note_for_init_crash(job_choices.init_crash_note(mpi_settings))
    level = mpi.thread_level_name(init_mpi_or_end_job(settings))
    rank, size = mpi.rank_size()
    log(f"MPI initialized: {mpi.library()} ({family} ABI), thread level {level}")
    # Before JAX's coordinator opens a connection a rank on rank 0 (open_files.py).
    room, warning, error = open_files.make_room(rank, size)
    if error:
        end_job(f"mpi-collectives: {error}.")
    if warning:
        say_line(f"mpi-collectives: warning: {warning}.")
    tunings.append(room)
    try:
        choice = meeting.meet(rank, size, settings)
    except InitializeError:
        raise  # rank 0's answer: every rank raises the same error
    except Exception as e:  # this rank alone: the others must not wait for it
        end_job(f"rank {rank}/{size}: initialize() failed while meeting the other ranks: "
                f"{type(e).__name__}: {e}. Fix: see the error; every rank of the job has been stopped.")
    log(f"coordinator {choice.address}, listening on {choice.bind or 'every interface'}")
    # Before the first collective of the job (binding's exchange below, then JAX's): ranks that
    # chose differently would hang in it.
    implementation = collectives or os.environ["JAX_CPU_COLLECTIVES_IMPLEMENTATION"]
    # The tuning file's node path before the comparison, which compares the values the native layer
    # gets below: ranks whose entries differ (nodes of different kinds sharing one file, a file of each
    # rank's own) would otherwise pass it and wait in different calls at the first collective.
    node_path, node_path_line = library_settings.node_path_for_this_process(settings, users_node_path)
    mine = job_choices.this_rank(settings, level, implementation, mpi_settings, node_path=node_path,
                                 users_node_path=users_node_path)
    differ = job_choices.agree(rank, size, mine, float(settings.timeout))
    if differ:
        raise InitializeError("mpi-collectives: " + differ)
    # Before JAX creates its backend, whose thread pool takes this thread's CPU set.
    # Where the ranks sit, as the launcher started them: one exchange for the binding and the note.
    placements, bound = bind_this_rank(rank, size, settings)
    tunings.append(bound)
    # Before JAX's backend, so before XLA's first collective (the native layer makes a window at the first it takes).
    if node_path:
        mpi.set_node_path(*node_path)
        mpi.set_node_crowded(layout.oversubscribed(placements, rank))
    tunings.append(node_path_line)
    gpu_ids, line = gpus.decide(rank, size, settings.local_device_ids, mpi.allgather)
    tunings.append(line)
    tunings = tuple(line for line in tunings if line)
    for line in tunings:
        log(line)
    if rank == 0 and settings.verbose >= 1:  # every setting in force and where it came from, as `env` shows
        tuned = library_settings.from_tuning_file(settings, environ_before)
        for var, shown, source, _ in _settings.in_force(settings, tuned, environ_before):
            log(f"{var}={shown} ({source})")
    return MpiStarted(rank=rank, size=size, family=family, level=level, choice=choice, tunings=tunings,
                      settings=settings, gpu_ids=gpu_ids, implementation=implementation, placements=placements)


def _start_jax(m: MpiStarted, collectives) -> Started:
    """start_up()'s JAX part, after start_mpi(): JAX's options, the float16 rules, the device count."""
    # The layout note at JAX's start, not MPI's: the layouts it speaks of are JAX programs', and a pytest
    # suite that never imports jax (MPI started by the plugin alone) printed it at every launch (issue 80).
    _layout_note(m.rank, m.placements or [], m.settings.layout_note)
    import jax
    # jax before 0.4.3x reads the option only from its config, not the environment.
    jax.config.update("jax_cpu_collectives_implementation", m.implementation)
    jax_compat.quiet_launchers_proxy_warning()  # before jax.distributed.initialize checks
    narrow_dtypes.install()  # float16/float8 collectives, which XLA refuses over MPI
    # A process forked from this rank must not end the job as it exits (jax_compat says how it did).
    os.register_at_fork(after_in_child=jax_compat.forget_jax_exit_in_a_forked_child)
    devices = _agree_on_local_devices(m.rank, m.size, m.level)
    return Started(rank=m.rank, size=m.size, family=m.family, level=m.level, choice=m.choice, tunings=m.tunings,
                   devices=devices, settings=m.settings, finish_at_backend_start=collectives is None,
                   gpu_ids=m.gpu_ids)


def _layout_note(rank: int, placements: list, enabled: int) -> None:
    """Once a job, from rank 0, where a node holds more ranks than it has sockets or NUMA domains:
    what was measured for each class of program and `mpi-collectives layouts` to measure one's own
    (layout.advice). Said by default because the layout is the first performance choice a user
    makes, and it goes both ways (a dense step on a 16-core node: 32 ms as one rank, 99-336 ms as
    2-16; NetKet's Monte Carlo sampling on 2 cores: 20 ms as 2 ranks, 31 as one), and a job script
    that splits a node gives no other sign of it; one line from one rank, and
    MPI_COLLECTIVES_LAYOUT_NOTE=0 for programs that chose their layout."""
    line = layout.advice(placements)
    log(f"layout: {'; '.join(layout.describe(placements))}")
    if rank == 0 and enabled and line:
        say_line(f"mpi-collectives: note: {line}. MPI_COLLECTIVES_LAYOUT_NOTE=0 silences this line.")


def started() -> "Started | None":
    """What start_up() did in this process, if it ran."""
    return _STARTED


def info() -> "Info | None":
    """What initialize() set up in this process, if it ran."""
    return _INFO


def bind_this_rank(rank: int, size: int, settings) -> tuple:
    """(every rank's placement, what binding did, in words): each rank on its own slice of its node's
    CPUs, before JAX's backend makes its threads. Collective: every rank calls it at once, whatever
    its setting. initialize() and a program that started jax.distributed itself (plain_programs) both."""
    placements = layout.gather(size, mpi.allgather)
    bind, source = library_settings.binding_for_this_process(settings)
    return placements, tuning.bind_cpus(rank, placements, bind, bind_callers=mpi.bind_callers, source=source)


def finish(started: Started) -> None:
    """The steps after jax.distributed.initialize has joined the ranks."""
    finish_steps(started.rank, started.size, started.settings, started.choice.address)


def finish_steps(rank: int, size: int, settings, job: str) -> None:
    """What every program over MPI gets once jax.distributed has joined the ranks and MPI is up,
    however it started JAX (initialize(), the cluster environment, or its own arguments to
    jax.distributed.initialize: plain_programs.py). `job`: a text the ranks of this job share
    and no other job does (the coordinator's address)."""
    # JAX's distributed runtime catches SIGTERM and computes on; a job asked
    # to stop (launcher, scancel, timeout) must stop.
    mpi.stop_on_sigterm(rank, size)
    preemption.watch_sync_point(rank, size, int(settings.preemption_grace))  # unless it saves on SIGTERM
    if settings.abort_on_exception:
        exit_hooks.abort_on_uncaught_exceptions(rank, size)
    if size > 1:
        # Where every rank is, for the watchers below: one allgather, every rank whatever its settings.
        stalls = stall.wanted(float(settings.stall_report), float(settings.stall_timeout))
        address, port = liveness.listen(rank, job) if stalls else ("", 0)
        ranks = ranks_table.exchange(rank, size, peers.life_pipe(bool(settings.watch_peers)), address, port)
        peers.watch(rank, size, float(settings.exit_timeout), job, ranks, enabled=bool(settings.watch_peers))
    # Registered last, so run first at the end of the main thread: while the watchers still watch.
    exit_hooks.wait_for_computations_at_exit(_backend_exists)
    if size > 1:
        stall.watch(rank, size, float(settings.stall_report), float(settings.stall_timeout), ranks)
    mpi.set_finalize_waits(float(settings.stall_report), float(settings.stall_timeout))


def initialize(*, libmpi: str = None, abi: str = None, thread_level: str = None, any_thread: int = None,
               check_splits: int = None, check_collectives: int = None, node_path: int = None,
               node_path_collectives: str = None, node_path_min: int = None, node_path_max: int = None,
               node_path_across_nodes: int = None, node_path_direct: int = None, node_path_round: int = None,
               devices_timeout: int = None,
               verbose: int = None, trace_dir: str = None, prefixes: str = None, coordinator: str = None,
               port: int = None, interface: str = None, timeout: int = None, abort_on_exception: int = None,
               watch_peers: int = None, exit_timeout: int = None, stall_report: int = None,
               stall_timeout: int = None, preemption_grace: int = None,
               local_device_ids: str = None, bind_cpus: int = None, mpi_settings: int = None,
               tuning_file: str = None, keep_memory: int = None, not_initialized: str = None,
               layout_note: int = None) -> Info:
    """Make JAX's CPU collectives run over MPI in this process; call it on every rank,
    before the first JAX computation.

    Initializes MPI (the library the launcher's MPI installation provides), takes
    rank and size from it, has the ranks agree on a coordinator, and joins
    `jax.distributed` through it. Each keyword argument overrides the environment
    variable of the same setting (`mpi_collectives.base.settings.TABLE`, listed in
    docs/configuration.md: `timeout` is `MPI_COLLECTIVES_INIT_TIMEOUT`, the others
    `MPI_COLLECTIVES_<NAME>`); None keeps the environment's value or the default.
    The settings the native layer reads (`libmpi`, `abi`, `thread_level`,
    `any_thread`, `check_splits`, `check_collectives`, `node_path`,
    `node_path_collectives`, `node_path_min`, `node_path_max`, `node_path_across_nodes`,
    `node_path_direct`, `node_path_round`, `devices_timeout`, `verbose`, `trace_dir`, `prefixes`) must come before `import jax`.

    Returns an `Info`; a second call returns the first one's. Raises
    `InitializeError` with one sentence naming the cause and the fix.
    """
    global _INFO, _ASKED
    _ASKED = True
    if _INFO is not None:
        return _INFO
    given = {name: value for name, value in locals().items() if name in _settings.TABLE and value is not None}
    with ending.launch_ends_if_start_up_fails():
        started = start_up(_settings.read(**given))
    rank, size, choice = started.rank, started.size, started.choice
    address = choice.address
    import jax
    if rank != 0:
        _coordinator.wait_until_listening(address, float(started.settings.timeout))
    try:
        gpu = {"local_device_ids": started.gpu_ids} if started.gpu_ids is not None else {}
        jax.distributed.initialize(coordinator_address=address, num_processes=size, process_id=rank,
                                   initialization_timeout=int(started.settings.timeout), **gpu,
                                   **_coordinator.bind_argument(choice, jax.distributed.initialize))
    except Exception as e:  # JAX's own errors are long; lead with the cause and the fix
        message = (f"rank {rank}/{size} could not join jax.distributed through the coordinator "
                   f"{address}: {str(e).splitlines()[0] if str(e) else type(e).__name__}. Fix: if the ranks "
                   "are on several nodes, set MPI_COLLECTIVES_INTERFACE to a network interface they share "
                   "(or MPI_COLLECTIVES_COORDINATOR=host:port).")
        if size > 1:  # the ranks that did join would wait for this one
            end_job(message)
        raise InitializeError("mpi-collectives: " + message) from e
    _INFO = Info(rank=rank, size=size, library=mpi.library(), family=started.family, thread_level=started.level,
                 coordinator=address, wrapper=libpath(), tunings=started.tunings, local_devices=started.devices)
    finish(started)
    return _INFO

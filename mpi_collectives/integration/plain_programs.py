"""What a program that sets JAX up itself gets: the help initialize() gives,
at the moment JAX starts its backends.

A program that exports MPITRAMPOLINE_LIB and
JAX_CPU_COLLECTIVES_IMPLEMENTATION=mpi and calls jax.distributed.initialize()
with its own arguments (JAX's own test harness does) never calls
initialize(). JAX calls the package's plugin hook (mpi_collectives_jax_plugin,
registered under the `jax_plugins` entry-point group) when its backends
start, after jax.distributed has joined the ranks and before XLA creates its
MPI communicators; at that moment, for such a program, this module
- installs the float16/float8 lowering rules (narrow_dtypes), which XLA
  would otherwise refuse over MPI;
- tells the native layer the number of CPU devices per process that JAX's
  configuration holds, including one set in code with
  jax.config.update('jax_num_cpu_devices', N) (the native layer reads the
  environment's own when it is loaded);
- runs the steps initialize() takes after the join (SIGTERM, uncaught
  exceptions, watching the ranks, the stall report): for a program started
  through the cluster environment (cluster.py), which ran initialize()'s
  start-up, at once; for one that called jax.distributed.initialize() with
  its own arguments, after starting MPI here, as XLA would a moment later
  (the native layer then answers XLA's own MPI_Init_thread), and its
  ranks compare their settings as initialize()'s do (job_choices).
It does nothing when JAX's MPI is not this package's wrapper.
"""
import os
import threading

from . import jax_compat, jax_setup, narrow_dtypes
from ..services import job_choices, layout, library_settings
from ..base import mpi
from ..base.launchers import launcher_rank_size
from ..base import settings as _settings
from ..base.ending import end_job
from ..base.errors import InitializeError, error_line
from ..base.log import line as say_line, log

_done = False
_lock = threading.Lock()


def at_backend_start() -> None:
    global _done
    with _lock:
        if _done:
            return
        _done = True
    if not mpi.trampoline_attached():
        return  # JAX's MPI is another wrapper (or none): nothing of ours to help
    narrow_dtypes.install()
    _tell_local_devices()
    started = jax_setup.started()
    if started is not None and started.finish_at_backend_start:
        jax_setup.finish(started)  # the cluster environment's start; initialize() finishes its own
    elif started is None:
        _finish_own_start()


_checked = False
_module_being_imported = None  # set by check_joined, from the plugin hook
_told = False
_computed_in_an_import = False
_run_without_initialize = None  # the target of `mpi-collectives run` without --initialize, if that started us


def launched_by_run(target: str) -> None:
    """`mpi-collectives run TARGET` without --initialize started this process: a rank that then runs
    JAX alone is told that --initialize is what makes the script one job."""
    global _run_without_initialize
    _run_without_initialize = target


def check_joined(module_being_imported=lambda: None) -> None:
    """At backend start in any process that imported the package: a launcher started it as one of N > 1
    ranks, and JAX may be starting as one process of one (initialize() never called, nor
    jax.distributed.initialize()). Every collective then reduces this rank's own data alone and
    returns without a word, so each rank is told, in one line, per MPI_COLLECTIVES_NOT_INITIALIZED:
    warn (the default: programs that run JAX alone on each rank beside mpi4py exist, and stopping
    them would break what works), stop, or quiet.

    Not said here: a library that starts JAX's backend when imported (`import netket` does) starts
    it a line before the program calls initialize(), which then says so itself (too late, and why).
    The line waits for the first JAX compilation outside an import (JAX's monitoring events: the
    first computation compiles), or the end of the program where every computation ran inside
    imports, and is said only if initialize() has still not been asked by then."""
    global _checked, _module_being_imported
    with _lock:
        if _checked:
            return
        _checked = True
    # The hook's frame walk (mpi_collectives_jax_plugin.module_being_imported), given by the hook: calls go
    # from the hook down to this module, never back up.
    _module_being_imported = module_being_imported
    if jax_setup.asked() or launcher_rank_size()[1] < 2 or _joined_by_jax():
        return
    try:
        from jax import monitoring
        monitoring.register_event_duration_secs_listener(_at_a_compilation)
    except Exception:  # a jax without JAX's monitoring events: say it now, as before the computation
        _tell_if_alone()
        return
    import atexit
    atexit.register(_at_exit)


def _at_a_compilation(event, *args, **kwargs) -> None:
    """JAX's monitoring listener: the first compilation outside an import decides."""
    global _computed_in_an_import
    if _told:
        return
    if _module_being_imported() is not None:  # a library computing as it is imported: not yet
        _computed_in_an_import = True
        return
    _tell_if_alone()


def _at_exit() -> None:
    if _computed_in_an_import:  # every computation ran inside imports: still alone, say so once
        _tell_if_alone()


def _joined_by_jax() -> bool:
    """jax.distributed.initialize() has joined this process to others (or there is no telling)."""
    try:
        from jax._src import distributed
        return distributed.global_state.client is not None
    except Exception:  # a jax without it: nothing to tell
        return True


def _tell_if_alone() -> None:
    global _told
    with _lock:
        if _told:
            return
        _told = True
    if jax_setup.asked() or _joined_by_jax():  # initialize() came after all: it speaks for itself
        return
    rank, size = launcher_rank_size()
    if size < 2:
        return
    try:
        mode = _settings.read().not_initialized
    except InitializeError as e:  # a bad value: every rank meets it alike
        say_line(error_line(str(e)))
        os._exit(1)
    if mode == "quiet":
        return
    if _run_without_initialize is not None:
        fix = (f"Fix: launch it as `mpi-collectives run --initialize {_run_without_initialize}` (without "
               "--initialize, `run` only sets up the import order, for a script that calls initialize() itself), "
               "or call mpi_collectives.initialize() in the script before its first JAX computation")
    else:
        fix = ("Fix: call mpi_collectives.initialize() before the first JAX computation (or run the script "
               "with `mpi-collectives run --initialize script.py`)")
    text = (f"rank {rank} of {size} (as the launcher started it) runs JAX as one process of one: initialize() was "
            f"not called before its first JAX computation, so its collectives reach no other rank and each rank "
            f"computes alone. {fix}; MPI_COLLECTIVES_NOT_INITIALIZED=quiet where each rank runs JAX alone on "
            "purpose.")
    if mode == "stop":  # JAX's plugin discovery catches exceptions, a listener's would land in a compilation:
        # only an exit stops the program, the same wherever the line is said
        say_line(error_line(text))
        os._exit(1)
    say_line("mpi-collectives: " + text)


def _finish_own_start() -> None:
    """A program that called jax.distributed.initialize() with its own arguments and runs JAX's
    collectives over MPI: MPI is started now, on every rank (XLA would start it right after, when
    it makes the CPU client), and the program gets what initialize() gives after the join."""
    try:
        from jax._src import distributed
        state = distributed.global_state
    except Exception:  # a jax without it: nothing joined to watch
        return
    processes = getattr(state, "num_processes", None) or 1
    if state.client is None or processes < 2 or jax_compat.collectives_implementation() != "mpi":
        return
    try:
        settings = _settings.read()
    except InitializeError as e:  # a bad MPI_COLLECTIVES_* value: every rank meets it alike
        end_job(str(e).removeprefix("mpi-collectives: "))
    line = library_settings.set_for_this_process(settings)  # before MPI_Init reads them
    if line:
        log(line)
    level = mpi.thread_level_name(jax_setup.init_mpi_or_end_job(settings))
    rank, size = mpi.rank_size()
    differ = job_choices.agree(rank, size, job_choices.this_rank(settings, level, "mpi", line),
                               float(settings.timeout))
    if differ:  # every rank has the line: XLA's first collective would hang or fail
        end_job(differ)
    # Each rank on its own cores, as initialize() binds them, before XLA's CPU client makes its thread
    # pool (this hook runs first): unbound, the README's existing script ran 1.28x slower than the same
    # job through initialize() (issue 74).
    placements, bound = jax_setup.bind_this_rank(rank, size, settings)
    log(bound)
    mpi.set_node_crowded(layout.oversubscribed(placements, rank))  # the node path's waits (round.c)
    log(f"a program that started jax.distributed itself: rank {rank}/{size}, SIGTERM, stall report and "
        "peer watch on")
    jax_setup.finish_steps(rank, size, settings, str(getattr(state, "coordinator_address", "")))


def _tell_local_devices() -> None:
    devices = jax_compat.configured_cpu_devices()
    try:
        jax_setup.check_local_devices(devices)
    except InitializeError as e:  # every rank meets it alike: each ends with the sentence
        end_job(str(e).removeprefix("mpi-collectives: "))
    if devices > 1:
        mpi.set_local_devices(devices)
        log(f"{devices} CPU devices per process (JAX's configuration at backend start)")

"""initialize(): jax.distributed from MPI, so JAX's collectives run over MPI.

    import mpi_collectives
    mpi_collectives.initialize()
    import jax

Every rank: load MPI through the native layer (the library jaxlib's
MPItrampoline uses too), initialize it, take rank and size from MPI, meet the
other ranks (rank 0 checks that all run the same versions and picks the
coordinator: its own address and a port it has just bound), then call
jax.distributed.initialize with what rank 0 sent.
"""
import dataclasses
import importlib.metadata
import os
import socket
import sys
import time

import numpy as np

from . import mpi, peers, settings as _settings
from ._paths import libpath
from .log import log

RECORD = 512  # bytes of each rank's hello, and of rank 0's answer
TAG_HELLO, TAG_ANSWER = 7301, 7302


class InitializeError(RuntimeError):
    """A problem with the set-up; the message names the cause and the fix."""


@dataclasses.dataclass(frozen=True)
class Info:
    rank: int
    size: int
    library: str
    family: str
    thread_level: str
    coordinator: str
    wrapper: str


_INFO = None


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


def _check_jax_can_use_us() -> None:
    """jaxlib reads MPITRAMPOLINE_LIB once, when `import jax` loads it."""
    ours = libpath()
    if not _jax_loaded():
        os.environ["MPITRAMPOLINE_LIB"] = ours
        return
    from ._mpiabi import lib
    if lib.mpic_trampoline_attached():
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
    """Settings the native layer reads when loaded cannot change afterwards."""
    loaded = "mpi_collectives._mpiabi" in sys.modules or _jax_loaded()
    for name, (var, _, native, _) in _settings.TABLE.items():
        wanted = getattr(settings, name)
        if not native or wanted in (None, "") or str(wanted) == os.environ.get(var, str(wanted)):
            continue
        if loaded:
            raise InitializeError(
                f"mpi-collectives: initialize({name}={wanted!r}) comes after the native layer was loaded "
                f"with {var}={os.environ.get(var)!r}. Fix: set {var} in the environment before starting "
                "Python, or call initialize() before importing jax.")
    _settings.export_native(settings)


def _hello(rank: int) -> np.ndarray:
    versions = {pkg: _version(pkg) for pkg in ("mpi-collectives", "jax", "jaxlib")}
    text = "|".join([socket.gethostname(), str(os.getpid())] + [f"{k}={v}" for k, v in versions.items()])
    return _record(text)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _record(text: str) -> np.ndarray:
    data = text.encode()[: RECORD - 1]
    out = np.zeros(RECORD, np.uint8)
    out[: len(data)] = np.frombuffer(data, np.uint8)
    return out


def _text(record: np.ndarray) -> str:
    return bytes(record).split(b"\0", 1)[0].decode(errors="replace")


def _wait(requests, timeout: float) -> list:
    """Poll requests until all complete or the timeout passes; the indices still pending."""
    deadline = time.monotonic() + timeout
    pending = list(range(len(requests)))
    while pending and time.monotonic() < deadline:
        pending = [i for i in pending if not mpi.test(requests[i][0])]
        if pending:
            time.sleep(0.002)
    return pending


def _fail_everywhere(message: str) -> None:
    """Say it on this rank, then end the whole job (other ranks may be waiting)."""
    peers.quiet()
    print(message, file=sys.stderr, flush=True)
    time.sleep(1)  # let the launcher forward the line before MPI_Abort tears the job down
    mpi.abort(1)
    os._exit(1)


def _meet(rank: int, size: int, settings) -> str:
    """Every rank says hello to rank 0; rank 0 checks them and answers with the coordinator."""
    timeout = float(settings.timeout)
    if rank != 0:
        send = mpi.isend(_hello(rank), 0, TAG_HELLO)
        answer = mpi.irecv(np.zeros(RECORD, np.uint8), 0, TAG_ANSWER)
        if _wait([answer], timeout):
            _fail_everywhere(
                f"mpi-collectives: error: rank {rank}/{size} waited {timeout:.0f} s for rank 0 in "
                "initialize(): rank 0 never called it (or died). Fix: call mpi_collectives.initialize() "
                "on every rank, or raise MPI_COLLECTIVES_INIT_TIMEOUT if rank 0 is just slow.")
        _wait([send], timeout)
        text = _text(answer[1])
        if text.startswith("ERR|"):
            raise InitializeError(text[4:])
        return text[3:]

    hellos = [mpi.irecv(np.zeros(RECORD, np.uint8), r, TAG_HELLO) for r in range(1, size)]
    missing = _wait(hellos, timeout)
    if missing:
        ranks = ", ".join(str(i + 1) for i in missing)
        _fail_everywhere(
            f"mpi-collectives: error: after {timeout:.0f} s in initialize(), rank(s) {ranks} of {size} had "
            "not called it. Fix: call mpi_collectives.initialize() on every rank, or raise "
            "MPI_COLLECTIVES_INIT_TIMEOUT if they are just slow to start.")
    records = [_text(_hello(0))] + [_text(h[1]) for h in hellos]
    answer = _check_peers(records, size)
    if answer is None:
        try:
            answer = "OK|" + _choose_coordinator(records, settings)
        except InitializeError as e:
            answer = "ERR|" + str(e)
    sends = [mpi.isend(_record(answer), r, TAG_ANSWER) for r in range(1, size)]
    _wait(sends, timeout)
    if answer.startswith("ERR|"):
        raise InitializeError(answer[4:])
    return answer[3:]


def _check_peers(records, size):
    """An "ERR|..." answer when ranks run different versions, else None."""
    fields = [r.split("|")[2:] for r in records]
    if all(f == fields[0] for f in fields):
        return None
    odd = [i for i, f in enumerate(fields) if f != fields[0]]
    return ("ERR|mpi-collectives: ranks run different versions: rank 0 has " + ", ".join(fields[0])
            + "; " + "; ".join(f"rank {i} has {', '.join(fields[i])}" for i in odd[:8])
            + ". Fix: install the same mpi-collectives, jax and jaxlib on every node (one venv on a shared filesystem).")


def _interface_address(name: str) -> str:
    import fcntl
    import struct
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
        except OSError as e:
            raise InitializeError(
                f"mpi-collectives: MPI_COLLECTIVES_INTERFACE={name}: no IPv4 address on that interface ({e}). "
                f"Fix: name one of {', '.join(n for _, n in socket.if_nameindex())}.") from None
    return socket.inet_ntoa(packed[20:24])


def _port_is_free(port: int) -> bool:
    """Can JAX's coordinator service bind this port? (It binds every interface.)"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


def _choose_coordinator(records, settings) -> str:
    """Rank 0's address and a port it has just bound (so jobs sharing a node cannot collide).

    Raises InitializeError when a port given by the user is taken: JAX's
    coordinator service crashes (SIGSEGV) instead of reporting it.
    """
    given = settings.coordinator or (settings.port and f"?:{settings.port}")
    if given:
        port = int(str(given).rsplit(":", 1)[1])
        if not _port_is_free(port):
            raise InitializeError(
                f"mpi-collectives: the coordinator port {port} (from "
                f"{'MPI_COLLECTIVES_COORDINATOR' if settings.coordinator else 'MPI_COLLECTIVES_PORT'}) "
                "is already in use on rank 0's host. Fix: choose a free port, or unset it and let rank 0 "
                "pick one.")
    if settings.coordinator:
        return settings.coordinator
    hosts = {r.split("|")[0] for r in records}
    if settings.interface:
        address = _interface_address(settings.interface)
    elif len(hosts) == 1:
        address = "127.0.0.1"
    else:
        address = socket.gethostbyname(socket.gethostname())
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", int(settings.port)))  # every interface, as JAX's service will
        port = s.getsockname()[1]
    return f"{address}:{port}"


def _wait_for_coordinator(coordinator: str, timeout: float) -> None:
    """Return once rank 0's coordinator accepts connections (or after `timeout`).

    The ranks leave _meet together, so the others' first connection often
    comes before rank 0's jax.distributed service listens; JAX's client then
    backs off for about a second, which made start-up a second slower than
    gloo's in half the launches. A refused TCP connection costs nothing, so
    poll. A coordinator that never comes up is left to jax.distributed's own
    timeout and our message about it."""
    host, _, port = coordinator.rpartition(":")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=1).close()
            return
        except OSError:
            time.sleep(0.005)


def _init_mpi_or_exit(settings) -> int:
    """MPI_Init waits for every process of the job (the launcher's PMI fence),
    so a process that never gets here makes it hang: a watchdog says so."""
    import threading

    def give_up():
        print(f"mpi-collectives: error: MPI_Init did not complete within {settings.timeout} s: some "
              "process of this job never initialized MPI (it never called initialize(), or died "
              "before). Fix: call mpi_collectives.initialize() on every rank, or raise "
              "MPI_COLLECTIVES_INIT_TIMEOUT if startup is just slow.", file=sys.stderr, flush=True)
        os._exit(1)

    watchdog = threading.Timer(float(settings.timeout), give_up)
    watchdog.daemon = True
    watchdog.start()
    try:
        return mpi.init()
    finally:
        watchdog.cancel()


def initialize(**kwargs) -> Info:
    """Make JAX's CPU collectives run over MPI in this process; call it on every rank.

    Keyword arguments override the environment variables of
    mpi_collectives.settings.TABLE. A second call returns the first one's Info.
    """
    global _INFO
    if _INFO is not None:
        return _INFO
    settings = _settings.read(**kwargs)
    if _backend_exists():
        raise InitializeError(
            "mpi-collectives: initialize() was called after JAX created its backend, so JAX's collectives "
            "are already set up without MPI. Fix: call mpi_collectives.initialize() before the first JAX "
            "computation (right after the imports).")
    _check_native_settings(settings)
    _check_jax_can_use_us()
    os.environ.setdefault("JAX_CPU_COLLECTIVES_IMPLEMENTATION", "mpi")

    family = mpi.family()
    if family == "none":
        raise InitializeError(
            "mpi-collectives: no MPI library could be loaded (" + mpi.load_report().strip()
            + "). Fix: set MPI_COLLECTIVES_LIBMPI to the full path of your MPI's libmpi.so, or `pip install mpich`.")
    level = mpi.thread_level_name(_init_mpi_or_exit(settings))
    rank, size = mpi.rank_size()
    log(f"MPI initialized: {mpi.library()} ({family} ABI), thread level {level}")
    coordinator = _meet(rank, size, settings)
    log(f"coordinator {coordinator}")

    import jax
    jax.config.update("jax_cpu_collectives_implementation", "mpi")
    if rank != 0:
        _wait_for_coordinator(coordinator, float(settings.timeout))
    try:
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=size, process_id=rank,
                                   initialization_timeout=int(settings.timeout))
    except Exception as e:  # JAX's own errors are long; lead with the cause and the fix
        raise InitializeError(
            f"mpi-collectives: rank {rank}/{size} could not join jax.distributed through the coordinator "
            f"{coordinator}: {str(e).splitlines()[0] if str(e) else type(e).__name__}. Fix: if the ranks "
            "are on several nodes, set MPI_COLLECTIVES_INTERFACE to a network interface they share "
            "(or MPI_COLLECTIVES_COORDINATOR=host:port).") from e
    _INFO = Info(rank=rank, size=size, library=mpi.library(), family=family, thread_level=level,
                 coordinator=coordinator, wrapper=libpath())
    if settings.abort_on_exception:
        _abort_on_uncaught_exceptions(rank, size)
    if settings.watch_peers:
        peers.watch(rank, size, float(settings.exit_timeout), coordinator)
    return _INFO


def _abort_on_uncaught_exceptions(rank: int, size: int) -> None:
    """A rank that dies of an exception would leave the others waiting in
    their next collective (and JAX's shutdown waits for them too): say which
    rank failed, then end the whole job."""
    import threading
    import traceback

    def die(kind, exc, tb, where="the main thread"):  # (SystemExit never reaches an excepthook)
        peers.quiet()
        traceback.print_exception(kind, exc, tb)
        print(f"mpi-collectives: error: rank {rank}/{size} stopped on an uncaught {kind.__name__} in {where} "
              f"(above); ending the whole job with MPI_Abort so that no rank waits for it. "
              "(MPI_COLLECTIVES_ABORT_ON_EXCEPTION=0 turns this off.)", file=sys.stderr, flush=True)
        time.sleep(1)  # let the launcher forward the lines before the job is torn down
        mpi.abort(1)
        os._exit(1)

    sys.excepthook = die
    threading.excepthook = lambda a: die(a.exc_type, a.exc_value, a.exc_traceback, f"thread {a.thread.name}")


def prepare(mesh) -> None:
    """Create the MPI communicators of every group of devices `mesh` can use
    (each subset of its axes), in one fixed order, from this thread.

    Not needed when every process runs the same jitted programs in the same
    order (the usual SPMD program). Call it, on every process, when processes
    may first use a mesh's axes in different orders (rank-dependent control
    flow, collectives dispatched from several threads): XLA creates each
    group's communicator on first use, and creation must happen in the same
    order everywhere.
    """
    import itertools

    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    names = tuple(mesh.axis_names)
    x = jax.device_put(np.zeros(mesh.devices.shape, np.int32), NamedSharding(mesh, P(*names)))
    for k in range(1, len(names) + 1):
        for axes in itertools.combinations(names, k):
            f = jax.jit(jax.shard_map(lambda v, axes=axes: jax.lax.psum(v, axes), mesh=mesh,
                                      in_specs=P(*names), out_specs=P(*names)))
            f(x).block_until_ready()

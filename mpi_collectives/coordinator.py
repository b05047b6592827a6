"""Where jax.distributed's coordinator runs: rank 0's address on an
interface the ranks share and a port rank 0 has just found free, and waiting
until it listens."""
import socket
import time

from .errors import InitializeError


def interface_address(name: str) -> str:
    """The IPv4 address of network interface `name` (e.g. ib0)."""
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


def port_is_free(port: int) -> bool:
    """Can JAX's coordinator service bind this port? (It binds every interface.)"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


def choose(hosts, settings) -> str:
    """host:port for the coordinator, on rank 0: its address (127.0.0.1 when
    every rank is on its host, `hosts` being every rank's host name) and a port
    it has just bound (so jobs sharing a node cannot collide).

    Raises InitializeError when a port given by the user is taken: JAX's
    coordinator service crashes (SIGSEGV) instead of reporting it.
    """
    given = settings.coordinator or (settings.port and f"?:{settings.port}")
    if given:
        port = int(str(given).rsplit(":", 1)[1])
        if not port_is_free(port):
            raise InitializeError(
                f"mpi-collectives: the coordinator port {port} (from "
                f"{'MPI_COLLECTIVES_COORDINATOR' if settings.coordinator else 'MPI_COLLECTIVES_PORT'}) "
                "is already in use on rank 0's host. Fix: choose a free port, or unset it and let rank 0 "
                "pick one.")
    if settings.coordinator:
        return settings.coordinator
    if settings.interface:
        address = interface_address(settings.interface)
    elif len(set(hosts)) == 1:
        address = "127.0.0.1"
    else:
        address = socket.gethostbyname(socket.gethostname())
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", int(settings.port)))  # every interface, as JAX's service will
        port = s.getsockname()[1]
    return f"{address}:{port}"


def wait_until_listening(coordinator: str, timeout: float) -> None:
    """Return once the coordinator at host:port accepts connections (or after `timeout`).

    The ranks leave the meeting together, so the others' first connection
    often comes before rank 0's jax.distributed service listens; JAX's client
    then backs off for about a second, which made start-up a second slower
    than gloo's in half the launches. A refused TCP connection costs nothing,
    so poll. A coordinator that never comes up is left to jax.distributed's
    own timeout and initialize()'s message about it."""
    host, _, port = coordinator.rpartition(":")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=1).close()
            return
        except OSError:
            time.sleep(0.005)

"""Where jax.distributed's coordinator runs and listens: rank 0, on an address
every rank can reach, on a port rank 0 has just found free there; and waiting
until it listens.

JAX's coordination service has no authentication, so it listens only where it
must: on the loopback address when every rank shares rank 0's host, else on
the one address the ranks were told to use (jax.distributed.initialize's
`coordinator_bind_address`; JAX's own default is every interface).

Across hosts, rank 0 cannot know from its own side which of its addresses the
others reach (its host name may resolve to 127.0.1.1, as on a fresh Debian;
it may have several networks), so it asks them (meeting.py): it lists its
candidate addresses and listens on each, one rank per other host tries to
connect to each, and rank 0 takes the first that every one of them reached.
"""
import collections
import errno
import fcntl
import selectors
import socket
import struct
import threading
import time

from ..base.errors import InitializeError

SIOCGIFADDR = 0x8915
PROBE_TIMEOUT = 5.0  # seconds a rank tries to connect to rank 0's candidate addresses
GRACE = 0.5  # seconds the other addresses still get once one is reached
FIX = ("Fix: set MPI_COLLECTIVES_INTERFACE to a network interface every node shares (e.g. ib0, eth0), or "
       "MPI_COLLECTIVES_COORDINATOR=host:port to an address of rank 0's node that every node reaches.")

# address: what the ranks connect to (host:port); bind: where the service
# listens (host:port), or None for JAX's default (every interface).
Choice = collections.namedtuple("Choice", "address bind")


def interface_address(name: str) -> str:
    """The IPv4 address of network interface `name` (e.g. ib0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError as e:
            raise InitializeError(
                f"mpi-collectives: MPI_COLLECTIVES_INTERFACE={name}: no IPv4 address on that interface ({e}). "
                f"Fix: name one of {', '.join(n for _, n in socket.if_nameindex())}.") from None
    return socket.inet_ntoa(packed[20:24])


def is_loopback(address: str) -> bool:
    return address.startswith("127.")


def own_addresses() -> list:
    """This host's IPv4 addresses, loopback included, in interface order."""
    found = []
    for _, name in socket.if_nameindex():
        try:
            address = interface_address(name)
        except InitializeError:
            continue
        if address not in found:
            found.append(address)
    return found


def candidates() -> list:
    """The addresses of this host that another host might reach, best first:
    what the host name resolves to (the site's own choice) when that is not
    loopback, then every other interface's, loopback left out."""
    ordered = []
    try:
        ordered = [info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
    except OSError:
        pass
    ordered += own_addresses()
    out = []
    for address in ordered:
        if not is_loopback(address) and address not in out:
            out.append(address)
    return out


def _split(address: str):
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def port_is_free(port: int, host: str = "0.0.0.0") -> bool:
    """Can JAX's coordinator service bind this port on `host`, where it will listen?"""
    try:
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    except OSError:  # no IPv6 here: JAX's "[::]" then means every IPv4 address
        s, host = socket.socket(socket.AF_INET, socket.SOCK_STREAM), "0.0.0.0"
    with s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def _in_use(port, where, settings):
    return InitializeError(
        f"mpi-collectives: the coordinator port {port} (from "
        f"{'MPI_COLLECTIVES_COORDINATOR' if settings.coordinator else 'MPI_COLLECTIVES_PORT'}) "
        f"is already in use on rank 0's host ({where}). Fix: choose a free port, or unset it and let rank 0 "
        "pick one.")


class Listeners:
    """Listening sockets on one port, one per address: the port is then free on
    each (for JAX's service, once these close), and while they are open the
    other ranks can test that they reach each address. Accepted connections
    are reset at once, so that none lingers in TIME_WAIT on the port."""

    def __init__(self, addresses, port, settings):
        self.addresses = list(addresses)
        # set before the first try: a try whose second address finds the
        # first's port taken closes what it opened, and close() reads these
        self._stop = threading.Event()
        self._thread = None
        for attempt in range(50):
            self.sockets = []
            try:
                for i, address in enumerate(self.addresses):
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    self.sockets.append(s)
                    s.bind((address, port or (self.port if i else 0)))  # port 0: the first finds one
                    if i == 0:
                        self.port = s.getsockname()[1]
                    s.listen(1024)
                break
            except OSError:
                self.close()
                if port:
                    raise _in_use(port, ", ".join(self.addresses), settings) from None
        else:
            raise InitializeError(
                f"mpi-collectives: rank 0 found no port free on all of {', '.join(self.addresses)} in 50 tries. "
                "Fix: set MPI_COLLECTIVES_PORT to a free port, or MPI_COLLECTIVES_INTERFACE to one network.")

    def accept_in_background(self):
        def serve():
            with selectors.DefaultSelector() as selector:
                for s in self.sockets:
                    s.setblocking(False)
                    selector.register(s, selectors.EVENT_READ)
                while not self._stop.is_set():
                    for key, _ in selector.select(timeout=0.05):
                        try:
                            conn, _ = key.fileobj.accept()
                        except OSError:
                            continue
                        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        conn.close()
        self._thread = threading.Thread(target=serve, name="mpi-collectives-probe", daemon=True)
        self._thread.start()

    def close(self):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        for s in self.sockets:
            s.close()
        self.sockets = []


def reachable(addresses, port, timeout=PROBE_TIMEOUT) -> list:
    """Which of rank 0's `addresses` this process can open a TCP connection to
    on `port`: all tried at once; until one is reached, the others again every
    50 ms, for at most `timeout` seconds in all. Once one is reached, the
    others still unanswered (a firewall that drops) get GRACE seconds more."""
    result = [False] * len(addresses)
    deadline = time.monotonic() + timeout
    reached_at = None
    with selectors.DefaultSelector() as selector:
        while time.monotonic() < deadline:
            pending = {}
            for i, address in enumerate(addresses):
                if result[i]:
                    continue
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                if s.connect_ex((address, port)) in (0, errno.EINPROGRESS):
                    selector.register(s, selectors.EVENT_WRITE, i)
                    pending[i] = s
                else:
                    s.close()
            round_end = time.monotonic() + 0.05
            while pending:
                until = min(deadline, reached_at + GRACE) if any(result) else deadline
                events = selector.select(timeout=max(0.0, until - time.monotonic()))
                if not events:
                    break
                for key, _ in events:
                    i = key.data
                    # ECONNRESET: rank 0's listener accepted and reset the connection (Listeners does,
                    # so that none lingers) before this side looked: reached all the same
                    result[i] = key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) in (0, errno.ECONNRESET)
                    if result[i] and sum(result) == 1:
                        reached_at = time.monotonic()
                    selector.unregister(key.fileobj)
                    pending.pop(i).close()
            for s in pending.values():  # no answer in time
                selector.unregister(s)
                s.close()
            if any(result):  # every address has its answer from this round
                break
            time.sleep(max(0.0, min(round_end, deadline) - time.monotonic()))
    return result


def explicit(settings) -> Choice:
    """MPI_COLLECTIVES_COORDINATOR=host:port, as given; the service listens on
    that host's address when it is one of rank 0's own, else (an address that
    reaches rank 0 through a NAT, say) on every interface, as JAX would."""
    host, port = _split(settings.coordinator)
    try:
        resolved = socket.gethostbyname(host)
    except OSError:
        resolved = None
    mine = resolved is not None and (is_loopback(resolved) or resolved in own_addresses())
    where = resolved if mine else ("::" if socket.has_ipv6 else "0.0.0.0")  # JAX's default is [::]
    if not port_is_free(port, where):
        raise _in_use(port, where, settings)
    return Choice(settings.coordinator, f"{resolved}:{port}" if mine else None)


def on_one_host(settings) -> Choice:
    """Every rank on rank 0's host: the loopback address, or the named interface's."""
    address = interface_address(settings.interface) if settings.interface else "127.0.0.1"
    listeners = Listeners([address], int(settings.port), settings)
    port = listeners.port
    listeners.close()
    return Choice(f"{address}:{port}", f"{address}:{port}")


def across_hosts(settings) -> Listeners:
    """The addresses to offer the other hosts (the named interface's, else
    every candidate), already listening on one port."""
    if settings.interface:
        addresses = [interface_address(settings.interface)]
    else:
        addresses = candidates()
        if not addresses:
            raise InitializeError(
                f"mpi-collectives: rank 0's host ({socket.gethostname()}) has no network address but loopback "
                "(its name resolves to " + ", ".join(_resolve_own_name()) + "), so ranks on other nodes cannot "
                "reach the coordinator. " + FIX)
    return Listeners(addresses[:16], int(settings.port), settings)  # 16 fit in meeting.RECORD


def _resolve_own_name():
    try:
        return sorted({info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)})
    except OSError as e:
        return [f"nothing: {e}"]


def pick(addresses, port, results, hosts_tried) -> Choice:
    """The first address every prober reached, from `results` (one list of
    booleans per prober, from the hosts `hosts_tried`); raises InitializeError
    when there is none."""
    for i, address in enumerate(addresses):
        if all(r[i] for r in results):
            return Choice(f"{address}:{port}", f"{address}:{port}")
    unreached = [f"{address} (not reached from {', '.join(h for h, r in zip(hosts_tried, results) if not r[i])})"
                 for i, address in enumerate(addresses)]
    raise InitializeError(
        f"mpi-collectives: no address of rank 0's node ({socket.gethostname()}) is reachable from every other "
        f"node within {PROBE_TIMEOUT:.0f} s: tried {'; '.join(unreached)[:300]}. " + FIX)


def bind_argument(choice, initialize) -> dict:
    """The keyword that makes jax.distributed.initialize listen on `choice.bind`:
    {} when there is nothing to narrow, when the user set JAX's own
    JAX_COORDINATOR_BIND_ADDRESS, or with a jax that lacks the argument
    (its service then listens on every interface, as before)."""
    import inspect
    import os
    if not choice.bind or os.environ.get("JAX_COORDINATOR_BIND_ADDRESS"):
        return {}
    try:
        known = "coordinator_bind_address" in inspect.signature(initialize).parameters
    except (TypeError, ValueError):
        known = False
    return {"coordinator_bind_address": choice.bind} if known else {}


def wait_until_listening(coordinator: str, timeout: float) -> None:
    """Return once the coordinator at host:port accepts connections (or after `timeout`).

    The ranks leave the meeting together, so the others' first connection
    often comes before rank 0's jax.distributed service listens; JAX's client
    then backs off for about a second, which made start-up a second slower
    than gloo's in half the launches. A refused TCP connection costs nothing,
    so poll. A coordinator that never comes up is left to jax.distributed's
    own timeout and initialize()'s message about it."""
    host, port = _split(coordinator)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.005)

"""A host lost in the middle of a job is named, not waited for.

When a host's link goes down, or the host freezes (every process on it
stopped), nothing ends the job: no RST, no FIN, no process that dies; MPI
over TCP waits forever, and JAX's own heartbeat ends the others only after
100 s with an abort that names nothing the user can act on. The stall
watcher (stall.py) therefore asks, once a wait has lasted CHECK_AFTER
seconds (or half the stall report time, when that is shorter), whether
every other host of the job still answers, and ends the job naming the
hosts and ranks that do not.

How a host answers: each rank listens on the address by which it reaches
JAX's coordinator (the cluster network, the same path the job already
uses), and a C thread of the native layer (services/ending/liveness.c)
writes one line to whoever connects, so a rank whose Python is busy still
answers. The ranks learn each other's address, port, pid and host from the
ranks' table, one MPI allgather at start-up (ranks_table.py; until issue 82
each rank read the whole table from jax.distributed's key-value store, P x P
rows from one server). A check connects to one rank per other host at
once and waits ANSWER_TIMEOUT seconds: a host that is cut off never
completes the connection, a frozen one completes it (its kernel answers)
but never writes.
"""
import errno
import selectors
import socket
import time

from ..base import mpi

CHECK_AFTER = 30.0  # s of one wait before the first check: JAX's heartbeat ends the job at 100 s
ANSWER_TIMEOUT = 10.0  # s a host has to answer
AFTER_THE_OTHERS = 3.0  # s a rank that finds no other host answering waits past its deadline before ending
_LISTENING = None  # (address, port) once listen() started the C thread
_ONE_BATCH = 256  # connections open at once (file descriptors)
_UNREACHABLE = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT, errno.EHOSTDOWN, errno.ENETDOWN}


def address_toward(coordinator: str) -> str:
    """This host's address on the path to `coordinator` ("host:port", "[v6]:port"): the source
    address the kernel picks for it (a UDP connect sends nothing)."""
    host, _, port = coordinator.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        family, _, _, _, where = socket.getaddrinfo(host, int(port or 1), 0, socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(where)
            return s.getsockname()[0]
    except (OSError, ValueError):
        return "0.0.0.0"  # no route known: every address of this host


class Table:
    """Where the ranks of the job answer: {rank: (address, port, pid, host, machine id)}, from the
    ranks' table (ranks_table.py: every row there from start-up, so a check never waits on the
    coordinator, which may be on the lost host)."""

    def __init__(self, rank: int, size: int, rows: dict):
        self.rank, self.size, self.rows = rank, size, rows

    def hosts_of(self, ranks) -> dict:
        """{machine id: [ranks]} of `ranks` on machines other than this rank's (ranks that could not
        listen are left out: they cannot be asked)."""
        mine = self.rows[self.rank][4]
        hosts = {}
        for r in ranks:
            row = self.rows.get(r)
            if row is not None and row[4] != mine and row[1] > 0:
                hosts.setdefault(row[4], []).append(r)
        return hosts


def listen(rank: int, coordinator: str) -> tuple:
    """Answer checks from now on, toward the coordinator's network (once a process): (address, port)
    for this rank's row of the ranks' table; port 0 where it cannot listen (never asked)."""
    global _LISTENING
    if _LISTENING is None:
        address = address_toward(coordinator)
        port = mpi.liveness_listen(address, rank) if address != "0.0.0.0" else -1
        _LISTENING = (address, max(port, 0))
    return _LISTENING


def silent_hosts(table: Table, ranks, timeout: float = ANSWER_TIMEOUT) -> list:
    """The other hosts among `ranks` whose rank does not answer within `timeout` s:
    [(host name, [its ranks among `ranks`])], empty when all answer."""
    hosts = list(table.hosts_of(ranks).values())
    silent = []
    for i in range(0, len(hosts), _ONE_BATCH):
        batch = hosts[i:i + _ONE_BATCH]
        # Each asker picks its own rank on that host (by its rank), so that a large job's checks
        # spread over the host's ranks instead of queueing at one listener.
        answered = _ask([table.rows[ranks_on[table.rank % len(ranks_on)]] for ranks_on in batch], timeout)
        silent += [(table.rows[ranks_on[0]][3], ranks_on) for ranks_on, ok in zip(batch, answered) if not ok]
    return silent


def _ask(rows: list, timeout: float) -> list:
    """Connect to each (address, port, ...) at once; for each, did its host answer in time? A
    refused connection is an answer (the host is up; a process that ended is the peer watch's and
    the launcher's case); "no route" and silence are not."""
    sel = selectors.DefaultSelector()
    answered = [False] * len(rows)
    try:
        for i, (addr, port, *_rest) in enumerate(rows):
            s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            if s.connect_ex((addr, port)) in _UNREACHABLE:
                s.close()
                continue
            sel.register(s, selectors.EVENT_READ, i)
        deadline = time.monotonic() + timeout
        while sel.get_map() and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=max(0.0, deadline - time.monotonic())):
                try:
                    key.fileobj.recv(128)
                    answered[key.data] = True
                except OSError as e:
                    answered[key.data] = e.errno not in _UNREACHABLE
                sel.unregister(key.fileobj)
                key.fileobj.close()
    finally:
        for key in list(sel.get_map().values()):
            key.fileobj.close()
        sel.close()
    return answered

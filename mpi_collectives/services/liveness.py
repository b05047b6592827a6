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
answers. The ranks learn each other's address, port, pid and host through
one allgather at start-up. A check connects to one rank per other host at
once and waits ANSWER_TIMEOUT seconds: a host that is cut off never
completes the connection, a frozen one completes it (its kernel answers)
but never writes.
"""
import errno
import hashlib
import ipaddress
import os
import selectors
import socket
import time

import numpy as np

from ..base import mpi

CHECK_AFTER = 30.0  # s of one wait before the first check: JAX's heartbeat ends the job at 100 s
ANSWER_TIMEOUT = 10.0  # s a host has to answer
_ADDRESS_BYTES, _HOST_BYTES = 16, 64
_ONE_BATCH = 256  # connections open at once (file descriptors)
_UNREACHABLE = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT, errno.EHOSTDOWN, errno.ENETDOWN}


def _machine_id(host: str) -> int:
    """Equal for two ranks exactly when they run on one machine (this boot of its kernel)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return int.from_bytes(hashlib.sha256(f"{host}|{boot}".encode()).digest()[:8], "little", signed=True)


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
    """Where every rank of the job answers: (address, port, pid, host, machine id) by rank."""

    def __init__(self, rank: int, rows: list):
        self.rank, self.rows = rank, rows

    def hosts_of(self, ranks) -> dict:
        """{machine id: [ranks]} of `ranks` on machines other than this rank's."""
        mine = self.rows[self.rank][4]
        hosts = {}
        for r in ranks:
            if self.rows[r][4] != mine and self.rows[r][1] > 0:
                hosts.setdefault(self.rows[r][4], []).append(r)
        return hosts


def start(rank: int, size: int, coordinator: str) -> Table:
    """Listen for checks and learn everyone's place (one allgather over the job: every rank calls it)."""
    address = address_toward(coordinator)
    port = mpi.liveness_listen(address, rank) if address != "0.0.0.0" else -1
    host = socket.gethostname()
    record = np.zeros(_ADDRESS_BYTES + _HOST_BYTES + 3 * 8, np.uint8)
    packed = ipaddress.ip_address(address).packed if port > 0 else b""
    record[:len(packed)] = np.frombuffer(packed, np.uint8)
    name = host.encode()[:_HOST_BYTES]
    record[_ADDRESS_BYTES:_ADDRESS_BYTES + len(name)] = np.frombuffer(name, np.uint8)
    record[_ADDRESS_BYTES + _HOST_BYTES:] = np.array([_machine_id(host), max(port, 0), os.getpid()],
                                                     np.int64).view(np.uint8)
    rows = []
    for r, row in enumerate(mpi.allgather(record, size)):
        raw = bytes(row[:_ADDRESS_BYTES])
        machine, port_r, pid = (int(v) for v in row[_ADDRESS_BYTES + _HOST_BYTES:].view(np.int64))
        addr = str(ipaddress.ip_address(raw[:4] if not any(raw[4:]) else raw))
        name = bytes(row[_ADDRESS_BYTES:_ADDRESS_BYTES + _HOST_BYTES]).rstrip(b"\0").decode(errors="replace")
        rows.append((addr, port_r, pid, name, machine))
    return Table(rank, rows)


def silent_hosts(table: Table, ranks, timeout: float = ANSWER_TIMEOUT) -> list:
    """The other hosts among `ranks` whose rank does not answer within `timeout` s:
    [(host name, [its ranks among `ranks`])], empty when all answer."""
    hosts = list(table.hosts_of(ranks).values())
    silent = []
    for i in range(0, len(hosts), _ONE_BATCH):
        batch = hosts[i:i + _ONE_BATCH]
        answered = _ask([table.rows[ranks_on[0]] for ranks_on in batch], timeout)
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

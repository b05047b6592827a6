"""The meeting of ranks in initialize(): every rank sends rank 0 a hello
(its host, pid and versions); rank 0 checks that all run the same versions,
chooses the coordinator and answers every rank with it (or with the error
that every rank then raises). A rank missing from the meeting ends the job.

When the ranks span several hosts, rank 0 first asks one rank on each other
host which of its addresses it reaches (coordinator.py): its answer to those
ranks is `PROBE|port|address,address,...`, they reply on TAG_PROBED with one
0/1 per address, and only then does every rank get the final answer.
"""
import os
import socket

import numpy as np

from . import coordinator
from ..base import mpi, versions
from ..base.ending import end_job
from ..base.errors import InitializeError

RECORD = 512  # bytes of each rank's hello, and of rank 0's answer
TAG_HELLO, TAG_ANSWER, TAG_PROBED = 7301, 7302, 7303


def hello() -> str:
    """This rank's hello: host|pid|package=version|..."""
    shared = [f"{package}={versions.installed(package)}" for package in versions.SHARED]
    return "|".join([socket.gethostname(), str(os.getpid())] + shared)


def record(text: str) -> np.ndarray:
    """`text` as a RECORD-byte message (cut to fit, NUL-terminated)."""
    data = text.encode()[: RECORD - 1]
    out = np.zeros(RECORD, np.uint8)
    out[: len(data)] = np.frombuffer(data, np.uint8)
    return out


def text(message: np.ndarray) -> str:
    """The text of a record."""
    return bytes(message).split(b"\0", 1)[0].decode(errors="replace")


def version_mismatch(hellos):
    """The error message when the ranks' hellos (rank 0's first) name different versions, else None."""
    fields = [h.split("|")[2:] for h in hellos]
    if all(f == fields[0] for f in fields):
        return None
    odd = [i for i, f in enumerate(fields) if f != fields[0]]
    return ("mpi-collectives: ranks run different versions: rank 0 has " + ", ".join(fields[0])
            + "; " + "; ".join(f"rank {i} has {', '.join(fields[i])}" for i in odd[:8])
            + ". Fix: install the same mpi-collectives, jax and jaxlib on every node (one venv on a shared "
            "filesystem).")


def _answer(reply: str):
    """The coordinator's Choice from a final answer `OK|address|bind`; raises an `ERR|message`."""
    if reply.startswith("ERR|"):
        raise InitializeError(reply[4:])
    address, _, bind = reply[3:].partition("|")
    return coordinator.Choice(address, bind or None)


def _final(choice) -> str:
    return f"OK|{choice.address}|{choice.bind or ''}"


def meet(rank: int, size: int, settings):
    """Meet the other ranks (MPI is initialized); the coordinator's Choice
    (address, bind address), the same on every rank.

    Raises InitializeError on every rank when rank 0 finds a problem; ends the
    job when a rank does not come within settings.timeout seconds."""
    timeout = float(settings.timeout)
    if rank != 0:
        return _meet_as_other(rank, size, timeout)

    hellos = [mpi.irecv(np.zeros(RECORD, np.uint8), r, TAG_HELLO) for r in range(1, size)]
    missing = mpi.wait_all(hellos, timeout)
    if missing:
        ranks = ", ".join(str(i + 1) for i in missing)
        end_job(f"after {timeout:.0f} s in initialize(), rank(s) {ranks} of {size} had not called it. Fix: "
                "call mpi_collectives.initialize() on every rank, or raise MPI_COLLECTIVES_INIT_TIMEOUT if "
                "they are just slow to start.")
    everyone = [text(record(hello()))] + [text(h[1]) for h in hellos]
    hosts = [h.split("|")[0] for h in everyone]
    problem = version_mismatch(everyone)
    if problem is not None:
        reply = "ERR|" + problem
    elif settings.coordinator:
        reply = _attempt(lambda: _final(coordinator.explicit(settings)))
    elif len(set(hosts)) == 1:
        reply = _attempt(lambda: _final(coordinator.on_one_host(settings)))
    else:
        reply = _attempt(lambda: _final(_probe(hosts, settings, timeout)))
    sends = [mpi.isend(record(reply), r, TAG_ANSWER) for r in range(1, size)]
    mpi.wait_all(sends, timeout)
    return _answer(reply)


def _attempt(choose) -> str:
    try:
        return choose()
    except InitializeError as e:
        return "ERR|" + str(e)
    except Exception as e:  # unforeseen: every rank must hear of it, not wait for an answer
        return (f"ERR|mpi-collectives: rank 0 could not choose jax.distributed's coordinator: "
                f"{type(e).__name__}: {e}. Fix: set MPI_COLLECTIVES_COORDINATOR=host:port, or "
                "MPI_COLLECTIVES_INTERFACE to a network interface every rank reaches.")


def _probe(hosts, settings, timeout):
    """Rank 0, ranks on several hosts: the first of its addresses that one rank
    on every other host reaches (those ranks get their PROBE question here,
    and the final answer later, with everyone)."""
    listeners = coordinator.across_hosts(settings)
    try:
        listeners.accept_in_background()
        probers, seen = [], {hosts[0]}
        for r, host in enumerate(hosts):
            if host not in seen:
                seen.add(host)
                probers.append(r)
        question = f"PROBE|{listeners.port}|{','.join(listeners.addresses)}"
        replies = [mpi.irecv(np.zeros(RECORD, np.uint8), r, TAG_PROBED) for r in probers]
        mpi.wait_all([mpi.isend(record(question), r, TAG_ANSWER) for r in probers], timeout)
        late = mpi.wait_all(replies, timeout)
        if late:
            end_job(f"rank(s) {', '.join(str(probers[i]) for i in late)} did not answer rank 0's question "
                    f"about the coordinator's address within {timeout:.0f} s (they died, or hang in MPI).")
        results = [[c == "1" for c in text(reply[1])] for reply in replies]
    finally:
        listeners.close()
    return coordinator.pick(listeners.addresses, listeners.port, results, [hosts[r] for r in probers])


def _meet_as_other(rank, size, timeout):
    """A rank other than 0: send the hello, answer rank 0's question if asked, return the choice."""
    send = mpi.isend(record(hello()), 0, TAG_HELLO)
    while True:
        answer = mpi.irecv(np.zeros(RECORD, np.uint8), 0, TAG_ANSWER)
        if mpi.wait_all([answer], timeout):
            end_job(f"rank {rank}/{size} waited {timeout:.0f} s for rank 0 in initialize(): rank 0 never "
                    "called it (or died). Fix: call mpi_collectives.initialize() on every rank, or raise "
                    "MPI_COLLECTIVES_INIT_TIMEOUT if rank 0 is just slow.")
        mpi.wait_all([send], timeout)
        reply = text(answer[1])
        if not reply.startswith("PROBE|"):
            return _answer(reply)
        _, port, addresses = reply.split("|")
        reached = coordinator.reachable(addresses.split(","), int(port))
        send = mpi.isend(record("".join("1" if r else "0" for r in reached)), 0, TAG_PROBED)

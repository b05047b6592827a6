"""The meeting of ranks in initialize(): every rank sends rank 0 a hello
(its host, pid and versions); rank 0 checks that all run the same versions,
chooses the coordinator and answers every rank with it (or with the error
that every rank then raises). A rank missing from the meeting ends the job.
"""
import os
import socket
import time

import numpy as np

from . import coordinator, mpi, versions
from .ending import end_job
from .errors import InitializeError

RECORD = 512  # bytes of each rank's hello, and of rank 0's answer
TAG_HELLO, TAG_ANSWER = 7301, 7302


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


def wait(requests, timeout: float) -> list:
    """Poll (request, buffer) pairs until all complete or the timeout passes; the indices still pending."""
    deadline = time.monotonic() + timeout
    pending = list(range(len(requests)))
    while pending and time.monotonic() < deadline:
        pending = [i for i in pending if not mpi.test(requests[i][0])]
        if pending:
            time.sleep(0.002)
    return pending


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


def meet(rank: int, size: int, settings) -> str:
    """Meet the other ranks (MPI is initialized); the coordinator's host:port, the same on every rank.

    Raises InitializeError on every rank when rank 0 finds a problem; ends the
    job when a rank does not come within settings.timeout seconds."""
    timeout = float(settings.timeout)
    if rank != 0:
        send = mpi.isend(record(hello()), 0, TAG_HELLO)
        answer = mpi.irecv(np.zeros(RECORD, np.uint8), 0, TAG_ANSWER)
        if wait([answer], timeout):
            end_job(f"rank {rank}/{size} waited {timeout:.0f} s for rank 0 in initialize(): rank 0 never "
                    "called it (or died). Fix: call mpi_collectives.initialize() on every rank, or raise "
                    "MPI_COLLECTIVES_INIT_TIMEOUT if rank 0 is just slow.")
        wait([send], timeout)
        reply = text(answer[1])
        if reply.startswith("ERR|"):
            raise InitializeError(reply[4:])
        return reply[3:]

    hellos = [mpi.irecv(np.zeros(RECORD, np.uint8), r, TAG_HELLO) for r in range(1, size)]
    missing = wait(hellos, timeout)
    if missing:
        ranks = ", ".join(str(i + 1) for i in missing)
        end_job(f"after {timeout:.0f} s in initialize(), rank(s) {ranks} of {size} had not called it. Fix: "
                "call mpi_collectives.initialize() on every rank, or raise MPI_COLLECTIVES_INIT_TIMEOUT if "
                "they are just slow to start.")
    everyone = [text(record(hello()))] + [text(h[1]) for h in hellos]
    problem = version_mismatch(everyone)
    if problem is None:
        try:
            reply = "OK|" + coordinator.choose([h.split("|")[0] for h in everyone], settings)
        except InitializeError as e:
            reply = "ERR|" + str(e)
        except Exception as e:  # unforeseen: every rank must hear of it, not wait for an answer
            reply = (f"ERR|mpi-collectives: rank 0 could not choose jax.distributed's coordinator: "
                     f"{type(e).__name__}: {e}. Fix: set MPI_COLLECTIVES_COORDINATOR=host:port, or "
                     "MPI_COLLECTIVES_INTERFACE to a network interface every rank reaches.")
    else:
        reply = "ERR|" + problem
    sends = [mpi.isend(record(reply), r, TAG_ANSWER) for r in range(1, size)]
    wait(sends, timeout)
    if reply.startswith("ERR|"):
        raise InitializeError(reply[4:])
    return reply[3:]

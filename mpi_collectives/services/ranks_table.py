"""Where every rank of the job is, learnt once at start-up through one MPI
allgather: its machine, its pid and life pipe (for peers.py's watch of the
ranks on its node), and the address and port where it answers "are you
there?" with its host's name (for liveness.py's check of the other hosts).

Through MPI, not jax.distributed's key-value store. Every rank needs every
rank's row either way, P x P rows in all; the store serves them from one
gRPC server (the coordinator), each rank reading the whole directory until
every row had come (issue 82: at 4,096 ranks, 16.7 million rows in the first
minute, at least), where the library's allgather spreads them over the
ranks' own links in log P steps. One collective that every rank makes
whatever its own settings: a rank that does not watch sends no life pipe
(-1), one that does not listen port 0 (never asked), so that ranks whose
settings differ cannot make the job wait here."""
import os
import socket

import numpy as np

from ..base import mpi
from ..base.machine import machine_id

_ADDRESS_WORDS, _HOST_WORDS = 6, 8  # 48 bytes: an IPv6 address's longest text; 64: a host name (cut there)
_ROW = 4 + _ADDRESS_WORDS + _HOST_WORDS  # machine id, pid, life pipe, port, address, host: int64 words
_TABLE = None


def _packed(text: str, words: int) -> np.ndarray:
    raw = text.encode()[:8 * words].ljust(8 * words, b"\0")
    return np.frombuffer(raw, np.int64)


def _unpacked(words: np.ndarray) -> str:
    return words.tobytes().rstrip(b"\0").decode(errors="replace")


class Ranks:
    """The job's table: one row a rank, as each rank sent it."""

    def __init__(self, rank: int, size: int, table: np.ndarray):
        self.rank, self.size, self.table = rank, size, table

    def machine(self, r: int) -> int:
        return int(self.table[r, 0])

    def host_of(self, r: int) -> str:
        return _unpacked(self.table[r, 4 + _ADDRESS_WORDS:])

    def on_this_node(self) -> dict:
        """{rank: pid} of the other ranks on this rank's machine."""
        mine = self.machine(self.rank)
        return {r: int(self.table[r, 1]) for r in range(self.size) if r != self.rank and self.machine(r) == mine}

    def life_pipe(self, r: int) -> int:
        return int(self.table[r, 2])

    def answers(self) -> dict:
        """{rank: (address, port, pid, host, machine)} of every rank: where it answers "are you there?"
        (port 0: it does not)."""
        return {r: (_unpacked(self.table[r, 4:4 + _ADDRESS_WORDS]), int(self.table[r, 3]), int(self.table[r, 1]),
                    self.host_of(r), self.machine(r)) for r in range(self.size)}


def exchange(rank: int, size: int, life_pipe, address: str, port: int) -> Ranks:
    """This rank's row for everyone's (once a process: a second call returns the first table, as
    its collective must not be made again, and makes no second life pipe). `life_pipe()`: the
    pipe's descriptor, -1 where this rank does not watch; `port`: 0 where it does not answer."""
    global _TABLE
    if _TABLE is None:
        host = socket.gethostname()
        row = np.concatenate([np.array([machine_id(host), os.getpid(), life_pipe(), port], np.int64),
                              _packed(address, _ADDRESS_WORDS), _packed(host, _HOST_WORDS)])
        _TABLE = Ranks(rank, size, mpi.allgather(row, size).reshape(size, _ROW))
    return _TABLE

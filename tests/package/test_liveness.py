"""A host's answer to "are you there?" (mpi_collectives/services/liveness.py and
native/src/services/ending/liveness.c), on one machine: a rank's C thread answers even while its
Python holds the interpreter lock; a stopped process (a frozen host) does not answer within the
time; a refused connection (the host up, the process gone) counts as an answer. The cut link and
the frozen host across hosts: tests/cluster/test_cluster.py."""
import os
import signal
import socket
import subprocess
import sys
import time

from helpers import HERE
from mpi_collectives.services import liveness

# Listens as a rank does, then holds the interpreter lock in a C loop that never releases it
# (a regular expression with catastrophic backtracking), so only the C thread can answer.
RANK = ("import re, sys; from mpi_collectives.base import mpi; "
        "port = mpi.liveness_listen('127.0.0.1', 7); print(port, flush=True); "
        "re.match(r'(a+)+b', 'a' * 40)")


def stopped(pid, task):
    with open(f"/proc/{pid}/task/{task}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def row(port):
    return ("127.0.0.1", port, 0, "here", 1)


def test_a_rank_answers_from_c_even_holding_the_interpreter_lock_and_not_when_stopped():
    proc = subprocess.Popen([sys.executable, "-c", RANK], stdout=subprocess.PIPE, text=True, cwd=HERE)
    try:
        port = int(proc.stdout.readline())
        assert port > 0
        time.sleep(0.5)  # well inside the regular expression
        start = time.monotonic()
        assert liveness._ask([row(port)], timeout=5) == [True]
        assert time.monotonic() - start < 2
        os.kill(proc.pid, signal.SIGSTOP)  # every thread stops, as on a frozen host
        while not all(stopped(proc.pid, task) for task in os.listdir(f"/proc/{proc.pid}/task")):
            time.sleep(0.01)
        start = time.monotonic()
        assert liveness._ask([row(port)], timeout=2) == [False]
        assert 1.9 < time.monotonic() - start < 4
        os.kill(proc.pid, signal.SIGCONT)
        assert liveness._ask([row(port)], timeout=5) == [True]  # the connection it queued is answered too
    finally:
        proc.kill()
        proc.wait()
    assert liveness._ask([row(port)], timeout=2) == [True]  # refused: the host is up, its process gone


def test_silent_hosts_names_the_host_and_its_ranks_and_skips_this_one():
    # A host whose kernel completes connections but whose processes never write: a frozen one.
    frozen = socket.socket()
    frozen.bind(("127.0.0.1", 0))
    frozen.listen(8)
    port = frozen.getsockname()[1]
    # rank 1 on this machine (never asked), ranks 2 and 3 on the frozen host
    table = liveness.Table(0, 4, {0: ("127.0.0.1", 1, 0, "here", 1), 1: ("127.0.0.1", 1, 0, "here", 1),
                                  2: ("127.0.0.1", port, 0, "node9", 2), 3: ("127.0.0.1", port, 0, "node9", 2)})
    try:
        start = time.monotonic()
        assert liveness.silent_hosts(table, [0, 1, 2, 3], timeout=1) == [("node9", [2, 3])]
        assert time.monotonic() - start < 3
        assert liveness.silent_hosts(table, [0, 1], timeout=1) == []
    finally:
        frozen.close()

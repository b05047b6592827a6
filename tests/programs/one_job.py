"""One job, one set of choices (mpi_collectives/services/job_choices.py): a
psum over every process through initialize(), checked exactly.

    ONLY_ON="R:NAME=VALUE[;NAME=VALUE]"   set variables on rank R alone, before
                                          anything of the package loads (as a
                                          launcher that passes them to one rank)

Prints "SETTINGS rank R host H: <initialize()'s mpi-settings line>" and
"EXACT rank R of N"; a wrong sum prints "WRONG".
"""
import os
import socket
import sys

from mpi_collectives.base.launchers import launcher_rank_size

rank_env = launcher_rank_size()[0]
only = os.environ.get("ONLY_ON", "")
if only:
    who, _, assignments = only.partition(":")
    if int(who) == rank_env:
        for assignment in assignments.split(";"):
            name, _, value = assignment.partition("=")
            os.environ[name] = value

import mpi_collectives  # noqa: E402

info = mpi_collectives.initialize()
line = next((t for t in info.tunings if t.startswith("mpi-settings")), "mpi-settings: none")
print(f"SETTINGS rank {info.rank} host {socket.gethostname()}: {line}", flush=True)

import jax  # noqa: E402
import numpy as np  # noqa: E402

n = 1 << 16  # 256 KiB of float32: past the check's carried block, through the library's own algorithm
x = np.full((1, n), info.rank + 1, np.float32)
out = np.asarray(jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i")(x))
want = info.size * (info.size + 1) / 2
if not np.array_equal(out, np.full_like(out, want)):
    print(f"WRONG rank {info.rank}: {out.ravel()[:4]} instead of {want}", flush=True)
    sys.exit(1)
print(f"EXACT rank {info.rank} of {info.size}", flush=True)

"""Issue 71's suspect 12: rank 0's phases watcher and its main thread may both look for a stuck rank's
line (Phases.stuck_line). Both probing and both posting a receive for one message left the loser's
receive posted after its 5 s wait, over a buffer then freed: a later line written into freed memory.
Here eight threads of rank 0 look at once for the one line rank 1 sent; every one must return that
line, with one receive posted. Prints one line a rank; exit 0 when it held."""
import sys
import threading

import numpy as np

import mpi_collectives
from mpi_collectives.base import mpi
from mpi_collectives.services.phases import STUCK_TAG, Phases

info = mpi_collectives.initialize()
phases = Phases(info.rank, info.size)
LINE = "rank 1 waits in all-reduce sum f32 x4 (test_x), for 10 s since it left"
ok = True
if info.rank == 1:
    sent = np.frombuffer(LINE.encode(), np.uint8)
    mpi.wait_all([mpi.isend(sent, 0, STUCK_TAG, phases.comm)], 30.0)
elif info.rank == 0:
    while not mpi.probe(1, STUCK_TAG, phases.comm):  # the line has arrived: every thread's probe sees it
        pass
    start, got = threading.Barrier(8), []

    def look():
        start.wait()
        got.append(phases.stuck_line())

    threads = [threading.Thread(target=look) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = got == [LINE] * 8 and len(phases._stuck_buffers) == 1
    print(f"rank 0: {len(got)} lookers, {sum(g == LINE for g in got)} found the line, "
          f"{len(phases._stuck_buffers)} receives posted: {'ok' if ok else 'WRONG'}", flush=True)
phases.stop()
mpi_collectives.barrier()  # rank 1 leaves after rank 0 has looked
sys.exit(0 if ok else 1)

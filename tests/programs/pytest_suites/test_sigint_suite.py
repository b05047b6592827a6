"""Issue 72: SIGINT to one rank (kill -INT) while it waits in the vote on a test that rank 0 is still
running: its peers waited in the vote for ever (a teardown error with an empty traceback, then a hang).
Rank 1 writes its pid to rank1.pid in the suite's folder when it has done test_a's work; the test sends
it SIGINT. The job must end within seconds with one line naming the rank and the test, rank 0's
report of the tests run so far first."""
import os
import time

import jax


def test_a_rank0_slow():
    if jax.process_index() == 0:
        time.sleep(20)
    if jax.process_index() == 1:
        with open("rank1.pid.tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace("rank1.pid.tmp", "rank1.pid")


def test_b_after():
    pass

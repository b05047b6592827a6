"""Issue 80 (the fourth read's B1 and B8): JAX looked up before it is imported (conftest.py), then
imported first in a worker thread of a test. One process would report both tests passed: JAX runs
over MPI on every rank (process_count is the job's size) and a global sum is the sum of every rank's
value. Before, the look-up disarmed the start (each rank its own one-process JAX: 1.0 where 3.0 is
right, silent), and the import in a thread failed with "signal only works in main thread"."""
import threading

from conftest import HAS_JAX


def test_a_jax_imported_first_in_a_thread(mpi_rank, mpi_size):
    assert HAS_JAX
    failures = []

    def worker():
        try:
            import jax  # noqa: F401  (the suite's first import of jax)
        except BaseException as e:  # what the test must report
            failures.append(f"{type(e).__name__}: {e}")

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert failures == []


def test_b_jax_runs_over_every_rank(mpi_rank, mpi_size):
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    assert jax.process_count() == mpi_size
    total = float(np.sum(multihost_utils.process_allgather(np.float32(mpi_rank + 1))))
    assert total == mpi_size * (mpi_size + 1) / 2

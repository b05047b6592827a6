"""Rank 0 runs a child process by multiprocessing's fork (a data loader's way) after a collective; the
child ends; then every rank sums again (tests/jax_over_mpi/test_clean_end.py). The child's end ran the
rank's exit handlers: the package's (the peers were told rank 0 had finished, and ended the job 30 s
later) and JAX's (its distributed client told the coordinator that task 0 was shutting down)."""
import multiprocessing
import sys

import mpi_collectives

info = mpi_collectives.initialize()
import jax.numpy as jnp  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402


def total(value):
    return float(multihost_utils.process_allgather(jnp.array([value])).sum())


first = total(1.0)
if info.rank == 0:
    child = multiprocessing.get_context("fork").Process(target=print, args=("CHILD ran",), kwargs={"flush": True})
    child.start()
    child.join()
    print(f"CHILD exit {child.exitcode}", flush=True)
second = total(2.0)
print(f"SUMS rank {info.rank}: {first} {second}", flush=True)
sys.exit(0 if (first, second) == (info.size * 1.0, info.size * 2.0) else 1)

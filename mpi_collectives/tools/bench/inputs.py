"""What each rank of the bench sends, and what it must get back: every
result of every path (ours, gloo, mpi4py's, the user loops) is checked
against these, so that a fast wrong answer never counts. Apart from
worker.py so that user_loops.py, which worker.py starts, can take them
without an import circle."""
import numpy as np


def rank_input(count: int, rank: int) -> np.ndarray:
    return (np.arange(count) % 13 + rank).astype(np.float32)  # small integers: every sum is exact


def expected(op: str, count: int, rank: int, size: int) -> np.ndarray:
    everyone = np.stack([rank_input(count, r) for r in range(size)])
    if op == "all-reduce":
        return everyone.sum(0)
    if op == "all-gather":
        return everyone.reshape(-1)
    if op == "reduce-scatter":
        return everyone.sum(0).reshape(size, -1)[rank]
    if op == "all-to-all":
        return everyone.reshape(size, size, -1)[:, rank].reshape(-1)
    return everyone[(rank - 1) % size]  # ppermute: from the left neighbour

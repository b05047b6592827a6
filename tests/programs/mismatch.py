"""A 2-rank job whose ranks disagree about a collective, in the way argv[1]
names, through multi-process pmap (each process compiles its own program):

    shape       psum of 4 elements on rank 0, 5 on rank 1 (both carried in the
                check's own block: native/src/services/check_block.h)
    carried     psum of 4 elements on rank 0 (carried in the block), 1000 on
                rank 1 (the check, then the library's call)
    large       psum of 1000 elements on rank 0, 1001 on rank 1 (neither carried)
    dtype       psum of float32 on rank 0, int32 on rank 1
    x64         psum of the same float64 numpy array, with JAX's 64-bit mode on rank 1
                only (float32 on rank 0, float64 on rank 1)
    op          psum on rank 0, pmax on rank 1
    kind        psum on rank 0, all_gather on rank 1
    gather      all_gather of 4 elements on rank 0, 5 on rank 1
    scatter     psum_scatter of 4 elements on rank 0, 6 on rank 1
    permute     ppermute of 4 elements on rank 0, 5 on rank 1
    alltoall    all_to_all of 4 elements on rank 0, 6 on rank 1
    agree       every rank the same: psum, then "AGREE rank R" (a control)

Every value that reaches Python is printed as "RESULT rank R: ...": with the
checks on, none may. argv[2] == "gloo" runs the same over JAX's default gloo,
with jax.distributed from the launcher's variables and
MPI_COLLECTIVES_TEST_PORT (no mpi_collectives at all).
"""
import sys

mode = sys.argv[1]
backend = sys.argv[2] if len(sys.argv) > 2 else "mpi"
from launcher_env import start  # noqa: E402

jax, rank, size = start(backend)

import numpy as np  # noqa: E402

lax = jax.lax
first = rank == 0


def run(f, x):
    out = jax.pmap(f, axis_name="i")(x[None])
    print(f"RESULT rank {rank}: {np.asarray(out).ravel().tolist()}", flush=True)


ones = np.arange(1, 6, dtype=np.float32)
if mode == "shape":
    run(lambda v: lax.psum(v, "i"), ones[:4] if first else ones[:5])
elif mode == "carried":
    run(lambda v: lax.psum(v, "i"), ones[:4] if first else np.ones(1000, np.float32))
elif mode == "large":
    run(lambda v: lax.psum(v, "i"), np.ones(1000 if first else 1001, np.float32))
elif mode == "dtype":
    run(lambda v: lax.psum(v, "i"), ones[:4] if first else ones[:4].astype(np.int32))
elif mode == "x64":
    if not first:
        jax.config.update("jax_enable_x64", True)
    run(lambda v: lax.psum(v, "i"), np.arange(1, 5, dtype=np.float64))
elif mode == "op":
    run((lambda v: lax.psum(v, "i")) if first else (lambda v: lax.pmax(v, "i")), ones[:4])
elif mode == "kind":
    run((lambda v: lax.psum(v, "i")) if first else (lambda v: lax.all_gather(v, "i")), ones[:4])
elif mode == "gather":
    run(lambda v: lax.all_gather(v, "i"), ones[:4] if first else ones[:5])
elif mode == "scatter":
    run(lambda v: lax.psum_scatter(v, "i", tiled=True), np.ones(4 if first else 6, np.float32))
elif mode == "permute":
    run(lambda v: lax.ppermute(v, "i", [(0, 1), (1, 0)]), ones[:4] if first else ones[:5])
elif mode == "alltoall":
    run(lambda v: lax.all_to_all(v, "i", 0, 0, tiled=True), np.ones(4 if first else 6, np.float32))
elif mode == "agree":
    out = jax.pmap(lambda v: lax.psum(v, "i"), axis_name="i")(ones[None, :4])
    assert np.asarray(out).ravel().tolist() == [2.0, 4.0, 6.0, 8.0], out
    print(f"AGREE rank {rank}", flush=True)
else:
    raise SystemExit(f"mismatch.py: unknown mode {mode}")

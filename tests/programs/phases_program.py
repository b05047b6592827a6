"""mpi_collectives.phase outside pytest: a phase that raises on rank 0 before a psum its peers wait
in raises on every rank (rank 0's own exception there, PhaseFailed elsewhere, naming it), and the
next phase's psum is exact. Prints one line a rank; exit 0 when every rank saw what it should."""
import sys

import mpi_collectives

info = mpi_collectives.initialize()
sys.path.insert(0, sys.argv[1])  # the scenario suites' common.py
from common import expected, psum_of  # noqa: E402

seen = None
try:
    with mpi_collectives.phase("evaluation"):
        if info.rank == 0:
            raise ZeroDivisionError("rank 0 divides by zero before its psum")
        psum_of(2.0)
except ZeroDivisionError as e:
    seen = f"own: {e}"
except mpi_collectives.PhaseFailed as e:
    seen = f"peer: {e}"
with mpi_collectives.phase("training"):
    total = psum_of(3.0)
ok = total == expected(3.0) and (seen.startswith("own") if info.rank == 0 else
                                 "rank 0: ZeroDivisionError: rank 0 divides by zero" in seen)
print(f"rank {info.rank}: {seen}; next phase {total}: {'ok' if ok else 'WRONG'}", flush=True)
sys.exit(0 if ok else 1)

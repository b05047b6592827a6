"""`doctor` with its JAX psum replaced, to see it fail as it must on every rank:

    doctor_wrong_psum.py wrong   # a real collective with another answer (pmax): a WRONG line, exit 1 everywhere
    doctor_wrong_psum.py raise   # rank 1 fails before the collective: the job ends with its one line
"""
import sys

from mpi_collectives.tools import doctor



from mpi_collectives.base import mpi
def wrong(jax, x, axis):
    return jax.lax.pmax(x, axis)


def raise_on_rank_1(jax, x, axis):
    if mpi.rank_size()[0] == 1:
        raise ValueError("broken on purpose")
    return jax.lax.psum(x, axis)


doctor._reduce = {"wrong": wrong, "raise": raise_on_rank_1}[sys.argv[1]]
code = doctor.doctor()
print(f"doctor returned {code} on rank {mpi.rank_size()[0]}", file=sys.stderr, flush=True)
sys.exit(code)

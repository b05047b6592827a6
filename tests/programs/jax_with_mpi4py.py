"""mpi4py and JAX's MPI collectives in one process, mpi4py imported ORDER (before|after) JAX's first collective."""
import sys

order = sys.argv[1]
if order == "before":
    from mpi4py import MPI  # initializes MPI itself (MPI_THREAD_MULTIPLE)

from first_psum import first_psum  # noqa: E402
from launcher_env import launcher_rank_size  # noqa: E402

rank = first_psum(4096)
size = launcher_rank_size()[1]

if order == "after":
    from mpi4py import MPI  # MPI is already initialized, by the wrapper

total = MPI.COMM_WORLD.allreduce(rank + 1)
assert total == size * (size + 1) // 2, total
assert MPI.COMM_WORLD.Get_size() == size
print(f"PASS mpi4py {order} rank {rank}", flush=True)

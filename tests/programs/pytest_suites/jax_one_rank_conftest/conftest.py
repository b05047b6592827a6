"""Issue 80 (the fourth read's B3): the rootdir's conftest imports jax on rank 0 only, before pytest's
session: JAX's start is collective, so rank 0 waits in it alone. Before, nothing was printed, for
ever (no phase existed yet); now the job ends with the line naming the suite's start and rank 0."""
import os

if int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))) == 0:
    import jax  # noqa: F401

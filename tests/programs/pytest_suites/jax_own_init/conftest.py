"""A suite written for JAX's own way: its conftest joins the ranks with jax.distributed.initialize()
(here with the launcher's rank and size, as a suite that reads them itself does)."""
import os

import jax

size = int(os.environ.get("PMI_SIZE") or os.environ.get("OMPI_COMM_WORLD_SIZE"))
rank = int(os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK"))
jax.distributed.initialize(coordinator_address="127.0.0.1:1", num_processes=size, process_id=rank)

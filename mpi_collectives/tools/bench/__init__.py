"""Benchmarks: JAX's collectives through this package beside gloo, mpi4py,
JAX's own call cost, and a C loop calling MPI (through the wrapper and
directly), in one run. `python -m mpi_collectives bench --help`."""

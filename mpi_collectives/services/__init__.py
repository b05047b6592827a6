"""What a job over MPI runs besides JAX's collectives, on top of base/: the
coordinator's address and the ranks' meeting, the watchers (peers, stall,
liveness, exit hooks), the memory and MPI-library tunings, and the host
helpers. Imports base/ only (and each other); never jax's integration above."""

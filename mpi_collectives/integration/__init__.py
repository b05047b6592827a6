"""JAX over MPI: initialize() and what it sets up (jax_setup.py, the hub),
programs that start JAX themselves (plain_programs.py, the plugin hook's
side), the cluster environment JAX detects, communicators for prepare(),
float16/float8 collectives, GPUs per rank, the preemption sync point, and
the differences between jax versions. Imports services/ and base/."""

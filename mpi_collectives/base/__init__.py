"""The floor of the Python layers: the one door to the native layer (mpi.py,
over mpi_collectives._mpiabi), the settings table, errors, the log line, the
one way to end a job, the launchers' variables, installed versions and where
the native library is. Imports nothing of the package above it; nothing here
imports jax."""

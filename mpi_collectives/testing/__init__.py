"""Testing multi-process JAX code: the pytest plugin (pytest_plugin.py), loaded through
mpi_collectives_pytest_plugin.py when pytest runs under a launcher of several ranks
(docs/testing.md)."""

"""pytest-mpi's --only-mpi under the plugin (issue 72): the test without the `mpi` mark is skipped, the
marked one runs, as pytest-mpi does without the plugin. No JAX."""
import pytest


@pytest.mark.mpi
def test_marked_runs():
    pass


def test_unmarked_is_skipped_under_only_mpi():
    pass

"""The pytest plugin's entry (mpi_collectives_pytest_plugin.py): registered where pytest looks for
it, and active under exactly the launchers the package knows (its size variables come from the
launchers' table, mpi_collectives/base/launchers.py, less SLURM_NTASKS, which a batch script sets
on the one process that runs pytest)."""
import importlib.metadata
import subprocess
import sys

import mpi_collectives_pytest_plugin as entry
from mpi_collectives.base import launchers


def test_registered_under_pytest11():
    points = importlib.metadata.entry_points(group="pytest11")
    assert [p.value for p in points if p.name == "mpi_collectives"] == ["mpi_collectives_pytest_plugin"]


def test_its_size_variables_are_the_launchers():
    table = set(launchers.SIZE_VARS) - {"SLURM_NTASKS"}
    assert set(entry.SIZE_VARIABLES) == table


def test_inactive_without_a_launcher_and_with_one_rank():
    code = ("import os, sys; import mpi_collectives_pytest_plugin as e; "
            "print(e._ACTIVE, 'mpi_collectives' in sys.modules)")
    for env in ({}, {"PMI_SIZE": "1"}, {"SLURM_NTASKS": "64"}):
        clean = {k: v for k, v in __import__("os").environ.items()
                 if k not in entry.SIZE_VARIABLES and k != "SLURM_NTASKS"}
        out = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True,
                             timeout=60)
        assert out.stdout.split() == ["False", "False"], (env, out.stdout, out.stderr)

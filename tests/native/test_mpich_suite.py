"""MPICH's own test suite through the wrapper (scripts/mpich_test_suite.py; issue 71): tests written by
MPICH's developers, run with the MPI library alone and with the node path on for every size and
collective; every test that passes alone passes through the path. CI runs the collectives whose calls
reach the path (each made a window or a round in the long run by hand:
docs/benchmarks/from-outside/mpich_test_suite_mpich.json), once, in the mpich configuration; MPICH 4.0.2's source
comes from Debian's source package (about 22 MB, a few seconds)."""
import json
import os
import shutil
import sys

import pytest

from helpers import ONCE, ROOT, explain, run

# The suite's collectives on its MPI_COMM_WORLD and its own communicators, every kind the path takes,
# in place and not, user operations and types beside them (each runs alone and through the path).
CI_TESTS = ["allredmany", "allred3", "allred4", "allred5", "allred6", "redscat", "redscat2", "redscat3",
            "allgather2", "allgather3", "alltoall1", "reduce_local", "op_commutative", "red3",
            "redscatbkinter",  # intercommunicators: a split of one was taken for an XLA group and hung
            "nonblocking2"]  # an op freed before its nonblocking reduction's wait: the library called NULL

pytestmark = pytest.mark.skipif(not ONCE or not shutil.which("cc") or not shutil.which("apt-get"),
                                reason="once (the mpich configuration), with a C compiler and Debian's apt (for "
                                       "MPICH's source)")


def test_mpichs_collective_tests_pass_through_the_node_path_as_with_the_library_alone(tmp_path):
    out = tmp_path / "suite.json"
    proc = run([sys.executable, os.path.join(ROOT, "scripts", "mpich_test_suite.py"), "--dirs", "coll",
                "--only", ",".join(CI_TESTS), "--json", str(out)], timeout=900)
    if "could not be downloaded" in proc.stderr + proc.stdout and os.geteuid() != 0:
        pytest.skip("MPICH's source needs apt-get source (a deb-src entry added as root)")
    assert proc.returncode == 0, explain(proc)
    summary = json.loads(out.read_text())
    ran = [r for r in summary["results"] if r["outcome"] == "passed"]
    assert summary["counts"].get("FAILED", 0) == 0, explain(proc)
    assert {r["test"].split("/")[-1] for r in ran} == set(CI_TESTS), explain(proc)  # none left out
    # each reached the path (a world of one rank makes no window)
    assert all(r["path_windows"] + r["path_rounds"] > 0 for r in ran if r["ranks"] > 1), explain(proc)

"""Every command the README and the documentation pages show is run here, or
says why it cannot be.

Each code block in README.md and docs/*.md is preceded by a marker line
(tests/readme_blocks.py):
    <!-- readme: fresh-machine ... -->   README's first block: exactly the two commands CI runs
    <!-- readme: run -->                  run with bash from the checkout, in this venv
    <!-- readme: python (...) -->        Python: compiled (a fragment, not a program)
    <!-- readme: cluster (...) -->       run by tests/cluster/test_cluster.py on node1 of its simulated
                                          cluster, in the mpich venv (Slurm commands)
    <!-- readme: not here (reason) -->    cannot run in the test suite, and why
A block without a marker fails, so a new command cannot go untested; a block
moved from the README to a page keeps its test. Messages name file:line.
"""
import os
import re
import sys

import pytest

from helpers import EXPECTED_FAMILY, ROOT, explain, free_port, run
from readme_blocks import blocks


def test_every_block_is_marked():
    unmarked = [b.where for b in blocks() if b.kind is None]
    assert not unmarked, f"code blocks without a <!-- readme: ... --> marker: {unmarked}"
    for b in blocks():
        if b.kind in ("not here", "cluster"):
            assert re.fullmatch(r"\(.+\)", b.rest), f"{b.where}: say how or why not, in parentheses"


def test_fresh_machine_is_the_first_block_only():
    fresh = [b.where for b in blocks() if b.kind == "fresh-machine"]
    assert fresh == [blocks()[0].where] and blocks()[0].file == "README.md", (
        f"the fresh-machine marker belongs to README.md's first block only: {fresh}")


def test_first_block_is_the_two_fresh_machine_commands():
    first = blocks()[0]
    assert first.file == "README.md" and first.kind == "fresh-machine", first.where
    assert first.code.splitlines() == ["bash scripts/run_example.sh", "bash scripts/test.sh"]
    for script in ("scripts/run_example.sh", "scripts/test.sh"):
        assert os.path.exists(os.path.join(ROOT, script))
    assert "bash scripts/test.sh" in open(os.path.join(ROOT, ".ci", "run")).read()


def test_python_blocks_compile():
    for b in blocks():
        if b.kind == "python":
            compile(b.code, b.where, "exec")


RUN_BLOCKS = [(b.where, b.code) for b in blocks() if b.kind == "run"]


@pytest.mark.jax
@pytest.mark.skipif(EXPECTED_FAMILY != "mpich" or "impi" in sys.prefix,
                    reason="the documented commands are written for the mpich venv")
@pytest.mark.parametrize("where,code", RUN_BLOCKS, ids=[where for where, _ in RUN_BLOCKS])
def test_run_block(where, code):
    env = {"PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}",
           "MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None,
           "HELLO_COORDINATOR_PORT": str(free_port())}  # hello_collectives.py's own variable
    proc = run(["bash", "-euo", "pipefail", "-c", code], env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, f"{where}:\n{code}\n" + explain(proc)

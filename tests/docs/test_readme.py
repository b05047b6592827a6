"""Every command the README shows is run here, or says why it cannot be.

Each code block in README.md is preceded by a marker line:
    <!-- readme: fresh-machine ... -->   the first block: exactly the two commands CI runs
    <!-- readme: run -->                  run with bash from the checkout, in this venv
    <!-- readme: python (...) -->        Python: compiled (a fragment, not a program)
    <!-- readme: cluster (...) -->       run by tests/cluster/test_cluster.py on node1 of its simulated
                                          cluster, in the mpich venv (Slurm commands)
    <!-- readme: not here (reason) -->    cannot run on this machine, and why
A block without a marker fails, so a new command cannot go untested.
"""
import os
import re
import sys

import pytest

from helpers import EXPECTED_FAMILY, ROOT, explain, free_port, run
from readme_blocks import blocks

def test_every_block_is_marked():
    unmarked = [line for line, kind, _, _ in blocks() if kind is None]
    assert not unmarked, f"README.md code blocks without a <!-- readme: ... --> marker at lines {unmarked}"
    for line, kind, rest, _ in blocks():
        if kind in ("not here", "cluster"):
            assert re.fullmatch(r"\(.+\)", rest), f"line {line}: say how or why not, in parentheses"


def test_first_block_is_the_two_fresh_machine_commands():
    line, kind, _, code = blocks()[0]
    assert kind == "fresh-machine"
    assert code.splitlines() == ["bash scripts/run_example.sh", "bash scripts/test.sh"]
    for script in ("scripts/run_example.sh", "scripts/test.sh"):
        assert os.path.exists(os.path.join(ROOT, script))
    assert "bash scripts/test.sh" in open(os.path.join(ROOT, ".ci", "run")).read()


def test_python_blocks_compile():
    for line, kind, _, code in blocks():
        if kind == "python":
            compile(code, f"README.md:{line}", "exec")


RUN_BLOCKS = [(line, code) for line, kind, _, code in blocks() if kind == "run"]


@pytest.mark.jax
@pytest.mark.skipif(EXPECTED_FAMILY != "mpich" or "impi" in sys.prefix,
                    reason="the README's commands are written for the mpich venv")
@pytest.mark.parametrize("line,code", RUN_BLOCKS, ids=[f"line{line}" for line, _ in RUN_BLOCKS])
def test_run_block(line, code):
    env = {"PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}",
           "MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None,
           "HELLO_COORDINATOR_PORT": str(free_port())}  # hello_collectives.py's own variable
    proc = run(["bash", "-euo", "pipefail", "-c", code], env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, f"README.md line {line}:\n{code}\n" + explain(proc)

"""One setting, one value, in both layers (issue 81): Python (mpi_collectives/base/settings.py) and the
native layer (native/src/base/settings.c, which reads the native rows when jaxlib loads it) read each
spelling of the table below alike, as a value or as an error. They once differed: Python's int() took
`1_024` and blanks, C's strtol neither; C took a trailing comma in a list; and initialize() compared
the two as text, so `import jax` before initialize() with MPI_COLLECTIVES_THREAD_LEVEL=Multiple or
MPI_COLLECTIVES_NODE_PATH_MIN=01024 (valid) was refused with a sentence about a keyword never passed."""
import os
import subprocess

import pytest

from helpers import ONCE, ROOT, explain, run

PY = os.environ.get("MPI_COLLECTIVES_TEST_PYTHON") or __import__("sys").executable
once = pytest.mark.skipif(not ONCE, reason="Python's and the wrapper's reading of the environment, the same on every "
                                           "family: the mpich configuration runs it")

ERROR = "error"
# (setting, spelling, the value both layers hold, or ERROR)
SPELLINGS = [
    ("thread_level", "multiple", "multiple"), ("thread_level", "Multiple", "multiple"),
    ("thread_level", "MULTIPLE", "multiple"), ("thread_level", "funneled", "funneled"),
    ("thread_level", " multiple", ERROR), ("thread_level", "multiple ", ERROR), ("thread_level", "many", ERROR),
    ("node_path_collectives", "all-gather,all-reduce", "all-reduce,all-gather"),
    ("node_path_collectives", "All-Reduce", "all-reduce"),
    ("node_path_collectives", "all-reduce,all-reduce", "all-reduce"),
    ("node_path_collectives", "all-reduce,", ERROR), ("node_path_collectives", ",all-reduce", ERROR),
    ("node_path_collectives", "all-reduce,,all-gather", ERROR),
    ("node_path_collectives", "all-reduce, all-gather", ERROR), ("node_path_collectives", ",", ERROR),
    ("node_path_min", "1024", 1024), ("node_path_min", "01024", 1024), ("node_path_min", "0", 0),
    ("node_path_min", "1_024", ERROR), ("node_path_min", " 1024", ERROR), ("node_path_min", "1024 ", ERROR),
    ("node_path_min", "+1024", ERROR), ("node_path_min", "1e3", ERROR), ("node_path_min", "0x400", ERROR),
    ("node_path_min", "-1", ERROR), ("node_path_min", "\uff11\uff10", ERROR),
    ("node_path_min", "99999999999999999999", ERROR), ("node_path_min", "-", ERROR),
    ("node_path", "2", 2), ("node_path", "3", ERROR), ("node_path", "00", 0),
]


@pytest.fixture(scope="module")
def native_reader(tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("settings") / "settings_harness")
    cmd = ["cc", "-O1", "-Wall", "-Werror", "-I", "native/generated", "-I", "native/src/base", "-o", exe,
           "native/src/base/settings.c", "tests/programs/settings_harness.c"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, explain(proc)
    return exe


def python_reads(name, spelling):
    from mpi_collectives.base import settings
    from mpi_collectives.base.errors import InitializeError
    try:
        return settings.value_from_environment(name, {settings.TABLE[name].var: spelling})
    except InitializeError:
        return ERROR


def native_reads(exe, name, spelling):
    """What the native layer holds, in Python's words: a word's index and a list's bits turned back."""
    from mpi_collectives.base import settings
    row = settings.TABLE[name]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPI_COLLECTIVES_")}
    proc = subprocess.run([exe], env={**env, row.var: spelling}, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, explain(proc)
    if proc.stdout.startswith("ERROR "):
        assert row.var in proc.stdout, proc.stdout  # the wrapper's sentence names the variable
        return ERROR
    held = int(dict(line.split(" ", 1) for line in proc.stdout.splitlines())[name])
    if isinstance(row.allowed, settings.SomeOf):
        return ",".join(w for i, w in enumerate(row.allowed.words) if held >> i & 1)
    if isinstance(row.allowed[0], str):
        return row.allowed[held]
    return held


@once
@pytest.mark.parametrize("name, spelling, value", SPELLINGS)
def test_both_layers_read_a_spelling_alike(native_reader, name, spelling, value):
    assert (python_reads(name, spelling), native_reads(native_reader, name, spelling)) == (value, value)


@once
@pytest.mark.jax
@pytest.mark.parametrize("variable, spelling", [
    ("MPI_COLLECTIVES_THREAD_LEVEL", "Multiple"), ("MPI_COLLECTIVES_NODE_PATH_COLLECTIVES", "all-gather,all-reduce"),
    ("MPI_COLLECTIVES_NODE_PATH_MIN", "01024")])
def test_a_valid_spelling_is_taken_when_jax_was_imported_first(variable, spelling):
    proc = run([PY, "-c", "import jax, mpi_collectives; mpi_collectives.initialize(); print('STARTED')"],
               env={variable: spelling}, timeout=180)
    assert proc.returncode == 0 and "STARTED" in proc.stdout and "comes after" not in proc.stderr, explain(proc)


@once
@pytest.mark.jax
def test_a_keyword_the_loaded_layer_cannot_take_is_refused_also_with_its_variable_unset():
    """It was ignored in silence, and os.environ then showed the value never used."""
    proc = run([PY, "-c", "import jax, mpi_collectives; mpi_collectives.initialize(node_path_min=4096)"],
               env={"MPI_COLLECTIVES_NODE_PATH_MIN": None}, timeout=180)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, explain(proc)
    assert "initialize(node_path_min=4096) comes after the native layer was loaded with " \
           "MPI_COLLECTIVES_NODE_PATH_MIN unset, so 262144, which it keeps" in proc.stderr, explain(proc)

"""A new user's commonest slips (issue 53), each named in one sentence on every rank: initialize()
forgotten under a launcher of several ranks, a misspelt or retired MPI_COLLECTIVES_* variable, and
a set-up error that ends the program (its sentence alone, no traceback)."""
import os
import re
import sys

import pytest

from helpers import ONCE, explain, mpirun, run

PY = sys.executable
once = pytest.mark.skipif(not ONCE, reason="Python before MPI's first use, the same on every family: the mpich "
                                           "configuration runs it (CI time)")
# One write per line: print('psum', x) writes its pieces apart when stdout is unbuffered, and two ranks'
# pieces then interleave ("psumpsum [2.0]"), as CI saw once.
FORGOTTEN = ("import sys, mpi_collectives, jax, jax.numpy as jnp\n"
             "x = jax.pmap(lambda x: jax.lax.psum(x, 'i'), axis_name='i')(jnp.ones(1)).tolist()\n"
             "sys.stdout.write(f'psum {x}\\n')")
SENTENCE = ("runs JAX as one process of one: initialize() was not called before its first JAX computation, so its "
            "collectives reach no other rank and each rank computes alone. Fix: call mpi_collectives.initialize() "
            "before the first JAX computation")


@once
@pytest.mark.jax
def test_a_forgotten_initialize_is_named_on_every_rank():
    warned = mpirun(2, [PY, "-c", FORGOTTEN], env={"MPI_COLLECTIVES_NOT_INITIALIZED": None})
    # The default warns and lets the program run: each rank's psum is its own value, and it is told so.
    assert warned.returncode == 0 and warned.stdout.count("psum [1.0]") == 2, explain(warned)
    for rank in (0, 1):
        assert warned.stderr.count(f"mpi-collectives: rank {rank} of 2 (as the launcher started it) {SENTENCE}") == 1, \
            explain(warned)
    stopped = mpirun(2, [PY, "-c", FORGOTTEN], env={"MPI_COLLECTIVES_NOT_INITIALIZED": "stop"})
    assert stopped.returncode != 0 and "psum" not in stopped.stdout, explain(stopped)
    assert f"mpi-collectives: error: rank 0 of 2 (as the launcher started it) {SENTENCE}" in stopped.stderr, \
        explain(stopped)
    quiet = mpirun(2, [PY, "-c", FORGOTTEN], env={"MPI_COLLECTIVES_NOT_INITIALIZED": "quiet"})
    assert quiet.returncode == 0 and "mpi-collectives" not in quiet.stderr, explain(quiet)
    alone = run([PY, "-c", FORGOTTEN])  # one process, no launcher: nothing to say
    assert alone.returncode == 0 and "mpi-collectives" not in alone.stderr, explain(alone)
    joined = mpirun(2, [PY, "-c", "import mpi_collectives; mpi_collectives.initialize()\n" + FORGOTTEN])
    assert joined.returncode == 0 and joined.stdout.count("psum [2.0]") == 2, explain(joined)
    assert "initialize() was not called" not in joined.stderr, explain(joined)


def test_unknown_and_retired_variables_are_named_with_what_to_use():
    from mpi_collectives.base.settings import unknown_variables
    lines = unknown_variables({"MPI_COLLECTIVES_STALL_TIMOUT": "5", "MPI_COLLECTIVES_COORDINATOR_PORT": "1",
                               "MPI_COLLECTIVES_ZZZ": "1", "MPI_COLLECTIVES_STALL_TIMEOUT": "5",
                               "MPI_COLLECTIVES_TEST_PORT": "1", "MPI_COLLECTIVES_VENV_DIR": "/x", "OTHER": "1"})
    assert lines == [
        "mpi-collectives: MPI_COLLECTIVES_COORDINATOR_PORT is no longer read; MPI_COLLECTIVES_PORT (the coordinator's "
        "port; examples/existing_script.py's own is HELLO_COORDINATOR_PORT) replaced it.",
        "mpi-collectives: MPI_COLLECTIVES_STALL_TIMOUT is not a setting of mpi-collectives and is ignored; did you "
        "mean MPI_COLLECTIVES_STALL_TIMEOUT? (`mpi-collectives env` lists them all)",
        "mpi-collectives: MPI_COLLECTIVES_ZZZ is not a setting of mpi-collectives and is ignored; none is close to it "
        "(`mpi-collectives env` lists them all)"], lines


def test_env_names_a_misspelt_variable():
    proc = run([PY, "-m", "mpi_collectives", "env"], env={"MPI_COLLECTIVES_STALL_TIMOUT": "5"})
    assert proc.returncode == 1 and "did you mean MPI_COLLECTIVES_STALL_TIMEOUT?" in proc.stderr, explain(proc)


@once
@pytest.mark.jax
def test_initialize_names_a_misspelt_variable_on_every_rank():
    """...and a tuning file that is not there (a mistyped shared path gave the built-in choice without a
    word), each line saying which rank on which host printed it (issue 81)."""
    proc = mpirun(2, [PY, "-c", "import mpi_collectives; mpi_collectives.initialize(); print('PASS')"],
                  env={"MPI_COLLECTIVES_STALL_TIMOUT": "5", "MPI_COLLECTIVES_TUNING_FILE": "/nowhere/tuning.json"})
    assert proc.returncode == 0 and proc.stdout.count("PASS") == 2, explain(proc)
    host = __import__("socket").gethostname()
    for rank in (0, 1):
        assert proc.stderr.count(f"mpi-collectives [rank {rank}/2 on {host}]: MPI_COLLECTIVES_STALL_TIMOUT is not a "
                                 "setting of mpi-collectives and is ignored; did you mean "
                                 "MPI_COLLECTIVES_STALL_TIMEOUT?") == 1, explain(proc)
        assert proc.stderr.count(f"mpi-collectives [rank {rank}/2 on {host}]: MPI_COLLECTIVES_TUNING_FILE names "
                                 "/nowhere/tuning.json, which does not exist here, so the built-in choices are "
                                 "used") == 1, explain(proc)


@once
def test_a_set_up_error_is_its_sentence_once_per_rank_without_a_traceback():
    proc = mpirun(2, [PY, "-c", "import mpi_collectives; mpi_collectives.initialize()"],
                  env={"MPI_COLLECTIVES_STALL_TIMEOUT": "5s"})
    sentence = ("mpi-collectives: MPI_COLLECTIVES_STALL_TIMEOUT=5s is not a whole number from 0 to 604800. Fix: "
                "correct it, or leave it unset for the default (0).")
    ending = sentence.replace("mpi-collectives: ", "mpi-collectives: error: ", 1)  # it ends the job
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, explain(proc)
    host = __import__("socket").gethostname()  # each rank's line says which rank on which host printed it
    assert sorted(line for line in proc.stderr.splitlines() if line.strip()) == [
        f"{ending} (rank {r}/2 on {host})" for r in (0, 1)], explain(proc)
    caught = mpirun(2, [PY, "-c", "import sys, mpi_collectives\ntry:\n    mpi_collectives.initialize()\n"
                                  "except mpi_collectives.InitializeError as e:\n"
                                  "    sys.stdout.write(f'caught {e}\\n')"],
                    env={"MPI_COLLECTIVES_STALL_TIMEOUT": "5s"})
    # The handler runs on every rank; at exit the launcher is still asked to end the job (ending.py:
    # ranks that began MPI_Init would otherwise wait there for this one).
    assert caught.stdout.count(f"caught {sentence}") == 2 and "Traceback" not in caught.stderr, explain(caught)
    other = run([PY, "-c", "import mpi_collectives; raise ValueError('not ours')"])  # other errors: Python's own
    assert other.returncode == 1 and "Traceback" in other.stderr and "ValueError: not ours" in other.stderr


def test_info_prints_no_empty_field():
    proc = run([PY, "-m", "mpi_collectives", "info"])
    assert proc.returncode == 0, explain(proc)
    empty = [line for line in proc.stdout.splitlines() if len(line.split(None, 1)) < 2]
    assert not empty, proc.stdout
    # After a success, the search line says so (it said "no library tried before it failed").
    assert "\nsearch               the first library tried was loaded\n" in proc.stdout, proc.stdout


def test_infos_search_line_reads_right_after_a_success_and_a_failure():
    from mpi_collectives.__main__ import search_line
    assert search_line("mpich", "") == "the first library tried was loaded"
    assert search_line("mpich", "/x/libmpi.so.12: file too short; ") == (
        "tried and not used before the library above: /x/libmpi.so.12: file too short")
    assert search_line("none", "/x/libmpi.so.12: not found; ") == "/x/libmpi.so.12: not found"
    assert search_line("none", "") == "nothing tried"


@once
@pytest.mark.jax
def test_the_verbose_log_says_who_started_mpi_in_words():
    proc = mpirun(2, [PY, "-c", "import mpi_collectives; mpi_collectives.initialize()\n" + FORGOTTEN],
                  env={"MPI_COLLECTIVES_VERBOSE": "1"})
    assert proc.returncode == 0, explain(proc)
    assert proc.stderr.count("MPI started: ") == 2 and "MPI_THREAD_MULTIPLE granted" in proc.stderr, explain(proc)
    assert "MPI was started by this package, at MPI_THREAD_MULTIPLE" in proc.stderr, explain(proc)
    assert "someone else" not in proc.stderr, explain(proc)


# A library that starts JAX's backend when it is imported, as netket does (jax.devices() at import).
STARTS_JAX = "import jax\njax.devices()\n"


@once
@pytest.mark.jax
def test_a_library_that_starts_jax_before_initialize_is_named_with_both_fixes(tmp_path):
    (tmp_path / "starts_jax.py").write_text(STARTS_JAX)
    program = (f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
               "import mpi_collectives\nimport starts_jax\nmpi_collectives.initialize()\nprint('UNEXPECTED')")
    proc = mpirun(2, [PY, "-c", program])
    assert proc.returncode != 0 and "UNEXPECTED" not in proc.stdout and "Traceback" not in proc.stderr, explain(proc)
    # initialize() is called, a line later: no rank says it was not
    assert "was not called" not in proc.stderr, explain(proc)
    lines = [re.sub(r" \(rank [01]/2 on \S+\)$", "", line) for line in proc.stderr.splitlines()
             if line.startswith("mpi-collectives")]  # (each rank's line says which rank printed it)
    assert len(lines) == 2 and lines[0] == lines[1], explain(proc)
    assert lines[0].startswith("mpi-collectives: error: initialize() was called after JAX created its backend, so "
                               "JAX's collectives are already set up without MPI: `import starts_jax` made it "
                               "(some libraries start JAX's backend when imported: netket does)"), lines[0]
    assert ("Fix: call mpi_collectives.initialize() right after `import mpi_collectives`, before importing such "
            "libraries and before the first JAX computation; or launch the script unchanged with "
            "`mpi-collectives run --initialize script.py`") in lines[0], lines[0]
    # The second fix, as the sentence gives it: the same script, unchanged, runs as one job.
    script = tmp_path / "script.py"
    script.write_text(program.replace("print('UNEXPECTED')",
                                      "import jax\nsys.stdout.write(f'PASS {jax.process_count()}\\n')"))
    fixed = mpirun(2, [PY, "-m", "mpi_collectives", "run", "--initialize", str(script)])
    assert fixed.returncode == 0 and fixed.stdout.count("PASS 2") == 2, explain(fixed)
    # A computation of the program's own before initialize(): named as the cause, the same two fixes.
    computed = mpirun(2, [PY, "-c", "import mpi_collectives, jax\njax.numpy.zeros(1).block_until_ready()\n"
                                    "mpi_collectives.initialize()"])
    assert computed.returncode != 0, explain(computed)
    assert computed.stderr.count("mpi-collectives: error: initialize() was called after JAX created its backend, "
                                 "so JAX's collectives are already set up without MPI: a JAX computation ran before "
                                 "initialize(), or a library that starts JAX's backend when imported (netket does) "
                                 "was imported before it. Fix: ") == 2, explain(computed)


@once
@pytest.mark.jax
def test_run_without_initialize_says_what_makes_a_plain_script_one_job(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text(FORGOTTEN)
    alone = mpirun(2, [PY, "-m", "mpi_collectives", "run", str(script)], env={"MPI_COLLECTIVES_NOT_INITIALIZED": None})
    assert alone.returncode == 0 and alone.stdout.count("psum [1.0]") == 2, explain(alone)
    for rank in (0, 1):
        assert alone.stderr.count(f"mpi-collectives: rank {rank} of 2 (as the launcher started it) runs JAX as one "
                                  f"process of one: initialize() was not called before its first JAX computation, so "
                                  f"its collectives reach no other rank and each rank computes alone. Fix: launch it "
                                  f"as `mpi-collectives run --initialize {script}` (without --initialize, `run` only "
                                  "sets up the import order, for a script that calls initialize() itself)") == 1, \
            explain(alone)
    joined = mpirun(2, [PY, "-m", "mpi_collectives", "run", "--initialize", str(script)])
    assert joined.returncode == 0 and joined.stdout.count("psum [2.0]") == 2, explain(joined)
    assert "mpi-collectives" not in joined.stderr, explain(joined)


@once
def test_commands_from_the_checkout_use_the_installed_package_or_say_why(tmp_path):
    """From a source checkout (the README's first steps leave the user there), `python -m` puts the
    checkout's mpi_collectives/, which has no built wrapper, before the installed package: `tune` and
    `bench` started their workers that way and ended in `ImportError: cannot import name '_mpiabi'`
    (issue 81). Their workers now take the current folder off sys.path; a command the user starts
    with `python -m` there gets the one sentence, not a traceback."""
    import argparse
    import shutil

    from helpers import ROOT, mpiexec_path
    from mpi_collectives.tools.bench.run import launch_command

    checkout = tmp_path / "checkout"
    shutil.copytree(os.path.join(ROOT, "mpi_collectives"), checkout / "mpi_collectives",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    (checkout / "native").mkdir()
    shutil.copy(os.path.join(ROOT, "native", "build_native.py"), checkout / "native")
    own = run([PY, "-m", "mpi_collectives", "info"], cwd=str(checkout))
    assert own.returncode != 0 and "Traceback" not in own.stderr, explain(own)
    assert f"imported from the source checkout {checkout}, where the native layer is not built; run from another " \
           "directory" in own.stderr, explain(own)
    args = argparse.Namespace(launcher=None, mpiexec=mpiexec_path())
    workers = run(launch_command(args, 2, ["mpi_collectives", "info"]), cwd=str(checkout))
    assert workers.returncode == 0 and workers.stdout.count("library") >= 2, explain(workers)

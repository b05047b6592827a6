"""`mpi-collectives tune` on every family: it measures every known candidate
of the loaded MPI, writes an entry that initialize() then uses for the same
MPI and shape, and refuses what it cannot measure. Not a speed test: which
value wins on a shared 2-core machine is noise; the choice itself is tested
on fixed numbers."""
import json
import os
import sys

import numpy as np
import pytest

from helpers import HERE, explain, mpiexec_path, run

# Once per MPI family (its candidates are the family's own), on the newest jax of each family's
# venv only: with MPICH's algorithm per collective its candidates became 12 launches, and what
# depends on jax (JAX's collectives through initialize()) the other tests run on every jax.


def tune(*args, env=None):
    return run([sys.executable, "-m", "mpi_collectives", "tune", *args],
               env={"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None, **(env or {})},
               cwd=HERE, timeout=900)


@pytest.mark.jax
def test_tune_writes_what_initialize_then_uses(tmp_path):
    from mpi_collectives.services import library_settings
    path = tmp_path / "conf" / "tuning.json"
    proc = tune("--ranks", "2", "--max-bytes", "65536", "--rounds", "1", "--scale", "0.1", "--file", str(path))
    assert proc.returncode == 0, explain(proc)
    info = json.loads(run([sys.executable, "-m", "mpi_collectives", "info", "--json"], cwd=HERE).stdout)
    impl = library_settings.implementation(info["version"])
    (entry,) = json.loads(path.read_text())["entries"]
    assert (entry["implementation"], entry["version"], entry["library"], entry["ranks_per_node"], entry["cpus"]) == \
        (impl, info["version"], os.path.realpath(info["library"]), 2, os.cpu_count()), entry
    known = library_settings.known(impl)
    assert all(library_settings.allowed_value(known[name], value) for name, value in entry["settings"].items()), entry
    candidates = {(c["variable"], c["value"]) for c in entry["measured"]["candidates"]}
    plain = {(v.name, value) for v in known.values() for value in v.values}
    # Beside every value, the size ranges of a variable whose sizes different values won (Intel MPI).
    assert plain <= candidates, entry
    assert all(known[name].by_size and library_settings.allowed_value(known[name], value)
               for name, value in candidates - plain), entry
    for variable in known.values():
        for value in variable.values:
            assert f"{variable.name}={value}" in proc.stdout, explain(proc)
    assert f"written to {path}" in proc.stdout, explain(proc)

    # initialize() under the same launcher, shape and MPI takes the entry.
    shown = ", ".join(f"{k}={v}" for k, v in entry["settings"].items())
    expected = (f"mpi-settings: {shown} (measured by mpi-collectives tune on {entry['date']})" if shown else
                "mpi-settings: the library's defaults (measured fastest by mpi-collectives tune)")
    proc = run([mpiexec_path(), "-n", "2", sys.executable, "-m", "mpi_collectives", "info", "--init"],
               env={"MPI_COLLECTIVES_TUNING_FILE": str(path)}, cwd=HERE)
    assert proc.returncode == 0 and expected in proc.stdout, explain(proc)


def test_tune_refuses_what_it_cannot_compare(tmp_path):
    proc = tune("--ranks", "1")
    assert proc.returncode == 2 and "argument --ranks: tuning collectives needs at least 2 ranks" in proc.stderr, \
        explain(proc)
    from mpi_collectives.services import library_settings
    info = json.loads(run([sys.executable, "-m", "mpi_collectives", "info", "--json"], cwd=HERE).stdout)
    impl = library_settings.implementation(info["version"])
    variable = {"mpich": "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM", "impi": "I_MPI_ADJUST_ALLREDUCE",
                "openmpi": "OMPI_MCA_coll_tuned_priority"}[impl]
    proc = tune("--ranks", "2", "--file", str(tmp_path / "t.json"), env={variable: "1"})
    assert proc.returncode == 1 and proc.stderr.strip() == (
        f"mpi-collectives tune: {variable} is set in your environment, so every launch would run with it "
        "and nothing could be compared. Fix: unset it for the tune run."), explain(proc)
    assert not (tmp_path / "t.json").exists()


def test_the_choice_keeps_only_values_clearly_faster():
    from mpi_collectives.tools.bench.tune import choose
    defaults = {"all-reduce": {8: 1.0, 65536: 10.0}, "all-gather": {8: 1.0, 65536: 10.0},
                "reduce-scatter": {8: 1.0, 65536: 10.0}}
    faster = {op: {s: t * 0.5 for s, t in by_size.items()} for op, by_size in defaults.items()}
    within_noise = {op: {s: t * 0.97 for s, t in by_size.items()} for op, by_size in defaults.items()}
    from mpi_collectives.services.library_settings import KNOWN
    algorithms = {(v.name, value): {op: defaults[op] for op in v.ops} for v in KNOWN["mpich"][1:] for value in v.values}
    kept, rows = choose("mpich", {("MPIR_CVAR_DEVICE_COLLECTIVES", "all"): defaults,
                                  ("MPIR_CVAR_DEVICE_COLLECTIVES", "none"): faster, **algorithms}, defaults)
    assert kept == {"MPIR_CVAR_DEVICE_COLLECTIVES": "none"}
    assert rows[:2] == [("MPIR_CVAR_DEVICE_COLLECTIVES", "all", 1.0), ("MPIR_CVAR_DEVICE_COLLECTIVES", "none", 0.5)]
    kept, _ = choose("mpich", {("MPIR_CVAR_DEVICE_COLLECTIVES", "all"): defaults,
                               ("MPIR_CVAR_DEVICE_COLLECTIVES", "none"): within_noise, **algorithms}, defaults)
    assert kept == {}
    # MPICH's algorithm per collective, judged on its own collective; one that needs the generic
    # path drops a device-collectives value measured without it.
    ring = {**algorithms, ("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM", "ring"): {"all-reduce": faster["all-reduce"]}}
    kept, _ = choose("mpich", {("MPIR_CVAR_DEVICE_COLLECTIVES", "all"): within_noise,
                               ("MPIR_CVAR_DEVICE_COLLECTIVES", "none"): defaults, **ring}, defaults)
    assert kept == {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}, kept
    # Intel MPI: one algorithm per collective, each judged on its own collective only.
    only = lambda op, f: {op: {s: t * f for s, t in defaults[op].items()}}  # noqa: E731
    measured = {("I_MPI_ADJUST_ALLREDUCE", v): only("all-reduce", f) for v, f in (("1", 1.2), ("2", 0.6), ("8", 0.9))}
    measured.update({("I_MPI_ADJUST_ALLGATHER", v): only("all-gather", 1.1) for v in ("1", "2", "3")})
    measured.update({("I_MPI_ADJUST_REDUCE_SCATTER", v): only("reduce-scatter", f)
                     for v, f in (("1", 0.99), ("2", 0.8), ("3", 0.7))})
    kept, _ = choose("impi", measured, defaults)
    assert kept == {"I_MPI_ADJUST_ALLREDUCE": "2", "I_MPI_ADJUST_REDUCE_SCATTER": "3"}
    # Different algorithms winning different sizes: the winners as Intel MPI's size ranges, which
    # meet halfway (geometrically) between the sizes measured, 8 B and 64 KiB here.
    per_size = lambda op, f8, f64: {op: {8: defaults[op][8] * f8, 65536: defaults[op][65536] * f64}}  # noqa: E731
    measured["I_MPI_ADJUST_ALLREDUCE", "1"] = per_size("all-reduce", 0.5, 1.0)
    measured["I_MPI_ADJUST_ALLREDUCE", "2"] = per_size("all-reduce", 1.2, 1.1)
    measured["I_MPI_ADJUST_ALLREDUCE", "8"] = per_size("all-reduce", 1.0, 0.6)
    # The defaults win the small all-gather: only the large range is set.
    measured["I_MPI_ADJUST_ALLGATHER", "3"] = per_size("all-gather", 1.3, 0.5)
    kept, rows = choose("impi", measured, defaults)
    assert kept == {"I_MPI_ADJUST_ALLREDUCE": "1:0-724;8:725-2147483647", "I_MPI_ADJUST_ALLGATHER": "3:725-2147483647",
                    "I_MPI_ADJUST_REDUCE_SCATTER": "3"}, kept
    assert ("I_MPI_ADJUST_ALLREDUCE", "1:0-724;8:725-2147483647", pytest.approx(np.sqrt(0.5 * 0.6))) in rows
    from mpi_collectives.services.library_settings import KNOWN, allowed_value
    assert all(allowed_value(next(v for v in KNOWN["impi"] if v.name == name), value) for name, value in kept.items())

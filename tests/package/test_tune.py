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

from helpers import HERE, SAME_ON_EVERY_FAMILY, TEST_CONFIG, explain, mpiexec_path, mpirun, run

# Once per MPI family (its candidates are the family's own), on the newest jax of each family's
# venv only: MPICH's candidates are 6 launches and the defaults' (launches()), and what depends on
# jax (JAX's collectives through initialize()) the other tests run on every jax.


def tune(*args, env=None):
    # MPI_COLLECTIVES_BENCH_SMOKE: the training step tune confirms a kept value on, 256 wide (CI time).
    return run([sys.executable, "-m", "mpi_collectives", "tune", *args],
               env={"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None,
                    "MPI_COLLECTIVES_BENCH_SMOKE": "1", **(env or {})},
               cwd=HERE, timeout=900)


@pytest.mark.jax
@pytest.mark.skipif(TEST_CONFIG == "standard", reason="the standard ABI's library is MPICH's: its candidates and "
                    "launches are the mpich configuration's tune run (CI time)")
def test_tune_writes_what_initialize_then_uses(tmp_path):
    from mpi_collectives.services import library_settings
    path = tmp_path / "conf" / "tuning.json"
    proc = tune("--ranks", "2", "--max-bytes", "65536", "--rounds", "1", "--scale", "0.1", "--binding", "yes",
                "--node-path-max-bytes", "1048576", "--file", str(path))
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

    # The binding, on the training step, where initialize() would bind (Hydra leaves the ranks
    # unbound; Open MPI's mpirun and Intel MPI's mpiexec bind them).
    if "binding not measured: initialize() binds nothing here (the launcher or you bound the ranks already)" in \
            proc.stderr:
        assert "bind_cpus" not in entry, entry
    else:
        assert entry["bind_cpus"] in (0, 1, 2) and sorted(entry["measured"]["binding"]) == ["0", "1", "2"], entry
        assert f"MPI_COLLECTIVES_BIND_CPUS={entry['bind_cpus']}: " in proc.stderr, explain(proc)

    # initialize() under the same launcher, shape and MPI takes the entry.
    shown = ", ".join(f"{k}={v}" for k, v in entry["settings"].items())
    expected = (f"mpi-settings: {shown} (measured by mpi-collectives tune on {entry['date']})" if shown else
                "mpi-settings: the library's defaults (measured fastest by mpi-collectives tune)")
    proc = run([mpiexec_path(), "-n", "2", sys.executable, "-m", "mpi_collectives", "info", "--init"],
               env={"MPI_COLLECTIVES_TUNING_FILE": str(path)}, cwd=HERE)
    assert proc.returncode == 0 and expected in proc.stdout, explain(proc)
    if "bind_cpus" in entry:
        assert (f"MPI_COLLECTIVES_BIND_CPUS={entry['bind_cpus']} measured fastest by mpi-collectives tune on "
                f"{entry['date']})") in proc.stdout, explain(proc)
    # The node path, measured where the two ranks share this node: its limits, or off, in the entry,
    # and what initialize() would give the native layer in info --init.
    node = entry["node_path"]
    assert sorted(entry["measured"]["node_path"]) == sorted(map(str, [65536, 262144, 1048576])), entry
    # ... the window's copies or reads in place, and the round's limit, measured on this node too
    assert node["direct"] in (0, 1) and node["round"] in (0, 8, 512, 4096, 65536), entry
    assert sorted(entry["measured"]["node_path_round"], key=int) == ["8", "512", "4096", "65536"], entry
    assert entry["measured"]["node_path_window_vs_direct"] > 0, entry
    if node["mode"] and not node["collectives"]:
        assert "node-path: the library's own large collectives; small collectives in one round" in proc.stdout, \
            explain(proc)
    elif node["mode"]:
        assert node["min"] in (65536, 262144, 1048576) and node["max"] in (0, 65536, 262144), entry
        assert set(node["collectives"].split(",")) <= {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"}
        assert f"node-path: {node['collectives']} from {node['min']}" in proc.stdout, explain(proc)
    else:
        assert "node-path: off (MPI_COLLECTIVES_NODE_PATH=0: the library's own collectives measured faster by " \
            f"mpi-collectives tune on {entry['date']})" in proc.stdout, explain(proc)


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


def test_the_defaults_twice_set_how_much_faster_a_value_must_be():
    """The defaults' two launches a round: their spread is the noise a kept value must beat, when
    it is above MIN_GAIN; the baseline is their geometric mean."""
    from mpi_collectives.tools.bench.tune import MIN_GAIN, between, choose, noise
    first = {"all-reduce": {8: 1.0, 65536: 10.0}, "all-gather": {8: 1.0, 65536: 10.0},
             "reduce-scatter": {8: 1.0, 65536: 10.0}}
    again = {op: {8: t[8] * 1.21, 65536: t[65536]} for op, t in first.items()}
    assert noise(first, first) == 0.0 and noise(first, again) == pytest.approx(0.1)  # sqrt(1.21) - 1
    assert between(first, again)["all-gather"] == {8: pytest.approx(1.1), 65536: 10.0}
    baseline = between(first, again)
    from mpi_collectives.services.library_settings import KNOWN
    same = {(v.name, value): {op: baseline[op] for op in v.ops} for v in KNOWN["mpich"] for value in v.values}
    ring = {**same, ("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM", "ring"):
            {"all-reduce": {b: t * 0.92 for b, t in baseline["all-reduce"].items()}}}
    assert choose("mpich", ring, baseline, MIN_GAIN)[0] == {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}
    assert choose("mpich", ring, baseline, max(MIN_GAIN, noise(first, again)))[0] == {}  # 8% is inside 10% noise


def test_every_value_is_measured_once_beside_only_other_collectives():
    """launches(): variables share a launch only where each changes its own collectives and what
    they need beside them agrees, so each value is judged on times nothing else changed."""
    from mpi_collectives.services.library_settings import KNOWN, with_implied
    from mpi_collectives.tools.bench.tune import launches
    expected_launches = {"mpich": 6, "impi": 3, "openmpi": 3}
    for impl, variables in KNOWN.items():
        plan = launches(impl)
        assert len(plan) == expected_launches[impl], (impl, plan)
        judged = [key for _, _, j in plan for key in j]
        assert sorted(judged) == sorted((v.name, value) for v in variables for value in v.values), impl
        for ops, settings, launch in plan:
            seen = [op for key_ops in launch.values() for op in key_ops]
            assert len(seen) == len(set(seen)) and set(seen) == set(ops), (impl, launch)
            for name, value in launch:
                assert with_implied(impl, {name: value}).items() <= settings.items(), (impl, name, value, settings)
            named = {name for name, _ in launch}
            assert set(settings) - named <= {k for v in variables if v.name in named for k in v.implies}, settings
    # MPICH's device collectives change every collective: never beside an algorithm, whose path
    # they would contradict.
    assert all("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM" not in s or s["MPIR_CVAR_DEVICE_COLLECTIVES"] == "none"
               for _, s, _ in launches("mpich"))


def test_kept_settings_must_not_slow_jax_or_the_training_step(monkeypatch):
    """confirm(): the kept settings against the defaults on JAX's collectives, then on the training
    step; a slower step (beyond MIN_GAIN, its noise) drops them, as slower collectives do."""
    import types

    from mpi_collectives.tools.bench import tune
    args = types.SimpleNamespace(rounds=2)
    kept = {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}

    def confirm(jax_factor, step_factor):
        calls = []

        def measure(_args, path, sizes, ops, settings):
            calls.append(path if path == "jax-step" else (path, tuple(ops)))
            factor = 1.0 if not settings else (jax_factor if path == "jax-mpi" else step_factor)
            if path == "jax-step":
                return {"train-step": {"weights [in, out]": 0.2 * factor, "weights [out, in]": 0.1 * factor}}
            return {op: {s: 1e-3 * factor for s in sizes} for op in ops}
        monkeypatch.setattr(tune, "measure", measure)
        said = []
        got = tune.confirm(args, "mpich", dict(kept), [8, 65536], ["all-reduce", "all-gather", "reduce-scatter"],
                           said.append)
        return got, calls, said

    (k, jax_ratio, step_ratio), calls, _ = confirm(0.8, 1.03)
    assert (k, jax_ratio, step_ratio) == (kept, pytest.approx(0.8), pytest.approx(1.03))
    # kept and defaults, interleaved, 2 rounds each; JAX's collectives only those the kept value changes
    assert calls == [("jax-mpi", ("all-reduce",))] * 4 + ["jax-step"] * 4
    (k, _, step_ratio), _, said = confirm(0.8, 1.1)
    assert k == {} and step_ratio == pytest.approx(1.1)
    assert said[-1] == f"the training step was 1.10x as slow with {kept} as with the defaults: none kept"
    (k, jax_ratio, step_ratio), calls, _ = confirm(1.02, 0.9)
    assert (k, jax_ratio, step_ratio) == ({}, pytest.approx(1.02), None) and "jax-step" not in calls


@SAME_ON_EVERY_FAMILY
@pytest.mark.jax
def test_the_step_tune_confirms_on_runs_and_checks_its_result(tmp_path):
    """The worker's jax-step path (the bench's training step alone, through initialize()), as tune
    launches it: both weight layouts, every rank's result checked against one device's."""
    out = tmp_path / "step.json"
    proc = mpirun(2, [sys.executable, "-m", "mpi_collectives.tools.bench.worker", "jax-step", str(out), "8", "0.1"],
                  env={"MPI_COLLECTIVES_BENCH_SMOKE": "1", "JAX_PLATFORMS": "cpu", "MPITRAMPOLINE_LIB": None,
                       "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None})
    assert proc.returncode == 0, explain(proc)
    got = json.loads(out.read_text())["train-step"]
    assert sorted(got) == ["step", "step-out-in"] and all(len(t) == 3 and min(t) > 0 for t in got.values()), got


# The 16-core node's steps by MPI_COLLECTIVES_BIND_CPUS, ms ([in, out], [out, in]): 2026-11-26, two
# leases (docs/benchmarks/node-16/README.md, "Binding").
EIGHT_RANKS = {"1": (200.7, 100.4), "2": (197.3, 125.5), "0": (183.1, 127.8)}
SIXTEEN_RANKS = {"1": (424.8, 202.7), "2": (258.1, 151.4), "0": (357.3, 202.2)}
SIXTEEN_FIRST_LEASE = {"1": (265.5, 152.3), "2": (262.0, 150.0), "0": (327.9, 213.7)}


def steps(by_value):
    return {v: {"weights [in, out]": a / 1e3, "weights [out, in]": b / 1e3} for v, (a, b) in by_value.items()}


@pytest.mark.parametrize("measured, spread, chosen", [
    (EIGHT_RANKS, 0.02, "0"),           # both bindings slower than none on [in, out] by 8-10%: issue 45, item 2
    (EIGHT_RANKS, 0.12, "1"),           # ... but not beyond a noise of 12%: the built-in stays
    (SIXTEEN_RANKS, 0.02, "2"),         # the whole rank slower than none on [in, out]; callers only fastest
    (SIXTEEN_FIRST_LEASE, 0.02, "1"),   # callers only within the noise of the built-in: it stays
])
def test_a_binding_is_kept_only_where_no_step_is_slower_than_unbound(measured, spread, chosen):
    from mpi_collectives.tools.bench import tune
    value, why = tune.choose_binding(steps(measured), spread)
    assert value == chosen, why
    unbound = steps(measured)["0"]
    margin = max(tune.MIN_GAIN, spread)
    assert all(t <= unbound[layout] * (1 + margin) for layout, t in steps(measured)[value].items())


def test_binding_is_measured_on_the_step_where_initialize_would_bind(monkeypatch):
    """binding(): the training step under each value, with the kept library settings, the built-in
    launched first and last in every round; not measured where nothing would be bound, where each
    rank has one CPU (unless asked), or where you set the binding yourself."""
    import types

    from mpi_collectives.tools.bench import tune
    kept = {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}
    sixteen = frozenset(range(16))
    calls = []

    def measure(_args, path, sizes, ops, settings):
        calls.append((path, settings))
        (a, b) = EIGHT_RANKS[settings["MPI_COLLECTIVES_BIND_CPUS"]]
        return {"train-step": {"weights [in, out]": a / 1e3, "weights [out, in]": b / 1e3}}
    monkeypatch.setattr(tune, "measure", measure)
    monkeypatch.delenv("MPI_COLLECTIVES_BIND_CPUS", raising=False)
    said = []
    args = types.SimpleNamespace(rounds=2, binding="auto")
    value, bound = tune.binding(args, "mpich", kept, [("node", sixteen)] * 8, said.append)
    assert value == "0" and sorted(bound) == ["0", "1", "2"], said
    assert [settings["MPI_COLLECTIVES_BIND_CPUS"] for _, settings in calls] == ["1", "2", "0", "1"] * 2
    assert all(path == "jax-step" and settings["MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"] == "ring"
               and settings["MPIR_CVAR_DEVICE_COLLECTIVES"] == "none" for path, settings in calls), calls
    assert said[-1].startswith("MPI_COLLECTIVES_BIND_CPUS=0: unbound: the built-in was more than 5% slower"), said
    report = tune.binding_report(bound, value)
    assert "  0 (unbound): weights [in, out] 183.1 ms, weights [out, in] 127.8 ms  kept" in report, report

    calls.clear()
    for placed, binding, words in [
        ([("node", sixteen)] * 16, "auto", "each rank's slice is one CPU"),
        ([("node", frozenset([r])) for r in range(8)], "yes", "the launcher or you bound the ranks already"),
        ([("node", sixteen)] * 8, "no", None)]:
        said.clear()
        assert tune.binding(types.SimpleNamespace(rounds=2, binding=binding), "mpich", kept, placed,
                            said.append) == (None, {})
        assert (said == [] if words is None else words in said[0]), said
    monkeypatch.setenv("MPI_COLLECTIVES_BIND_CPUS", "2")
    said.clear()
    assert tune.binding(args, "mpich", kept, [("node", sixteen)] * 8, said.append) == (None, {})
    assert said == ["binding not measured: MPI_COLLECTIVES_BIND_CPUS=2 is set in your environment, and a job that "
                    "sets it keeps it"] and calls == []


ON = {"mode": 1, "collectives": "all-reduce"}
OFF = {"mode": 0, "collectives": "", "min": 0, "max": 0}


@pytest.mark.parametrize("ratios, chosen", [
    ([1.1, 0.9, 0.5, 0.5, 0.6, 0.7], dict(ON, min=1 << 18, max=0)),       # faster up to the last size
    ([1.1, 0.9, 0.5, 0.5, 0.6, 1.2], dict(ON, min=1 << 18, max=1 << 24)),  # slower at the last
    ([0.9, 1.1, 0.5, 0.5, 1.2, 1.3], dict(ON, min=1 << 20, max=1 << 22)),  # the longer run
    ([1.1, 1.0, 0.97, 0.98, 1.2, 1.2], OFF),                               # never 5% faster: off
    ([1.2] * 6, OFF)])
def test_the_node_path_takes_the_collectives_and_sizes_where_it_was_faster(ratios, chosen):
    from mpi_collectives.tools.bench import tune
    sizes = tune.NODE_SIZES
    # all-reduce at the ratio; all-gather as fast either way, so not taken, and the per-size mean is sqrt(ratio)
    path = {"all-reduce": {b: r for b, r in zip(sizes, ratios)}, "all-gather": {b: 2.0 for b in sizes}}
    library = {"all-reduce": {b: 1.0 for b in sizes}, "all-gather": {b: 2.0 for b in sizes}}
    got, per_size = tune.choose_node_path(path, library)
    assert got == chosen, per_size
    assert per_size[sizes[2]][0] == pytest.approx(ratios[2] ** 0.5) and per_size[sizes[2]][1]["all-gather"] == 1.0
    # all-gather faster too, at the larger sizes only: both taken, the limits those of their mean
    path["all-gather"] = {b: 2.0 * (0.5 if b >= 1 << 22 else 1.0) for b in sizes}
    both, _ = tune.choose_node_path(path, library)
    if chosen["mode"]:
        assert both["collectives"] == "all-reduce,all-gather", both


def measured_node_path(monkeypatch, path_ratio, window_ratio=1.0, round_ratio=1.0):
    """tune.measure replaced: the path (MPI_COLLECTIVES_NODE_PATH=1) path_ratio times the library's
    time at every size, window_ratio times more with every byte through its window (_DIRECT=0), and
    with the round round_ratio(size) times without (_ROUND=0); returns the list of its calls (path,
    ops, settings). None of the node path's settings in the environment."""
    from mpi_collectives.services import library_settings
    from mpi_collectives.tools.bench import tune
    calls = []

    def measure(_args, path, sizes, ops, settings):
        calls.append((path, list(ops), settings))
        faster = path_ratio if settings["MPI_COLLECTIVES_NODE_PATH"] == "1" else 1.0
        if settings.get("MPI_COLLECTIVES_NODE_PATH_DIRECT") == "0":
            faster *= window_ratio
        rounds = settings.get("MPI_COLLECTIVES_NODE_PATH_ROUND", "0") != "0"
        return {op: {b: faster * b * (round_ratio(b) if rounds and callable(round_ratio) else
                                      round_ratio if rounds else 1.0) for b in sizes} for op in ops}
    monkeypatch.setattr(tune, "measure", measure)
    for name in library_settings.NODE_PATH_TUNED:
        monkeypatch.delenv(name, raising=False)
    return calls


@pytest.mark.parametrize("composed, chosen", [
    (0.5, {"mode": 1, "collectives": "all-reduce", "min": 1 << 16, "max": 0, "across_nodes": 1}),
    (1.2, None)])
def test_the_composed_all_reduce_is_measured_where_the_ranks_span_nodes(monkeypatch, composed, chosen):
    """node_path() over 2 nodes of 8 ranks: JAX's all-reduce alone, composed across nodes against
    the library's, in interleaved rounds; taken with across_nodes where faster, and where it is
    not, no node_path in the entry (the built-in choice) but the ratios reported."""
    import types

    from mpi_collectives.tools.bench import tune
    calls = measured_node_path(monkeypatch, composed)
    args = types.SimpleNamespace(rounds=2, node_path="auto", node_path_max_bytes=1 << 24)
    said = []
    node, measured, extra = tune.node_path(args, "mpich", {}, 8, 2, said.append)
    assert node == chosen and sorted(measured) == tune.NODE_SIZES[:5] and extra == {}, said
    assert [c[2]["MPI_COLLECTIVES_NODE_PATH"] for c in calls] == ["1", "0", "1", "0"], calls
    assert all(ops == ["all-reduce"] for _, ops, _ in calls), calls
    assert calls[0][2]["MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES"] == "1", calls
    assert "MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES" not in calls[1][2], calls
    report = tune.node_path_report(measured, node)
    assert f"{composed:.2f}x" in report, report
    assert ("composed across nodes from 65536 bytes" if chosen else "not composed across nodes") in report, report


def test_the_node_path_is_measured_where_the_ranks_share_a_node(monkeypatch):
    """node_path(): JAX's collectives the path takes, with it on at every size and off, in interleaved
    rounds with the kept library settings; not measured across nodes, with one rank a node, with
    --node-path no, or where you set any of its settings."""
    import types

    from mpi_collectives.services import library_settings
    from mpi_collectives.tools.bench import tune
    calls = measured_node_path(monkeypatch, 0.5)
    args = types.SimpleNamespace(rounds=2, node_path="auto", node_path_max_bytes=1 << 24, ranks=8)
    said = []
    node, measured, extra = tune.node_path(args, "mpich", {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}, 8, 1,
                                           said.append)
    assert node == {"mode": 1, "collectives": "all-reduce,all-gather,reduce-scatter,all-to-all", "min": 1 << 16,
                    "max": 0, "direct": 1, "round": 65536} and sorted(measured) == tune.NODE_SIZES[:5], said
    # Two rounds of the path, its window alone and the library; then two of the round and none.
    large, small = calls[:6], calls[6:]
    said_noise = [s for s in said if s.startswith("the round's two launches differed by")]
    assert said_noise == ["the round's two launches differed by 0.0%"], said
    assert [c[2]["MPI_COLLECTIVES_NODE_PATH"] for c in large] == ["1", "1", "0"] * 2, calls
    assert [c[2].get("MPI_COLLECTIVES_NODE_PATH_DIRECT") for c in large] == [None, "0", None] * 2, calls
    assert all(path == "jax-mpi" and ops == list(library_settings.NODE_PATH_COLLECTIVES)
               and s["MPIR_CVAR_DEVICE_COLLECTIVES"] == "none" for path, ops, s in large), calls
    assert large[0][2]["MPI_COLLECTIVES_NODE_PATH_COLLECTIVES"] == ",".join(library_settings.NODE_PATH_COLLECTIVES)
    assert large[0][2]["MPI_COLLECTIVES_NODE_PATH_MIN"] == "0" and large[0][2]["MPI_COLLECTIVES_NODE_PATH_MAX"] == "0"
    # the round launched twice a round, first and last: their spread is the noise it must beat
    assert [c[2]["MPI_COLLECTIVES_NODE_PATH_ROUND"] for c in small] == ["65536", "0", "65536"] * 2, calls
    assert all(path == "jax-mpi" and ops == list(tune.ROUND_COLLECTIVES) and s["MPI_COLLECTIVES_NODE_PATH"] == "1"
               and "MPI_COLLECTIVES_NODE_PATH_MIN" not in s for path, ops, s in small), calls
    assert extra == {"window_vs_direct": 1.0, "round": {b: 1.0 for b in tune.round_sizes(8)}}, extra
    report = tune.node_path_report(measured, node, extra)
    assert "1.00x (" not in report and "0.50x" in report, report
    assert "every byte through the window, time against reading the peers in place: 1.00x" in report, report
    said.clear()
    assert tune.node_path(args, "mpich", {}, 1, 4, said.append) == (None, {}, {})
    assert "do not share one" in said[0], said
    assert tune.node_path(types.SimpleNamespace(node_path="no"), "mpich", {}, 8, 1, said.append) == (None, {}, {})
    for name in ("MPI_COLLECTIVES_NODE_PATH_MIN", "MPI_COLLECTIVES_NODE_PATH_ROUND"):
        monkeypatch.setenv(name, "1048576")
        said.clear()
        assert tune.node_path(args, "mpich", {}, 8, 1, said.append) == (None, {}, {})
        assert f"{name} is set in your environment" in said[0], said
        monkeypatch.delenv(name)


@pytest.mark.parametrize("window, rounds, chosen", [
    # the window's copies 10% faster than reading in place: kept; the round slower from 4 KiB: up to 512 B
    (0.9, lambda b: 1.2 if b >= 4096 else 0.8,
     {"mode": 1, "collectives": "all-reduce,all-gather,reduce-scatter,all-to-all", "min": 1 << 16, "max": 0,
      "direct": 0, "round": 512 * 7}),
    (0.97, lambda b: 1.2, None),     # within 5%: reading in place stays; the round slower everywhere: off
    (1.3, lambda b: 1.04, None),     # 4% slower is noise: the round stays whole
    (1.0, lambda b: 1.2 if b == 8 else 0.8, None)])  # slower at 8 B alone, faster above: a noisy launch
def test_tune_chooses_the_window_or_reading_in_place_and_the_rounds_limit(monkeypatch, window, rounds, chosen):
    import types

    from mpi_collectives.tools.bench import tune
    measured_node_path(monkeypatch, 0.5, window_ratio=window, round_ratio=rounds)
    args = types.SimpleNamespace(rounds=1, node_path="auto", node_path_max_bytes=1 << 24, ranks=8)
    node, _, extra = tune.node_path(args, "mpich", {}, 8, 1, lambda _: None)
    if chosen:
        assert node == chosen, node
    else:
        assert node["direct"] == 1 and node["round"] == (0 if rounds(9360) > 1.05 else 65536), node
    assert extra["window_vs_direct"] == pytest.approx(window), extra
    # The round's sizes: 8 B to the all-reduce whose 7 peers' data fill 64 KiB.
    assert sorted(extra["round"]) == [8, 512, 4096, 9360], extra


def test_the_rounds_limit_must_beat_the_runs_noise():
    """The round judged slower only by more than its two launches' spread, where that is over 5%."""
    from mpi_collectives.tools.bench import tune
    sizes = tune.round_sizes(2)
    without = {"all-reduce": {b: 1.0 for b in sizes}}
    slower = {"all-reduce": {b: 1.0 if b < 65536 else 1.08 for b in sizes}}
    assert tune.choose_round(slower, without, 2)[0] == 4096
    assert tune.choose_round(slower, without, 2, min_gain=0.1)[0] == 65536


def test_the_library_faster_for_large_collectives_and_the_round_faster_leaves_the_round_alone():
    import types

    from mpi_collectives.tools.bench import tune
    off = {"mode": 0, "collectives": "", "min": 0, "max": 0}
    assert tune.with_direct_and_round(off, 1, 4096) == {"mode": 1, "collectives": "", "min": 0, "max": 0,
                                                        "direct": 1, "round": 4096}
    assert tune.with_direct_and_round(off, 1, 0) == dict(off, direct=1, round=0)
    words = tune.node_path_words(tune.with_direct_and_round(off, 1, 4096))
    assert words.startswith("the library's own large collectives") and "ROUND=4096" in words, words
    assert tune.round_sizes(2) == [8, 512, 4096, 65536] and tune.round_sizes(17) == [8, 512, 4096]
    # more ranks on a node than an 8 B all-reduce's peers' data fit: not measured, the built-in kept
    assert tune.round_sizes(9000) == [] and tune.small_in_one_round(types.SimpleNamespace(ranks=9000), {}, print) == (
        65536, {})

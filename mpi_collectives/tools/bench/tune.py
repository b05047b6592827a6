"""`mpi-collectives tune`: measure the MPI library's own collective settings on
the nodes and with the ranks per node a job will use, keep the fastest, and
write them where initialize() reads them (library_settings.py).

    mpi-collectives tune --ranks 16                              # this node, its mpiexec
    mpi-collectives tune --ranks 64 --launcher "srun --mpi=pmi2" # inside an allocation

An MPI library reads its settings once, at MPI_Init, so settings are
compared across launches: the library's defaults, and each known variable
(library_settings.KNOWN) at each of its values, on the C loop through the
wrapper of the collectives the variable changes. Variables that change
different collectives and need nothing contradictory beside them share a
launch (launches()): MPICH's all-reduce, all-gather and reduce-scatter
algorithms are one launch per value index, not one per value, which halves
the launches. The launches run in interleaved rounds (--rounds), so that all
see the same machine, and each candidate's median per size over the rounds is
compared with the defaults'.
The defaults are launched twice in every round, first and last: their
difference is the run's own noise, and a value is kept when it is faster than
the defaults (the two launches' geometric mean) by at least MIN_GAIN or that
noise, whichever is larger, as a geometric mean over the collectives and
sizes it changes. Where the library takes a value per
message size range (Intel MPI's I_MPI_ADJUST_*) and different values won
different sizes, the winners as size ranges are one more candidate, judged the
same way (by_size). Then the kept settings are confirmed where a program
meets them, against the library's defaults in interleaved rounds: those of
JAX's all-reduce, all-gather and reduce-scatter that the kept settings change,
through initialize() (nothing kept when they are slower), then the bench's data-parallel training step, weights
[in, out] and [out, in] (nothing kept when it is more than MIN_GAIN slower:
the step's compute dilutes a collective's gain, and its noise is larger). Last, where initialize()
would bind the ranks (--binding), the same step under each MPI_COLLECTIVES_BIND_CPUS with the kept
settings: a binding is kept only where no weight layout is slower than unbound beyond the noise
(choose_binding), the rule of issue 45's item 2. Where the job's ranks share one node, JAX's
collectives that the node's own data path takes are measured with it and with it off (the
library's own), 64 KiB to 64 MiB in interleaved rounds; the collectives and sizes where the path
was faster become the entry's node path choice (choose_node_path), or the path is turned off where
it never was. On one node two more choices are measured the same way: the path's reads in place
(MPI_COLLECTIVES_NODE_PATH_DIRECT=1) against every byte through the window (=0), on the path's
measurement above, the window kept where it was faster (choose_direct); and small collectives in
one round (MPI_COLLECTIVES_NODE_PATH_ROUND) against the library's check and call, 8 B up to the
round's largest, its limit lowered below the sizes from which it was slower beyond the noise
(choose_round).
Where they span nodes with two or more on each, JAX's all-reduce composed with each
node's window (MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1) is measured against the library's the
same way, and taken where faster (node_path_across; --node-path no skips both). The entry is written for this
MPI installation, ranks per node and node size; a rerun replaces it. A job
uses it only where every rank can tell that every node holds that many ranks
(library_settings.job_layout): on one node, or under srun.
"""
import argparse
import datetime
import json
import math
import os
import sys
import tempfile
import time

import numpy as np

from ...services import library_settings, tuning
from ...base import mpi
from . import run as bench_run

SIZES = [8, 65536, 1 << 20, 1 << 24]
MIN_GAIN = 0.05  # a kept value is at least 5% faster (geometric mean over sizes): below is noise
C_TARGET = "C via wrapper"
JAX_OPS = ("all-reduce", "all-gather", "reduce-scatter")
STEP_SHOWN = {"step": "weights [in, out]", "step-out-in": "weights [out, in]"}
# MPI_COLLECTIVES_BIND_CPUS as tune tries it: the built-in first, and its second launch of a round.
BUILT_IN, CALLERS, NONE = str(library_settings.BUILT_IN_BINDING), str(tuning.CALLERS_ONLY), "0"
BINDINGS_TRIED = (BUILT_IN, CALLERS, NONE)
# The node path's sizes: from below its built-in threshold (256 KiB) to its built-in limit (64 MiB,
# --node-path-max-bytes), since the limits are what is measured.
NODE_SIZES = [1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26]
ROUND_COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter")  # those the round carries


def round_sizes(ranks: int) -> list:
    """The round's sizes for `ranks` ranks: 8 B up to the largest all-reduce whose peers' data fit
    the round's most (library_settings.ROUND_MOST, read from the peers: 64 KiB at 2 ranks, 4 KiB
    at 17)."""
    largest = library_settings.ROUND_MOST // (ranks - 1) // 8 * 8
    return sorted({b for b in (8, 512, 4096, largest) if 8 <= b <= largest})


AGAIN = f"{BUILT_IN} again"


def parse(argv, prog, parser_class):
    parser = parser_class(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=2, help="ranks of every launch: the job's (default: 2)")
    parser.add_argument("--max-bytes", type=int, default=SIZES[-1],
                        help=f"largest message size measured (default: {SIZES[-1]})")
    parser.add_argument("--scale", type=float, default=0.5, help="multiplies every iteration count (default: 0.5)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of every candidate (default: 3)")
    parser.add_argument("--file", default=None,
                        help="the tuning file to write (default: MPI_COLLECTIVES_TUNING_FILE, else "
                             "~/.config/mpi-collectives/tuning.json)")
    parser.add_argument("--dry-run", action="store_true", help="measure and print, write nothing")
    parser.add_argument("--mpiexec", default=bench_run.launching.mpiexec_path(),
                        help="the mpiexec that starts each launch (default: the one beside this Python)")
    parser.add_argument("--launcher", default=None, metavar="COMMAND",
                        help="the command that starts each launch instead of --mpiexec, e.g. \"srun --mpi=pmi2\"")
    parser.add_argument("--binding", choices=("auto", "yes", "no"), default="auto",
                        help="also measure MPI_COLLECTIVES_BIND_CPUS (1, 2, 0) on the training step; auto: where "
                             "initialize() would bind and each rank's slice has at least 2 CPUs (default: auto)")
    parser.add_argument("--node-path", choices=("auto", "no"), default="auto",
                        help="also measure the node's own data path against the library's collectives, where the "
                             "ranks share one node, or its all-reduce composed across nodes, where they span "
                             "several (default: auto)")
    parser.add_argument("--node-path-max-bytes", type=int, default=NODE_SIZES[-1],
                        help=f"largest size the node path is measured at (default: {NODE_SIZES[-1]}; from "
                             f"{NODE_SIZES[0]})")
    parser.add_argument("--timeout", type=int, default=600, help="seconds for each launch (default: 600)")
    args = parser.parse_args(argv)
    args.coordinator_host = "127.0.0.1"  # bench_run.launch's gloo coordinator: no gloo path here
    if args.ranks < 2:
        parser.error("argument --ranks: tuning collectives needs at least 2 ranks")
    return args


def measure(args, path, sizes, ops, settings) -> dict:
    """{op: {bytes: median seconds}} of one launch of the bench worker, with the MPI library's
    settings exactly `settings` (MPI_COLLECTIVES_MPI_SETTINGS=0: initialize() adds none; `settings`
    may also name MPI_COLLECTIVES_BIND_CPUS); for
    the training step (path jax-step), {"train-step": {weights layout: median seconds}}."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        # The binding a candidate names, else yours, else the built-in: never a tuning file's.
        env = {"MPI_COLLECTIVES_BIND_CPUS": os.environ.get("MPI_COLLECTIVES_BIND_CPUS", BUILT_IN), **settings,
               "MPI_COLLECTIVES_MPI_SETTINGS": "0"}
        bench_run.launch(args, args.ranks, ["mpi_collectives.tools.bench.worker", path, out, ",".join(map(str, sizes)),
                                            str(args.scale), ",".join(ops)], args.timeout, env)
        got = json.load(open(out))
    if path == "jax-step":
        return {"train-step": {STEP_SHOWN[k]: float(np.median(t)) for k, t in got["train-step"].items()}}
    results = got["results_by_target"][C_TARGET] if path.startswith("c") else got["results"]
    return {op: {int(b): float(np.median(t)) for b, t in by_size.items()} for op, by_size in results.items()}


def ratio(times: dict, baseline: dict) -> float:
    """Geometric mean of times/baseline over every collective and size in `times`."""
    logs = [np.log(t / baseline[op][b]) for op, by_size in times.items() for b, t in by_size.items()]
    return float(np.exp(np.mean(logs)))


def median_of(runs: list) -> dict:
    """Per collective and size, the median over rounds."""
    return {op: {s: float(np.median([r[op][s] for r in runs])) for s in runs[0][op]} for op in runs[0]}


def rounds(args, path, sizes, candidates: dict) -> dict:
    """{key: {op: {bytes: median seconds}}} of every candidate (key: (ops, settings)), measured in
    interleaved rounds."""
    runs = {key: [] for key in candidates}
    for _ in range(args.rounds):
        for key, (ops, settings) in candidates.items():
            runs[key].append(measure(args, path, sizes, ops, settings))
    return {key: median_of(r) for key, r in runs.items()}


def launches(impl) -> list:
    """The C-loop launches that measure every known value once: [(ops, settings, {(variable,
    value): the collectives it is judged on})]. Variables join a group when their collectives
    differ from the group's and nothing either needs beside it (`implies`) names or contradicts
    the other: each changes only its own collective, so the k-th value of every variable of a
    group is measured in one launch, each on its own collectives."""
    groups = []
    for variable in library_settings.KNOWN[impl]:
        for group in groups:
            implies = {k: v for g in group for k, v in g.implies.items()}
            if (all(set(variable.ops).isdisjoint(g.ops) for g in group)
                    and all(implies.get(k, v) == v for k, v in variable.implies.items())
                    and variable.name not in implies and not {g.name for g in group} & set(variable.implies)):
                group.append(variable)
                break
        else:
            groups.append([variable])
    out = []
    for group in groups:
        for k in range(max(len(v.values) for v in group)):
            chosen = {v.name: v.values[k] for v in group if k < len(v.values)}
            judged = {(v.name, v.values[k]): v.ops for v in group if k < len(v.values)}
            ops = [op for op in JAX_OPS if any(op in o for o in judged.values())]
            out.append((ops, library_settings.with_implied(impl, chosen), judged))
    return out


def per_candidate(plan, measured) -> dict:
    """{(variable, value): {op: {bytes: seconds}}} from the launches' medians (measured[i]: launch
    i of `plan`), each value on its own collectives only."""
    return {key: {op: measured[i][op] for op in ops} for i, (_, _, judged) in enumerate(plan)
            for key, ops in judged.items()}


def noise(first: dict, again: dict) -> float:
    """How far two launches of the same settings differ: exp(mean |log(first/again)|) - 1 over
    every collective and size (0.1: 10% apart, typically)."""
    logs = [abs(np.log(t / again[op][b])) for op, by_size in first.items() for b, t in by_size.items()]
    return float(np.exp(np.mean(logs)) - 1)


def between(first: dict, again: dict) -> dict:
    """The two launches' geometric mean, per collective and size."""
    return {op: {b: float(np.sqrt(t * again[op][b])) for b, t in by_size.items()} for op, by_size in first.items()}


def by_size(variable, measured, baseline, min_gain=MIN_GAIN):
    """(value, ratio) of the value that won each measured size of the variable's one collective,
    as the library's size ranges (they meet halfway, geometrically, between measured sizes; a size
    the defaults win is left to the library), or None where one value, or none, wins every size.
    The ratio is the geometric mean over the sizes."""
    (op,) = variable.ops  # a by-size variable changes one collective: one set of ranges
    sizes = sorted(baseline[op])
    logs, ranges, winners = [], [], set()
    for i, size in enumerate(sizes):
        value, r = min(((v, measured[(variable.name, v)][op][size] / baseline[op][size]) for v in variable.values),
                       key=lambda vr: vr[1])
        value, r = (value, r) if r <= 1 - min_gain else (None, 1.0)
        logs.append(np.log(r))
        winners.add(value)
        lo = 0 if i == 0 else math.isqrt(sizes[i - 1] * size) + 1
        hi = library_settings.LARGEST if i == len(sizes) - 1 else math.isqrt(size * sizes[i + 1])
        if value is None:
            continue
        if ranges and ranges[-1][0] == value and ranges[-1][2] == lo - 1:
            ranges[-1][2] = hi
        else:
            ranges.append([value, lo, hi])
    if len(winners) < 2:
        return None
    return ";".join(f"{v}:{lo}-{hi}" for v, lo, hi in ranges), float(np.exp(np.mean(logs)))


def choose(impl, measured, baseline, min_gain=MIN_GAIN) -> tuple:
    """({variable: value} kept, [(variable, value, ratio)] of every candidate, and of the size
    ranges of a by-size variable whose sizes different values won); kept: at least min_gain
    faster."""
    kept, rows = {}, []
    for variable in library_settings.KNOWN[impl]:
        scores = {value: ratio(measured[(variable.name, value)], baseline) for value in variable.values}
        if variable.by_size:
            ranged = by_size(variable, measured, baseline, min_gain)
            if ranged and ranged[1] < min(scores.values()):
                scores[ranged[0]] = ranged[1]
        rows += [(variable.name, value, r) for value, r in scores.items()]
        value, r = min(scores.items(), key=lambda kv: kv[1])
        if r <= 1 - min_gain:
            kept[variable.name] = value
    # A kept value needs what it implies (MPICH's algorithms its generic path): a kept value of
    # that variable which contradicts it was measured without the other and goes.
    known = library_settings.known(impl)
    for name in list(kept):
        for other, needed in known[name].implies.items():
            if kept.get(other, needed) != needed:
                del kept[other]
    return kept, rows


def confirm(args, impl, kept, sizes, ops, say) -> tuple:
    """(kept, JAX's collectives' time ratio, the training step's) after the kept settings are
    measured, against the library's defaults, where programs meet them: JAX's collectives that
    the kept settings change, through initialize() (none kept when slower), then the training
    step (none kept when more than MIN_GAIN slower). A ratio is None where nothing was left to
    measure."""
    jax_ratio = step_ratio = None
    known = library_settings.known(impl)
    # Judged on the collectives the kept values change: the others' noise would only dilute it.
    ops = [op for op in ops if any(op in known[name].ops for name in kept)]
    if kept:
        say(f"JAX's {', '.join(ops)} with {kept} and with the defaults, {args.rounds} rounds")
        jax = rounds(args, "jax-mpi", sizes, {"kept": (ops, library_settings.with_implied(impl, kept)),
                                              "defaults": (ops, {})})
        jax_ratio = ratio(jax["kept"], jax["defaults"])
        if jax_ratio > 1.0:
            say(f"JAX's {', '.join(ops)} took {jax_ratio:.2f}x the time with {kept} as with the defaults: none kept")
            kept = {}
    if kept:
        say(f"the training step with {kept} and with the defaults, {args.rounds} rounds")
        step = rounds(args, "jax-step", sizes, {"kept": ((), library_settings.with_implied(impl, kept)),
                                                "defaults": ((), {})})
        step_ratio = ratio(step["kept"], step["defaults"])
        if step_ratio > 1 + MIN_GAIN:
            say(f"the training step was {step_ratio:.2f}x as slow with {kept} as with the defaults: none kept")
            kept = {}
    return kept, jax_ratio, step_ratio


def binding(args, impl, kept, placed, say) -> tuple:
    """(the MPI_COLLECTIVES_BIND_CPUS value to write, or None where binding was not measured;
    {value: {weights layout: median seconds}} of the training step, {} then). Measured with the
    kept library settings, each value in launches of its own, the built-in's twice a round (its
    spread is the noise), and chosen by choose_binding()."""
    if "MPI_COLLECTIVES_BIND_CPUS" in os.environ:
        say(f"binding not measured: MPI_COLLECTIVES_BIND_CPUS={os.environ['MPI_COLLECTIVES_BIND_CPUS']} is set "
            "in your environment, and a job that sets it keeps it")
        return None, {}
    if args.binding == "no":
        return None, {}
    slice_, why = tuning.binding_for(0, placed)  # as the first rank of the list would bind
    if slice_ is None:
        say(f"binding not measured: initialize() binds nothing here ({why})")
        return None, {}
    if args.binding == "auto" and len(slice_) < 2:
        say("binding not measured: each rank's slice is one CPU (binding the whole rank was 20-30% faster "
            "there on a 16-core node); --binding yes measures it")
        return None, {}
    settings = library_settings.with_implied(impl, kept)
    candidates = {value: ((), dict(settings, MPI_COLLECTIVES_BIND_CPUS=value)) for value in BINDINGS_TRIED}
    candidates[AGAIN] = candidates[BUILT_IN]
    say(f"the training step with MPI_COLLECTIVES_BIND_CPUS={', '.join(BINDINGS_TRIED)} ({BUILT_IN}: built in, "
        f"twice a round), slices of {len(slice_)} CPUs, {args.rounds} rounds")
    measured = {value: by_op["train-step"] for value, by_op in rounds(args, "jax-step", [8], candidates).items()}
    again = measured.pop(AGAIN)
    spread = noise({"step": measured[BUILT_IN]}, {"step": again})
    measured[BUILT_IN] = between({"step": measured[BUILT_IN]}, {"step": again})["step"]
    value, why = choose_binding(measured, spread)
    say(f"MPI_COLLECTIVES_BIND_CPUS={value}: {why}")
    return value, measured


def choose_binding(measured: dict, spread: float, min_gain=MIN_GAIN) -> tuple:
    """(value, why) from the training step's medians {value: {weights layout: seconds}}: a binding
    ("1", "2") may be chosen only where it is no slower than none ("0") on any layout beyond the
    margin (min_gain or the built-in's spread between its two launches, whichever is larger);
    among those and none, the fastest over the layouts (geometric mean), but the built-in stays
    unless another is faster than it by the margin."""
    margin = max(min_gain, spread)
    unbound = measured[NONE]
    allowed = [NONE] + [v for v in measured if v != NONE
                        and all(t <= unbound[layout] * (1 + margin) for layout, t in measured[v].items())]
    against = {v: ratio({"step": measured[v]}, {"step": measured[BUILT_IN]}) for v in allowed}
    best = min(allowed, key=against.get)
    if BUILT_IN in allowed and against[best] > 1 - margin:
        return BUILT_IN, (f"the built-in stays: no other was faster than it by the margin ({margin:.0%}: 5% or the "
                          "spread of its own two launches, the larger) without being slower than unbound")
    if BUILT_IN not in allowed:
        return best, (f"{best_words(best)}: the built-in was more than {margin:.0%} slower than unbound on a "
                      "weights layout")
    return best, f"{best_words(best)}: {1 / against[best]:.2f}x as fast as the built-in, and never slower than unbound"


def best_words(value: str) -> str:
    return {NONE: "unbound", BUILT_IN: "the whole rank bound", CALLERS: "only the threads that call MPI bound"}[value]


def binding_report(bound: dict, chosen: str) -> str:
    lines = ["the training step by MPI_COLLECTIVES_BIND_CPUS (median seconds):"]
    for value, steps in bound.items():
        shown = ", ".join(f"{layout} {t * 1e3:.1f} ms" for layout, t in steps.items())
        lines.append(f"  {value} ({best_words(value)}): {shown}{'  kept' if value == chosen else ''}")
    return "\n".join(lines)


def node_path(args, impl, kept, per_node, nodes, say) -> tuple:
    """(the entry's node_path {"mode", "min", "max"} (and "direct", "round" on one node), or None where
    not measured; {size: (ratio, {op: ratio})} of the path's time against the library's; on one node
    {"window_vs_direct": ratio, "round": {size: ratio}}, else {}). Measured with the kept library settings, the
    path on at every size and off, in interleaved rounds; chosen by choose_node_path()."""
    own = [name for name in library_settings.NODE_PATH_TUNED if name in os.environ]
    if own:
        say(f"node path not measured: {', '.join(own)} is set in your environment, and a job that sets it keeps it")
        return None, {}, {}
    if args.node_path == "no":
        return None, {}, {}
    if per_node < 2:
        say("node path not measured: it serves ranks that share a node, and this job's ranks do not share one")
        return None, {}, {}
    settings = library_settings.with_implied(impl, kept)
    sizes = [b for b in NODE_SIZES if b <= max(args.node_path_max_bytes, NODE_SIZES[0])]
    if nodes > 1:
        return node_path_across(args, settings, sizes, per_node, nodes, say)
    ops = library_settings.NODE_PATH_COLLECTIVES
    on = dict(settings, MPI_COLLECTIVES_NODE_PATH="1", MPI_COLLECTIVES_NODE_PATH_COLLECTIVES=",".join(ops),
              MPI_COLLECTIVES_NODE_PATH_MIN="0", MPI_COLLECTIVES_NODE_PATH_MAX="0")
    off = dict(settings, MPI_COLLECTIVES_NODE_PATH="0")
    say(f"JAX's {', '.join(ops)} through the node's own data path (its reads in place, and every byte through "
        f"its window) and through the library's, {sizes[0]} B to {sizes[-1]} B, {args.rounds} rounds")
    measured = rounds(args, "jax-mpi", sizes, {"path": (ops, on),
                                               "window": (ops, dict(on, MPI_COLLECTIVES_NODE_PATH_DIRECT="0")),
                                               "library": (ops, off)})
    direct, direct_ratio = choose_direct(measured["path"], measured["window"])
    chosen, per_size = choose_node_path(measured["path" if direct else "window"], measured["library"])
    round_bytes, round_per_size = small_in_one_round(args, settings, say)
    chosen = with_direct_and_round(chosen, direct, round_bytes)
    say("node path: " + node_path_words(chosen))
    return chosen, per_size, {"window_vs_direct": direct_ratio, "round": round_per_size}


def small_in_one_round(args, settings, say) -> tuple:
    """choose_round()'s answer from JAX's small collectives with the round and without, in
    interleaved rounds, the round launched twice a round (first and last: their spread is the
    run's noise, and the round is judged slower only beyond it); the built-in where no all-reduce
    of 8 B fits it (over 8193 ranks)."""
    small = round_sizes(args.ranks)
    if not small:
        return library_settings.ROUND_MOST, {}
    say(f"JAX's {', '.join(ROUND_COLLECTIVES)} in one round through the window and through the library's check "
        f"and call, {small[0]} B to {small[-1]} B, {args.rounds} rounds")
    plain = dict(settings, MPI_COLLECTIVES_NODE_PATH="1")
    on = (ROUND_COLLECTIVES, dict(plain, MPI_COLLECTIVES_NODE_PATH_ROUND=str(library_settings.ROUND_MOST)))
    measured = rounds(args, "jax-mpi", small, {
        "round": on, "no round": (ROUND_COLLECTIVES, dict(plain, MPI_COLLECTIVES_NODE_PATH_ROUND="0")),
        "round again": on})
    spread = noise(measured["round"], measured["round again"])
    say(f"the round's two launches differed by {spread:.1%}")
    return choose_round(between(measured["round"], measured["round again"]), measured["no round"], args.ranks,
                        max(MIN_GAIN, spread))


def geometric_mean(values) -> float:
    return float(np.exp(np.mean(np.log(list(values)))))


def choose_direct(direct: dict, window: dict, min_gain=MIN_GAIN) -> tuple:
    """(MPI_COLLECTIVES_NODE_PATH_DIRECT: 1, or 0 where every byte through the window was min_gain
    faster than the reads in place, as a geometric mean over the collectives and sizes; that mean,
    the window's time against the reads'). Where the kernel forbids the reads both measured the
    window, and the built-in (1) stays."""
    mean = geometric_mean(window[op][b] / direct[op][b] for op in direct for b in direct[op] if b in window.get(op, {}))
    return (0 if mean <= 1 - min_gain else 1), mean


def choose_round(with_round: dict, without: dict, ranks: int, min_gain=MIN_GAIN) -> tuple:
    """(MPI_COLLECTIVES_NODE_PATH_ROUND, {size: the round's time against the library's check and call,
    a geometric mean over the collectives}) from {op: {bytes: seconds}} with the round and without.
    The round saves a library call and copies its peers' data, so where it loses to the library it
    loses from some size up: its limit is the peers' bytes (an all-reduce's buffer times the other
    ranks) of the size below the first from which it was min_gain slower at every larger size too,
    0 where that is the smallest, and its largest (the built-in) where it was not slower at the
    largest size. A size alone slower below sizes where it was not is a noisy launch, not a limit
    (a 2-rank VM's launches of the same 8 B psum differed by half)."""
    sizes = sorted({b for by_size in with_round.values() for b in by_size})
    per_size = {b: geometric_mean(with_round[op][b] / without[op][b] for op in with_round
                                  if b in with_round[op] and b in without.get(op, {})) for b in sizes}
    first = len(sizes)
    while first > 0 and per_size[sizes[first - 1]] >= 1 + min_gain:
        first -= 1
    if first == len(sizes):
        return library_settings.ROUND_MOST, per_size
    return (min(library_settings.ROUND_MOST, sizes[first - 1] * (ranks - 1)) if first else 0), per_size


def with_direct_and_round(chosen: dict, direct: int, round_bytes: int) -> dict:
    """choose_node_path()'s entry with the two choices of one node; the path off for large collectives
    with the round on is "mode" 1 with no collectives (the native layer's window for the round alone)."""
    if not chosen["mode"] and round_bytes:
        chosen = {"mode": 1, "collectives": "", "min": 0, "max": 0}
    return dict(chosen, direct=direct, round=round_bytes)


def node_path_across(args, settings, sizes, per_node, nodes, say) -> tuple:
    """Over several nodes: JAX's all-reduce composed (each node's window, the library between
    nodes: MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1) against the library's own, in interleaved
    rounds. Faster over a run of sizes: the entry's node_path takes it, with that run's limits.
    Faster nowhere: no node_path in the entry, so the job keeps the built-in choice (a
    communicator across nodes keeps the library's), and the ratios are kept beside it."""
    ops = ("all-reduce",)
    on = dict(settings, MPI_COLLECTIVES_NODE_PATH="1", MPI_COLLECTIVES_NODE_PATH_COLLECTIVES="all-reduce",
              MPI_COLLECTIVES_NODE_PATH_MIN="0", MPI_COLLECTIVES_NODE_PATH_MAX="0",
              MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES="1")
    off = dict(settings, MPI_COLLECTIVES_NODE_PATH="0")
    say(f"JAX's all-reduce composed across {nodes} nodes of {per_node} ranks (each node's window, the library "
        f"between nodes) and the library's own, {sizes[0]} B to {sizes[-1]} B, {args.rounds} rounds")
    measured = rounds(args, "jax-mpi", sizes, {"path": (ops, on), "library": (ops, off)})
    chosen, per_size = choose_node_path(measured["path"], measured["library"])
    if not chosen["mode"]:
        say("node path: " + node_path_words(None))
        return None, per_size, {}
    chosen["across_nodes"] = 1
    say("node path: " + node_path_words(chosen))
    return chosen, per_size, {}


def _best_run(ratios: dict, min_gain: float) -> list:
    """The longest run of consecutive sizes (of {size: path/library}) where the path was faster,
    between runs as long the one with the larger gain; [] unless it was min_gain faster at one."""
    runs, run = [], []
    for b in sorted(ratios) + [None]:
        if b is not None and ratios[b] < 1:
            run.append(b)
        elif run:
            runs.append(run)
            run = []
    best = min(runs, key=lambda r: (-len(r), min(ratios[b] for b in r)), default=[])
    return best if best and min(ratios[b] for b in best) <= 1 - min_gain else []


def choose_node_path(path: dict, library: dict, min_gain=MIN_GAIN) -> tuple:
    """(the entry's node_path, {size: (ratio, {op: ratio})}) from {op: {bytes: seconds}} with the path
    and without. A collective goes through the path where it was faster by min_gain over a run of
    consecutive sizes (_best_run); the limits are those of the run of the geometric mean over the
    chosen collectives: from its first size, up to its last unless it reaches the largest size
    measured (then no limit). Faster nowhere: off."""
    sizes = sorted({b for by_size in path.values() for b in by_size})
    each = {b: {op: path[op][b] / library[op][b] for op in path if b in path[op] and b in library.get(op, {})}
            for b in sizes}
    per_size = {b: (geometric_mean(each[b].values()), each[b]) for b in sizes}
    chosen = [op for op in path if _best_run({b: each[b][op] for b in sizes if op in each[b]}, min_gain)]
    mean = {b: geometric_mean(each[b][op] for op in chosen if op in each[b]) for b in sizes} if chosen else {}
    best = _best_run(mean, min_gain) if chosen else []
    if not best:
        return {"mode": 0, "collectives": "", "min": 0, "max": 0}, per_size
    return {"mode": 1, "collectives": ",".join(op for op in library_settings.NODE_PATH_COLLECTIVES if op in chosen),
            "min": best[0], "max": 0 if best[-1] == sizes[-1] else best[-1]}, per_size


def node_path_words(chosen) -> str:
    if chosen is None:
        return ("not composed across nodes: the library's own all-reduce was as fast or faster at every size "
                "(the built-in choice: MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=0)")
    if not chosen["mode"]:
        return "off (MPI_COLLECTIVES_NODE_PATH=0): the library's own collectives were as fast or faster at every size"
    small = ""
    if "round" in chosen:
        small = (f"; small collectives in one round up to {chosen['round']} bytes of the peers' data "
                 f"(MPI_COLLECTIVES_NODE_PATH_ROUND={chosen['round']})" if chosen["round"] else
                 "; no round for small collectives: the library's check and call were faster "
                 "(MPI_COLLECTIVES_NODE_PATH_ROUND=0)")
    if not chosen["collectives"]:
        return ("the library's own large collectives: they were as fast or faster at every size (the path's "
                f"collectives none){small}")
    reads = ("; every byte through the window: faster than reading in place (MPI_COLLECTIVES_NODE_PATH_DIRECT=0)"
             if chosen.get("direct", 1) == 0 else "")
    upto = f" up to {chosen['max']} bytes" if chosen["max"] else " with no upper limit"
    if chosen.get("across_nodes"):
        return (f"{chosen['collectives']} composed across nodes from {chosen['min']} bytes{upto} "
                f"(MPI_COLLECTIVES_NODE_PATH=1, _COLLECTIVES={chosen['collectives']}, _MIN={chosen['min']}, "
                f"_MAX={chosen['max']}, _ACROSS_NODES=1)")
    return (f"{chosen['collectives']} from {chosen['min']} bytes{upto} (MPI_COLLECTIVES_NODE_PATH_COLLECTIVES="
            f"{chosen['collectives']}, _MIN={chosen['min']}, _MAX={chosen['max']}){reads}{small}")


def node_path_report(per_size: dict, chosen: dict, extra=None) -> str:
    lines = ["JAX's collectives through the node's own data path, time against the library's own:"]
    for b, (r, each) in per_size.items():
        lines.append(f"  {b:>10d} B: {r:.2f}x (" + ", ".join(f"{op} {x:.2f}x" for op, x in each.items()) + ")")
    if extra:
        lines.append("every byte through the window, time against reading the peers in place: "
                     f"{extra['window_vs_direct']:.2f}x")
        lines.append("small collectives in one round, time against the library's check and call: " + ", ".join(
            f"{b} B {r:.2f}x" for b, r in extra["round"].items()))
    lines.append("node path: " + node_path_words(chosen))
    return "\n".join(lines)


def refuse_users_own(impl):
    own = library_settings.users_own(impl, os.environ)
    if own:
        raise SystemExit(f"mpi-collectives tune: {', '.join(own)} is set in your environment, so every launch would "
                         "run with it and nothing could be compared. Fix: unset it for the tune run.")


def ranks_per_node(placed) -> tuple:
    """(ranks per node, nodes) from bench_run.placement(); an uneven placement is refused."""
    hosts = [host for host, _ in placed]
    counts = {h: hosts.count(h) for h in set(hosts)}
    if len(set(counts.values())) != 1:
        raise SystemExit(f"mpi-collectives tune: the launcher placed the ranks unevenly ({counts}); a tuning is for "
                         "one number of ranks per node. Fix: ask for the same number on every node.")
    return next(iter(counts.values())), len(counts)


def main(argv=None, prog="mpi-collectives tune", parser_class=argparse.ArgumentParser) -> int:
    args = parse(argv, prog, parser_class)
    started = time.monotonic()
    if mpi.family() == "none":
        raise SystemExit("mpi-collectives tune: " + mpi.not_loaded_message())
    version = mpi.library_version()
    impl = library_settings.implementation(version)
    if not impl:
        raise SystemExit(f"mpi-collectives tune: {mpi.library_name()} has no settings mpi-collectives knows how to "
                         "tune (MPICH, Intel MPI and Open MPI have); initialize() leaves it at its defaults.")
    refuse_users_own(impl)
    path = args.file or os.environ.get("MPI_COLLECTIVES_TUNING_FILE") or library_settings.default_file()
    placed = bench_run.placement(args)
    per_node, nodes = ranks_per_node(placed)
    sizes = [s for s in SIZES if s <= args.max_bytes]
    say = lambda text: print(f"mpi-collectives tune: {text}", file=sys.stderr, flush=True)  # noqa: E731
    say(f"{mpi.library_name()}, {args.ranks} ranks ({per_node} per node on {nodes} node(s) of "
        f"{library_settings.node_cpus()} CPUs), sizes {sizes[0]} B to {sizes[-1]} B")

    all_ops = [op for op in JAX_OPS if any(op in v.ops for v in library_settings.KNOWN[impl])]
    plan = launches(impl)
    values = sum(len(judged) for _, _, judged in plan)
    say(f"{values} candidates in {len(plan)} launches, and the defaults twice, x {args.rounds} rounds on the C loop")
    measured = rounds(args, "c-wrapper", sizes, {"defaults": (all_ops, {}),
                                                 **{i: (ops, settings) for i, (ops, settings, _) in enumerate(plan)},
                                                 "defaults again": (all_ops, {})})
    first, again = measured.pop("defaults"), measured.pop("defaults again")
    spread = noise(first, again)
    baseline, min_gain = between(first, again), max(MIN_GAIN, spread)
    say(f"the defaults' two launches differed by {spread:.1%}: a value is kept when {min_gain:.1%} faster")
    kept, rows = choose(impl, per_candidate(plan, measured), baseline, min_gain)

    kept, jax_ratio, step_ratio = confirm(args, impl, kept, sizes, all_ops, say)
    bind, bound = binding(args, impl, kept, placed, say)
    node, node_measured, node_extra = node_path(args, impl, kept, per_node, nodes, say)
    elapsed = time.monotonic() - started
    say(f"measured in {elapsed:.0f} s")

    print(report(rows, kept, jax_ratio, step_ratio, baseline, spread, per_node, nodes))
    if bound:
        print(binding_report(bound, bind))
    if node_measured:
        print(node_path_report(node_measured, node, node_extra))
    entry = {"implementation": impl, "version": version, "library": os.path.realpath(mpi.library()),
             "ranks_per_node": per_node, "cpus": library_settings.node_cpus(), "nodes": nodes,
             "settings": kept, "date": datetime.date.today().isoformat(),
             "measured": {"sizes": sizes, "rounds": args.rounds, "defaults_seconds": baseline, "noise": spread,
                          "candidates": [{"variable": n, "value": v, "ratio": r} for n, v, r in rows],
                          "jax_ratio": jax_ratio, "step_ratio": step_ratio, "seconds": round(elapsed)}}
    if bind is not None:
        entry["bind_cpus"] = int(bind)
        entry["measured"]["binding"] = bound
    if node is not None:
        entry["node_path"] = node
    if node_measured:
        entry["measured"]["node_path"] = {str(b): {"ratio": r, "by_op": each} for b, (r, each) in node_measured.items()}
    if node_extra:
        entry["measured"]["node_path_window_vs_direct"] = node_extra["window_vs_direct"]
        entry["measured"]["node_path_round"] = {str(b): r for b, r in node_extra["round"].items()}
    if args.dry_run:
        print("(--dry-run: nothing written)")
        return 0
    try:
        library_settings.write_entry(path, entry)
    except library_settings.Refused as e:
        raise SystemExit(f"mpi-collectives tune: not written: {e}")
    print(f"written to {path}: initialize() uses it for {mpi.library_name()} with {per_node} ranks per node on "
          f"{library_settings.node_cpus()} CPUs, in jobs on one node or started by srun with {per_node} ranks on "
          "every node (other jobs take the built-in choice on every rank: docs/configuration.md, \"One job, one set "
          "of choices\"); `mpi-collectives info --init` under your launcher shows it")
    return 0


def report(rows, kept, jax_ratio, step_ratio, baseline, spread, per_node, nodes) -> str:
    lines = [f"the library's defaults, C loop medians (two launches a round, {spread:.1%} apart):"]
    for op, by_size in baseline.items():
        shown = ", ".join(f"{b} B {t * 1e6:.1f} us" for b, t in by_size.items())
        lines.append(f"  {op}: {shown}")
    width = max([52] + [len(name) + 1 + len(value) for name, value, _ in rows])
    lines.append(f"{'setting':{width}s} {'time vs defaults':>16s}  kept")
    for name, value, r in rows:
        lines.append(f"{name + '=' + value:{width}s} {r:15.2f}x  {'yes' if kept.get(name) == value else ''}")
    if jax_ratio is not None:
        lines.append(f"JAX's collectives with the kept settings: {jax_ratio:.2f}x the time with the defaults")
    if step_ratio is not None:
        lines.append(f"the training step with the kept settings: {step_ratio:.2f}x the time with the defaults")
    lines.append(f"kept for {per_node} ranks per node ({nodes} node(s)): "
                 + (", ".join(f"{k}={v}" for k, v in kept.items()) or "the library's defaults"))
    return "\n".join(lines)

"""Configuration: one table of environment variables, each also a keyword
argument of `initialize()` (the keyword wins). README.md shows the same table.

Those the native layer reads (the rows marked native) are
read when it is loaded (by `import jax` or by us), so they must be in the
environment before that.
"""
import collections
import dataclasses
import os
import re

from .errors import InitializeError

# The thread levels MPI_COLLECTIVES_THREAD_LEVEL names, in MPI's order (MPI's
# MPI_THREAD_SINGLE..MPI_THREAD_MULTIPLE), and the word for "what the caller asked".
THREAD_LEVELS = ("single", "funneled", "serialized", "multiple")
REQUESTED = "requested"

Setting = collections.namedtuple("Setting", "var default native meaning allowed")

# What a value may be: ANY text, one of a tuple of words, a comma-separated
# list of some of a SomeOf's words, or whole numbers in range(lo, hi + 1);
# COORDINATOR is host:port. A value outside is an error, never a guess.
# The spellings, the same in the native layer (native/src/base/settings.c),
# tested on one table (tests/package/test_setting_spellings.py): a whole number is
# ASCII digits with an optional leading minus, leading zeros allowed (01024),
# no sign +, no blanks, no underscores (Python's int() takes 1_024 and blanks,
# C's strtol neither, and they once disagreed on what MPI was started with);
# a word is one of the words in any case; a list is words joined by commas,
# none empty; an empty value is the default.
WHOLE_NUMBER = re.compile(r"-?[0-9]+")
ANY = None
SomeOf = collections.namedtuple("SomeOf", "words")
SWITCH = (0, 1)
PORT = (0, 65535)
COORDINATOR = "host:port"
WEEK = 7 * 24 * 3600

# name -> (environment variable, default, read by the native layer, meaning, allowed values);
# a setting's type is its default's (whole numbers are read as int).
TABLE = {
    "libmpi": Setting("MPI_COLLECTIVES_LIBMPI", None, True, "MPI library to load (path or soname)", ANY),
    "abi": Setting("MPI_COLLECTIVES_ABI", None, True, "ABI family: mpich, openmpi or standard",
                   ("mpich", "openmpi", "standard")),
    "thread_level": Setting("MPI_COLLECTIVES_THREAD_LEVEL", THREAD_LEVELS[-1], True,
                            "thread level asked of MPI: " + ", ".join(THREAD_LEVELS + (REQUESTED,)),
                            THREAD_LEVELS + (REQUESTED,)),
    "any_thread": Setting("MPI_COLLECTIVES_ANY_THREAD", 1, True,
                          "1: answer yes to MPI_Is_thread_main under MPI_THREAD_MULTIPLE, so XLA may create "
                          "communicators from its pool threads; 0: forward it (XLA then refuses most programs)",
                          SWITCH),
    "check_splits": Setting("MPI_COLLECTIVES_CHECK_SPLITS", 1, True,
                            "1: stop the job when an MPI_Comm_split breaks XLA's convention (concurrent splits, "
                            "new rank != key); 0 for callers of the wrapper other than XLA", SWITCH),
    "check_collectives": Setting("MPI_COLLECTIVES_CHECK_COLLECTIVES", 1, True,
                                 "1: with each all-reduce, all-gather and reduce-scatter XLA runs, the ranks "
                                 "check that they agree on its kind, size, dtype and reduction before any result "
                                 "reaches XLA (in the same MPI call as the data up to 1 KiB), and point-to-point "
                                 "arrivals are checked against what was expected; a disagreement ends the job with "
                                 "one line instead of returning wrong numbers. 0: no checks (each collective is still in the flight record and "
                                 "the stall report, and a failed MPI call still ends the job with one sentence)", SWITCH),
    "node_path": Setting("MPI_COLLECTIVES_NODE_PATH", 2, True,
                         "1: an all-reduce, all-gather, reduce-scatter or all-to-all XLA runs over ranks that all "
                         "share one node, from MPI_COLLECTIVES_NODE_PATH_MIN to MPI_COLLECTIVES_NODE_PATH_MAX bytes, "
                         "goes through the package's own data path in MPI's shared-memory windows (1.6 MiB of shared "
                         "memory per rank and communicator); 2 (the default): the same, except under Intel MPI, "
                         "whose own is near the memory floor already; 0: the MPI library's own collectives always",
                         (0, 2)),
    "node_path_collectives": Setting("MPI_COLLECTIVES_NODE_PATH_COLLECTIVES", "all-reduce", True,
                                     "the collectives the node path takes, comma-separated: all-reduce (the "
                                     "default: measured 2.1-2.4x faster than MPICH's own on a 16-core node), and "
                                     "all-gather, reduce-scatter, all-to-all where `mpi-collectives tune` or your "
                                     "own measurement finds them faster on your nodes",
                                     SomeOf(("all-reduce", "all-gather", "reduce-scatter", "all-to-all"))),
    "node_path_min": Setting("MPI_COLLECTIVES_NODE_PATH_MIN", 262144, True,
                             "the smallest collective, in bytes, that the node path takes (an all-reduce's buffer, "
                             "an all-gather's result, a reduce-scatter's or all-to-all's input; below it the "
                             "library's own is as fast)", (0, 2 ** 31 - 1)),
    "node_path_max": Setting("MPI_COLLECTIVES_NODE_PATH_MAX", 67108864, True,
                             "the largest collective, in bytes, that the node path takes, counted as "
                             "MPI_COLLECTIVES_NODE_PATH_MIN is (above it Open MPI's own all-reduce was faster on a "
                             "2-core VM); 0: no limit", (0, 2 ** 31 - 1)),
    "node_path_across_nodes": Setting("MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES", 0, True,
                                      "1: an all-reduce the node path takes, on a communicator whose ranks span "
                                      "nodes with as many on each, goes through each node's window and the MPI "
                                      "library across nodes (reduced within each node, each rank's slice then "
                                      "all-reduced by the library among the ranks holding the same slice, the "
                                      "result read within the node); 0 (the default): such a communicator keeps "
                                      "the library's own collectives", SWITCH),
    "node_path_direct": Setting("MPI_COLLECTIVES_NODE_PATH_DIRECT", 1, True,
                                "1 (the default): the node path's ranks read each other's buffers in place where "
                                "the kernel allows it (Linux cross-memory attach, one copy; under Yama's "
                                "ptrace_scope 1 a rank its peers could not read lets the ranks' launcher and its "
                                "descendants read it, for the process's life: docs/security.md), agreed by every rank of a window at "
                                "its first call that would; 0: every byte goes through the shared window (two "
                                "copies), and no rank changes who may read it", SWITCH),
    "node_path_round": Setting("MPI_COLLECTIVES_NODE_PATH_ROUND", 65536, True,
                               "with the checks on and the node path on (1 or 2, Intel MPI too), on a "
                               "communicator whose ranks share one node (outside the pytest plugin's phases, "
                               "whose waits can be given up): each all-reduce, all-gather and reduce-scatter "
                               "XLA runs is checked, and its data moved where a rank reads at most this many "
                               "bytes of its peers' (an all-reduce of 64 KiB at 2 ranks, 4 KiB at 17), in one "
                               "round through the node path's window (no MPI call, no barrier), agreed by every "
                               "rank (the least of theirs); 0: the check is the MPI library's all-reduce (at "
                               "most 65536)", (0, 65536)),
    "devices_timeout": Setting("MPI_COLLECTIVES_DEVICES_TIMEOUT", 60, True,
                               "with several CPU devices per process: seconds the first of a process's devices "
                               "to reach a collective waits for the others before the job stops with a message "
                               "(a program over only some devices)", (1, 86400)),
    "verbose": Setting("MPI_COLLECTIVES_VERBOSE", 0, True, "1: log what is loaded and decided, per rank", (0, 9)),
    "trace_dir": Setting("MPI_COLLECTIVES_TRACE_DIR", None, True,
                         "a folder: when the package ends a job, each rank writes its flight record (its last "
                         "collectives) to mpi-collectives-rank<R>.txt there instead of printing it", ANY),
    "prefixes": Setting("MPI_COLLECTIVES_PREFIXES", None, True,
                        "colon-separated prefixes whose lib/ may hold the MPI library; set by "
                        "`import mpi_collectives` to sys.prefix, the user base and the base prefix", ANY),
    "coordinator": Setting("MPI_COLLECTIVES_COORDINATOR", None, False,
                           "host:port of jax.distributed's coordinator (default: rank 0, a port it binds)",
                           COORDINATOR),
    "port": Setting("MPI_COLLECTIVES_PORT", 0, False, "coordinator port (0: one rank 0 finds free)", PORT),
    "interface": Setting("MPI_COLLECTIVES_INTERFACE", None, False,
                         "network interface whose address the coordinator uses (e.g. ib0)", ANY),
    "timeout": Setting("MPI_COLLECTIVES_INIT_TIMEOUT", 300, False,
                       "seconds initialize() waits for every rank and the coordinator (at least 1)", (1, WEEK)),
    "abort_on_exception": Setting("MPI_COLLECTIVES_ABORT_ON_EXCEPTION", 1, False,
                                  "1: after initialize(), an uncaught exception on any rank (or thread) prints it "
                                  "and ends the whole job with MPI_Abort, instead of leaving the others waiting "
                                  "in their next collective", SWITCH),
    "watch_peers": Setting("MPI_COLLECTIVES_WATCH_PEERS", 1, False,
                           "1: after initialize(), each rank ends the whole job with one line naming the rank at "
                           "fault when a rank on its node dies (killed, crashed, os._exit) or when it has waited in "
                           "MPI for MPI_COLLECTIVES_EXIT_TIMEOUT seconds after another rank finished its program",
                           SWITCH),
    "exit_timeout": Setting("MPI_COLLECTIVES_EXIT_TIMEOUT", 30, False,
                            "seconds a rank may wait for other ranks (in MPI, or in JAX's start-up exchange) after "
                            "another rank has finished its program, before the job is ended; 0: no limit", (0, WEEK)),
    "stall_report": Setting("MPI_COLLECTIVES_STALL_REPORT", 60, False,
                            "seconds a rank may wait in a collective before the job prints, from one rank, which "
                            "ranks have not arrived and where they are (their Python stacks too); repeated at "
                            "doubling intervals while the wait lasts (at MPI_Finalize, where the node path's "
                            "windows are freed, each waiting rank names the ranks not there); 0: never", (0, WEEK)),
    "stall_timeout": Setting("MPI_COLLECTIVES_STALL_TIMEOUT", 0, False,
                             "seconds a rank may wait in a collective (or at MPI_Finalize for a node path window's "
                             "ranks) before the job is ended, with the stall report; 0: no limit", (0, WEEK)),
    "preemption_grace": Setting("MPI_COLLECTIVES_PREEMPTION_GRACE", 60, False,
                                "seconds a rank asked to stop by SIGTERM may go on when its program asks JAX's "
                                "preemption sync point (multihost_utils.reached_preemption_sync_point, Orbax's "
                                "CheckpointManager), to reach it, save and end; a rank still running then is "
                                "ended with a line. A program that never asks, or 0: SIGTERM ends the rank at "
                                "once", (0, WEEK)),
    "local_device_ids": Setting("JAX_LOCAL_DEVICE_IDS", None, False,
                                "GPUs this process takes, as JAX's own variable and keyword (e.g. 0,1); unset: "
                                "on a GPU node each rank its local rank's share when the ranks on the node divide "
                                "the GPUs, as JAX's own start gives", ANY),
    "bind_cpus": Setting("MPI_COLLECTIVES_BIND_CPUS", None, False,
                         "unset: what `mpi-collectives tune` measured fastest for this MPI, ranks per node and "
                         "node size (its tuning file), else 1. 1: when the ranks on a node all share one CPU set (the launcher bound nothing), each "
                         "rank binds itself and JAX's threads to its own slice of it, whole cores first; a "
                         "binding by the launcher or by you is kept. 2: the same slices, but only the threads "
                         "that call MPI move onto them (at their first call), XLA's compute threads keep the "
                         "whole set. 0: never bind", (0, 2)),
    "mpi_settings": Setting("MPI_COLLECTIVES_MPI_SETTINGS", 1, False,
                            "1: before MPI starts, set the MPI library's own collective settings that were "
                            "measured faster: those `mpi-collectives tune` wrote for this MPI, ranks per node "
                            "and node size, else the package's defaults (MPICH: MPIR_CVAR_DEVICE_COLLECTIVES="
                            "none); skipped when you set any of that library's collective variables. 0: the "
                            "library's defaults", SWITCH),
    "tuning_file": Setting("MPI_COLLECTIVES_TUNING_FILE", None, False,
                           "the file `mpi-collectives tune` writes and initialize() reads (default: "
                           "$XDG_CONFIG_HOME/mpi-collectives/tuning.json, else ~/.config/mpi-collectives/"
                           "tuning.json); used only when you own it and its folder and others cannot write them",
                           ANY),
    "keep_memory": Setting("MPI_COLLECTIVES_KEEP_MEMORY", 1, False,
                           "1: glibc's malloc keeps freed large blocks for reuse (M_MMAP_MAX=0, M_TRIM_THRESHOLD="
                           "1 GiB; on a rank started with at most 4 CPUs M_ARENA_MAX=1, on one with more M_TOP_PAD=64 MiB), so JAX's fresh output "
                           "buffers do not page-fault on every call; skipped when "
                           "MALLOC_*_ or GLIBC_TUNABLES malloc settings are set, or malloc is not glibc's. "
                           "0: glibc's defaults", SWITCH),
    "not_initialized": Setting("MPI_COLLECTIVES_NOT_INITIALIZED", "warn", False,
                               "a process that imported mpi_collectives, started by a launcher as one of "
                               "several ranks, whose JAX computes as one process of one (initialize() not "
                               "called before its first JAX computation: its collectives reach no other rank): "
                               "warn (one line on every rank), stop (that line, then exit 1), or quiet (programs "
                               "whose ranks run JAX alone on purpose, beside mpi4py)", ("warn", "stop", "quiet")),
    "layout_note": Setting("MPI_COLLECTIVES_LAYOUT_NOTE", 1, False,
                           "1: where a node holds more ranks than it has sockets or NUMA domains, initialize() "
                           "prints one line from rank 0 saying so, with what docs/layout.md measured for each "
                           "class of program (a dense step: one rank per node; Monte Carlo sampling: one rank per "
                           "core) and how to measure yours (`mpi-collectives layouts`); 0: never", SWITCH),
}


# MPI_COLLECTIVES_* variables that are not settings of a program's run: those of the package's own
# tools and test suite (scripts/, the bench's launches, tests/). Never named as unknown.
TOOL_PREFIXES = ("MPI_COLLECTIVES_TEST_", "MPI_COLLECTIVES_BENCH_")
TOOL_VARIABLES = ("MPI_COLLECTIVES_VENV_DIR", "MPI_COLLECTIVES_SETUP", "MPI_COLLECTIVES_BUILD_VENV", "MPI_COLLECTIVES_SUITE_REPORTS",
                  "MPI_COLLECTIVES_JAX_TESTS", "MPI_COLLECTIVES_IN_SUITE", "MPI_COLLECTIVES_NEWEST_ROOT")
# Names the package (or its examples) once read, and what replaced each.
RENAMED = {"MPI_COLLECTIVES_COORDINATOR_PORT": "MPI_COLLECTIVES_PORT (the coordinator's port; "
                                               "examples/existing_script.py's own is HELLO_COORDINATOR_PORT)"}


def unknown_variables(environ=os.environ) -> list:
    """A sentence for each MPI_COLLECTIVES_* variable in `environ` that is no setting: a name the
    package once read, with what replaced it, or a misspelling, with the setting it most
    resembles. They are ignored, so a typo would otherwise change nothing in silence."""
    import difflib
    known = [row.var for row in TABLE.values() if row.var.startswith("MPI_COLLECTIVES_")]
    out = []
    for name in sorted(environ):
        if (not name.startswith("MPI_COLLECTIVES_") or name in known or name in TOOL_VARIABLES
                or name.startswith(TOOL_PREFIXES)):
            continue
        if name in RENAMED:
            out.append(f"mpi-collectives: {name} is no longer read; {RENAMED[name]} replaced it.")
            continue
        prefix = "MPI_COLLECTIVES_"  # every name shares it: compare what follows
        close = difflib.get_close_matches(name[len(prefix):], [k[len(prefix):] for k in known], n=1, cutoff=0.6)
        hint = f"did you mean {prefix}{close[0]}?" if close else "none is close to it"
        out.append(f"mpi-collectives: {name} is not a setting of mpi-collectives and is ignored; {hint} "
                   "(`mpi-collectives env` lists them all)")
    return out


# The settings of one call of initialize(): a field per row of TABLE, its default the row's.
Settings = dataclasses.make_dataclass(
    "Settings", [(name, type(row.default) if row.default is not None else str,
                  dataclasses.field(default=row.default)) for name, row in TABLE.items()],
    frozen=True)
Settings.__module__ = __name__


def _allowed_text(allowed) -> str:
    if allowed == COORDINATOR:
        return "host:port with a port from 1 to 65535"
    if isinstance(allowed, SomeOf):
        return "a comma-separated list of " + ", ".join(allowed.words)
    if isinstance(allowed[0], str):
        return "one of " + ", ".join(allowed)
    lo, hi = allowed
    return "0 or 1" if allowed == SWITCH else f"a whole number from {lo} to {hi}"


def _check(name: str, row: Setting, value, from_keyword: bool):
    """The value, of the setting's type, or InitializeError naming what is wrong and what is allowed."""
    if value is None or row.allowed is ANY:
        return value
    ok = True
    if row.allowed == COORDINATOR:
        host, _, port = str(value).rpartition(":")
        ok = bool(host) and port.isdigit() and 1 <= int(port) <= 65535
    elif isinstance(row.allowed, SomeOf):
        words = str(value).lower().split(",")
        ok = all(w in row.allowed.words for w in words)
        if ok:
            value = ",".join(w for w in row.allowed.words if w in words)  # one spelling, in the table's order
    elif isinstance(row.allowed[0], str):
        value = str(value).lower()
        ok = value in row.allowed
    else:
        if isinstance(value, str):
            ok = WHOLE_NUMBER.fullmatch(value) is not None
        else:
            ok = isinstance(value, int) and not isinstance(value, bool)
        if ok:
            value = int(value)
            ok = row.allowed[0] <= value <= row.allowed[1]
    if not ok:
        given = f"initialize({name}={value!r})" if from_keyword else f"{row.var}={value}"
        raise InitializeError(
            f"mpi-collectives: {given} is not {_allowed_text(row.allowed)}. "
            f"Fix: correct it, or leave it unset for the default"
            f"{'' if row.default is None else f' ({row.default})'}.")
    return value


def value_from_environment(name: str, environ=os.environ):
    """What the setting's variable says, read as the native layer reads it (None: unset or empty, so the
    default); InitializeError where it is not allowed."""
    row = TABLE[name]
    given = environ.get(row.var) or None
    return None if given is None else _check(name, row, given, False)


def read(**overrides) -> Settings:
    """Settings from the environment, with keyword arguments taking precedence;
    every value checked against what its setting allows."""
    unknown = set(overrides) - set(TABLE)
    if unknown:
        raise TypeError(f"mpi-collectives: unknown setting(s) {sorted(unknown)}; known: {sorted(TABLE)}")
    values = {}
    for name, row in TABLE.items():
        value, from_keyword = overrides.get(name), True
        if value is None:
            value, from_keyword = os.environ.get(row.var) or None, False
        values[name] = row.default if value is None else _check(name, row, value, from_keyword)
    return Settings(**values)


def in_force(settings: Settings = None, tuned=None, environ=os.environ) -> list:
    """[(variable, value in force, where it comes from, problem or None)] for every setting, as
    `mpi-collectives env` shows them and initialize() lists them on rank 0 (MPI_COLLECTIVES_VERBOSE=1):
    the keyword to initialize() where `settings` holds one the environment does not say; else the
    environment's value ("set"); else the tuning file's for this MPI and job shape (`tuned`,
    services.library_settings.from_tuning_file's answer: {name: (value, where)}); else the default."""
    from ._paths import search_prefixes

    rows = []
    for name, row in TABLE.items():
        value, problem = environ.get(row.var) or None, None
        if value is None and tuned and name in tuned:
            shown, source = str(tuned[name][0]), tuned[name][1]
        elif value is None:
            shown, source = ("" if row.default is None else str(row.default)), "default"
        else:
            shown, source = value, "set"
            if name == "prefixes" and value == os.pathsep.join(search_prefixes()):
                source = "set by import mpi_collectives"
            try:
                _check(name, row, value, from_keyword=False)
            except InitializeError as e:
                problem = str(e)
        if settings is not None and problem is None:
            given = getattr(settings, name)
            read = _check(name, row, value, False) if value is not None else row.default
            if given != read and given is not None:
                shown, source = str(given), "initialize()'s keyword"
        rows.append((row.var, shown, source, problem))
    return rows


def export_native(settings: Settings) -> None:
    """Put the settings the native layer reads into the environment."""
    for name, (var, _, native, _, _) in TABLE.items():
        value = getattr(settings, name)
        if native and value not in (None, ""):
            os.environ[var] = str(value)


def markdown_table() -> str:
    rows = ["| variable | keyword | default | allowed | meaning |", "|---|---|---|---|---|"]
    for name, (var, default, _, meaning, allowed) in TABLE.items():
        shown = "any" if allowed is ANY else _allowed_text(allowed)
        rows.append(f"| `{var}` | `{name}` | {'' if default is None else f'`{default}`'} | {shown} | {meaning} |")
    return "\n".join(rows)

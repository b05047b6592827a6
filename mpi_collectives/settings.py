"""Configuration: one table of environment variables, each also a keyword
argument of `initialize()` (the keyword wins). README.md shows the same table.

Those the native layer reads (the rows marked native: the first seven) are
read when it is loaded (by `import jax` or by us), so they must be in the
environment before that.
"""
import collections
import dataclasses
import os

# The thread levels MPI_COLLECTIVES_THREAD_LEVEL names, in MPI's order (MPI's
# MPI_THREAD_SINGLE..MPI_THREAD_MULTIPLE), and the word for "what the caller asked".
THREAD_LEVELS = ("single", "funneled", "serialized", "multiple")
REQUESTED = "requested"

Setting = collections.namedtuple("Setting", "var default native meaning")

# name -> (environment variable, default, read by the native layer, meaning);
# a setting's type is its default's (whole numbers are read as int).
TABLE = {
    "libmpi": Setting("MPI_COLLECTIVES_LIBMPI", None, True, "MPI library to load (path or soname)"),
    "abi": Setting("MPI_COLLECTIVES_ABI", None, True, "ABI family: mpich, openmpi or standard"),
    "thread_level": Setting("MPI_COLLECTIVES_THREAD_LEVEL", THREAD_LEVELS[-1], True,
                            "thread level asked of MPI: " + ", ".join(THREAD_LEVELS + (REQUESTED,))),
    "any_thread": Setting("MPI_COLLECTIVES_ANY_THREAD", 1, True,
                          "1: answer yes to MPI_Is_thread_main under MPI_THREAD_MULTIPLE, so XLA may create "
                          "communicators from its pool threads; 0: forward it (XLA then refuses most programs)"),
    "check_splits": Setting("MPI_COLLECTIVES_CHECK_SPLITS", 1, True,
                            "1: stop the job when an MPI_Comm_split breaks XLA's convention (concurrent splits, "
                            "new rank != key); 0 for callers of the wrapper other than XLA"),
    "verbose": Setting("MPI_COLLECTIVES_VERBOSE", 0, True, "1: log what is loaded and decided, per rank"),
    "prefixes": Setting("MPI_COLLECTIVES_PREFIXES", None, True,
                        "colon-separated prefixes whose lib/ may hold the MPI library; set by "
                        "`import mpi_collectives` to sys.prefix, the user base and the base prefix"),
    "coordinator": Setting("MPI_COLLECTIVES_COORDINATOR", None, False,
                           "host:port of jax.distributed's coordinator (default: rank 0, a port it binds)"),
    "port": Setting("MPI_COLLECTIVES_PORT", 0, False, "coordinator port (0: one rank 0 finds free)"),
    "interface": Setting("MPI_COLLECTIVES_INTERFACE", None, False,
                         "network interface whose address the coordinator uses (e.g. ib0)"),
    "timeout": Setting("MPI_COLLECTIVES_INIT_TIMEOUT", 300, False,
                       "seconds initialize() waits for every rank and the coordinator"),
    "abort_on_exception": Setting("MPI_COLLECTIVES_ABORT_ON_EXCEPTION", 1, False,
                                  "1: after initialize(), an uncaught exception on any rank (or thread) prints it "
                                  "and ends the whole job with MPI_Abort, instead of leaving the others waiting "
                                  "in their next collective"),
    "watch_peers": Setting("MPI_COLLECTIVES_WATCH_PEERS", 1, False,
                           "1: after initialize(), each rank ends the whole job with one line naming the rank at "
                           "fault when a rank on its node dies (killed, crashed, os._exit) or when it has waited in "
                           "MPI for MPI_COLLECTIVES_EXIT_TIMEOUT seconds after another rank finished its program"),
    "exit_timeout": Setting("MPI_COLLECTIVES_EXIT_TIMEOUT", 30, False,
                            "seconds a rank may wait in one MPI call after another rank has finished its program, "
                            "before the job is ended"),
}


# The settings of one call of initialize(): a field per row of TABLE, its default the row's.
Settings = dataclasses.make_dataclass(
    "Settings", [(name, type(row.default) if row.default is not None else str,
                  dataclasses.field(default=row.default)) for name, row in TABLE.items()],
    frozen=True)
Settings.__module__ = __name__


def read(**overrides) -> Settings:
    """Settings from the environment, with keyword arguments taking precedence."""
    unknown = set(overrides) - set(TABLE)
    if unknown:
        raise TypeError(f"mpi-collectives: unknown setting(s) {sorted(unknown)}; known: {sorted(TABLE)}")
    values = {}
    for name, (var, default, _, _) in TABLE.items():
        value = overrides.get(name)
        if value is None:
            value = os.environ.get(var) or default
        if isinstance(default, int) and value is not None and not isinstance(value, int):
            try:
                value = int(value)
            except ValueError:
                raise ValueError(f"mpi-collectives: {var}={value!r} is not a whole number") from None
        values[name] = value
    return Settings(**values)


def export_native(settings: Settings) -> None:
    """Put the settings the native layer reads into the environment."""
    for name, (var, _, native, _) in TABLE.items():
        value = getattr(settings, name)
        if native and value not in (None, ""):
            os.environ[var] = str(value)


def markdown_table() -> str:
    rows = ["| variable | keyword | default | meaning |", "|---|---|---|---|"]
    for name, (var, default, _, meaning) in TABLE.items():
        rows.append(f"| `{var}` | `{name}` | {'' if default is None else f'`{default}`'} | {meaning} |")
    return "\n".join(rows)

"""The MPI library's own settings that initialize() sets before MPI starts.

MPI libraries read their tunables from the environment at MPI_Init, so the
choice is made from what is known before it: the library's version line
(MPI_Get_library_version may be called before MPI_Init), the job's layout as
the launcher describes it, and this node's CPUs. The values come from, in
order:

1. you: any collective setting of the library already in the environment
   leaves all of them to you;
2. the tuning file that `mpi-collectives tune` writes, for this MPI
   installation, ranks per node and CPUs: only where every node of the job
   holds the same number of ranks and the launcher says so (job_layout());
3. what was measured faster than the library's defaults at node scale
   (DEFAULTS; docs/configuration.md has the numbers).

One job, one set of choices: an MPI library's collectives hang or fail when
its ranks run different algorithms, and no rank can ask the others before
MPI_Init. So a rank chooses from what every rank of the job shares, and only
from that: a tuning entry is keyed on ranks per node, which a rank knows for
the whole job only when the launcher describes every node (Slurm's
SLURM_STEP_TASKS_PER_NODE) or the job has one node; an uneven job, or one whose
launcher describes only this node (Hydra's mpiexec, Open MPI's mpirun across
nodes), takes the built-in default on every rank. What a rank cannot know
(a tuning file only some nodes see, nodes of different sizes, a variable set
on one rank) is compared after MPI_Init by job_choices.py, which stops a job
whose ranks differ with one line.

Only variables and values from KNOWN are ever set, whatever a file says: a
file cannot name a library to load, a path, or anything else.

An entry may also hold the CPU binding tune measured on the training step
(bind_cpus: 0, 1 or 2), which initialize() takes where you did not set
MPI_COLLECTIVES_BIND_CPUS (binding_for_this_process()); binding acts on each
rank alone, so it needs none of the care above.

And the node path's choice tune measured (node_path: {"mode": 0 or 1,
"collectives", "min", "max"}, and "across_nodes": 0 or 1 in an entry measured
over several nodes: MPI_COLLECTIVES_NODE_PATH, _COLLECTIVES, _MIN, _MAX and
_ACROSS_NODES; "direct": 0 or 1 and "round": bytes in an entry measured on one
node: _DIRECT and _ROUND, absent from older entries, whose jobs keep the
settings' values), which initialize() gives the native layer where you set none
of them (node_path_for_this_process()). "mode": 1 with no collectives is the
round alone: the library's large collectives, the small ones in one round.
Every rank of a job that uses an entry uses the same one (the rule above), so
the ranks of a node agree on which collectives go through the path; ranks whose
files differ (a file of each rank's own, nodes of two kinds sharing one) are
stopped by job_choices.py, which compares the first five as the native layer will
hold them (the ranks of a window agree on the other two when they make it).
"""
import collections
import json
import os
import re
import stat

from ..base import launchers, mpi
from ..base.settings import TABLE as SETTINGS_TABLE

FORMAT = 1
# MPI_COLLECTIVES_BIND_CPUS's values (services/tuning.py), and the one taken when neither you nor a
# tuning entry (its "bind_cpus", which tune writes where it measured the binding) chose.
BINDINGS = (0, 1, 2)
BUILT_IN_BINDING = 1
# The node path's settings (base/settings.py), which an entry's "node_path" stands for.
NODE_PATH_VARIABLES = ("MPI_COLLECTIVES_NODE_PATH", "MPI_COLLECTIVES_NODE_PATH_COLLECTIVES",
                       "MPI_COLLECTIVES_NODE_PATH_MIN", "MPI_COLLECTIVES_NODE_PATH_MAX",
                       "MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES")
# ... and the two more an entry measured on one node may hold, which each window's ranks agree on.
NODE_PATH_TUNED = NODE_PATH_VARIABLES + ("MPI_COLLECTIVES_NODE_PATH_DIRECT", "MPI_COLLECTIVES_NODE_PATH_ROUND")
# MPI_COLLECTIVES_NODE_PATH_ROUND's largest (the round buffers' size in the window)
ROUND_MOST = SETTINGS_TABLE["node_path_round"].allowed[1]
NODE_PATH_COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")

Variable = collections.namedtuple("Variable", "name values ops implies by_size", defaults=(False,))
# What each implementation lets us choose for the MPI collectives XLA calls
# (all-reduce, all-gather, reduce-scatter; its all-to-all and collective
# permute are point-to-point). `ops`: the collectives a variable changes, which
# is what tune judges it by. `implies`: set with it, or the library ignores it. `by_size`: the
# library also takes one value per message size range ("2:0-1024;8:1025-2147483647": Intel MPI's
# "<preset>:<l>-<m>;..." syntax, sizes in bytes, inclusive), which tune writes where the sizes
# it measured were won by different values (size_ranges()).
KNOWN = {
    "mpich": (
        # MPICH's ch4 device collectives, or MPICH's generic algorithms ("none").
        Variable("MPIR_CVAR_DEVICE_COLLECTIVES", ("all", "none"),
                 ("all-reduce", "all-gather", "reduce-scatter"), {}),
        # MPICH's generic algorithm per collective (its library's own help text lists them;
        # tests/package/test_library_settings.py checks each value against it), which apply on
        # the generic path only. The pipelined tree and recursive exchange all-reduce were 3-4x
        # slower at 16 MiB on a 16-core node (docs/benchmarks/node-16/): not candidates.
        Variable("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM",
                 ("recursive_doubling", "reduce_scatter_allgather", "ring", "k_reduce_scatter_allgather"),
                 ("all-reduce",), {"MPIR_CVAR_DEVICE_COLLECTIVES": "none"}),
        Variable("MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM", ("brucks", "recursive_doubling", "ring"),
                 ("all-gather",), {"MPIR_CVAR_DEVICE_COLLECTIVES": "none"}),
        Variable("MPIR_CVAR_REDUCE_SCATTER_INTRA_ALGORITHM", ("pairwise", "recursive_doubling", "recursive_halving"),
                 ("reduce-scatter",), {"MPIR_CVAR_DEVICE_COLLECTIVES": "none"}),
    ),
    "impi": (
        # Intel MPI's algorithm numbers (its reference, I_MPI_ADJUST family): allreduce 1 recursive
        # doubling, 2 Rabenseifner, 8 ring; allgather 1 recursive doubling, 2 Bruck, 3 ring;
        # reduce_scatter 1 recursive halving, 2 pairwise exchange, 3 recursive doubling.
        Variable("I_MPI_ADJUST_ALLREDUCE", ("1", "2", "8"), ("all-reduce",), {}, by_size=True),
        Variable("I_MPI_ADJUST_ALLGATHER", ("1", "2", "3"), ("all-gather",), {}, by_size=True),
        Variable("I_MPI_ADJUST_REDUCE_SCATTER", ("1", "2", "3"), ("reduce-scatter",), {}, by_size=True),
    ),
    "openmpi": (
        # Open MPI's coll/tuned fixed algorithms (ompi_info --param coll tuned --level 9):
        # allreduce 3 recursive doubling, 4 ring, 6 Rabenseifner; allgather 2 Bruck, 3 recursive
        # doubling, 4 ring; reduce_scatter 2 recursive halving, 3 ring.
        Variable("OMPI_MCA_coll_tuned_allreduce_algorithm", ("3", "4", "6"), ("all-reduce",),
                 {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}),
        Variable("OMPI_MCA_coll_tuned_allgather_algorithm", ("2", "3", "4"), ("all-gather",),
                 {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}),
        Variable("OMPI_MCA_coll_tuned_reduce_scatter_algorithm", ("2", "3"), ("reduce-scatter",),
                 {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}),
    ),
}
# The environment variables by which a user has already chosen the library's collectives.
USERS_OWN = {
    # MPICH reads each control variable as MPIR_CVAR_<NAME>, MPIR_PARAM_<NAME> and MPICH_<NAME> (its
    # mpir_cvars.c): a user's setting in any of the three is the user's (issue 81: the package's
    # MPIR_CVAR_DEVICE_COLLECTIVES=none won over a user's MPICH_DEVICE_COLLECTIVES=all)
    "mpich": re.compile(r"^(MPIR_CVAR_|MPIR_PARAM_|MPICH_)(DEVICE_COLLECTIVES|.*_ALGORITHM|.*COLL.*)$"),
    "impi": re.compile(r"^I_MPI_(ADJUST_.*|COLL_.*|TUNING.*)$"),
    "openmpi": re.compile(r"^OMPI_MCA_coll.*$"),
}
# Measured faster than the library's defaults at node scale, and never slower beyond the noise
# (16-core node, November 2026, the mpich 5.0.2 wheel, C MPI_Allreduce loop of float32, defaults
# against "none"). With the ranks unbound (2026-11-25): 2 ranks 835 vs 295 us at 1 MiB, 14.8 vs
# 5.7 ms at 16 MiB; 16 ranks 2.8 vs 1.1 ms, 49.5 vs 27.3 ms; JAX's psum through initialize() at 2
# ranks 1071 vs 539 us (1 MiB). With each rank bound to its slice, as initialize() does
# (2026-11-26): within 2-9% either way at 2, 8 and 16 ranks, and `tune --ranks 16`'s 1.11x for
# the defaults was inside its own noise (two launches of the same settings 24% apart at 16 MiB).
# On a 2-core VM the two were equal within noise. On 2026-11-27 `tune` (ranks bound) found "none"
# 1.02x the defaults' time at 8 ranks and 1.04x at 16, inside its 7.3-7.8% noise, and no MPICH
# algorithm faster beyond it (docs/benchmarks/node-16/README.md).
DEFAULTS = {"mpich": {"MPIR_CVAR_DEVICE_COLLECTIVES": "none"}}
DEFAULTS_WHY = {"mpich": "MPICH's generic collectives: 2.5-2.8x faster from 1 MiB at 2-16 ranks unbound on a 16-core "
                         "node, equal bound"}


def implementation(version_line: str) -> str:
    """"mpich", "impi", "openmpi" or "" from MPI_Get_library_version's first line. MPICH's
    derivatives (Cray MPICH, MVAPICH) say so first and are not MPICH here: their variables differ."""
    line = (version_line or "").strip()
    if line.startswith("MPICH Version"):
        return "mpich"
    if line.startswith("Intel(R) MPI Library"):
        return "impi"
    if line.startswith("Open MPI"):
        return "openmpi"
    return ""


def known(impl: str) -> dict:
    return {v.name: v for v in KNOWN.get(impl, ())}


_RANGE = re.compile(r"(\d+):(\d+)-(\d+)")
# The upper end of the last size range. Intel MPI 2021's sizes are C ints: a larger bound is
# "Incorrect adjust value" at MPI_Init, and then a segmentation fault in the first all-reduce
# (2021.18, 2 ranks: measured here), so no range may end above it.
LARGEST = (1 << 31) - 1


def size_ranges(value: str) -> list:
    """[(value, lo, hi)] of a by-size value, in its order; ValueError when it is not one."""
    out = []
    for part in value.split(";"):
        m = _RANGE.fullmatch(part)
        if not m or int(m[2]) > int(m[3]):
            raise ValueError(part)
        out.append((m[1], int(m[2]), int(m[3])))
    return out


def allowed_value(variable: Variable, value) -> bool:
    """One of the variable's values, or for a by-size variable ranges of them that do not overlap."""
    if value in variable.values:
        return True
    if not variable.by_size or not isinstance(value, str):
        return False
    try:
        ranges = size_ranges(value)
    except ValueError:
        return False
    ends = sorted((lo, hi) for _, lo, hi in ranges)
    return all(v in variable.values and hi <= LARGEST for v, _, hi in ranges) and \
        all(a_hi < b_lo for (_, a_hi), (b_lo, _) in zip(ends, ends[1:]))


def with_implied(impl: str, chosen: dict) -> dict:
    """The variables to set for `chosen`, with those they need beside them."""
    out = {}
    for name, value in chosen.items():
        out.update(known(impl)[name].implies)
        out[name] = value
    return out


def users_own(impl: str, environ) -> list:
    pattern = USERS_OWN.get(impl)
    return sorted(name for name in environ if pattern and pattern.match(name))


# ---- where the job runs: known before MPI starts ----

def _counts(spec):
    """Slurm's compressed list ("16(x2),8") as [16, 16, 8], or None."""
    counts = []
    for part in (spec or "").split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            return None
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts or None


def _slurm_tasks_per_node(environ):
    """This node's entry of SLURM_STEP_TASKS_PER_NODE ("16(x2),8": 16 on nodes 0-1, 8 on node 2)."""
    counts = _counts(environ.get("SLURM_STEP_TASKS_PER_NODE") or environ.get("SLURM_TASKS_PER_NODE"))
    node = environ.get("SLURM_NODEID")
    if not counts or node is None or not node.isdigit():
        return None
    return counts[int(node)] if int(node) < len(counts) else None


def local_ranks(environ=os.environ):
    """Ranks on this node as the launcher says before MPI starts, or None."""
    for name in ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_LOCAL_SIZE", "PMI_LOCAL_SIZE"):
        if (environ.get(name) or "").isdigit():
            return int(environ[name])
    return _slurm_tasks_per_node(environ)


# per_node: ranks on each node of the job, when every rank can know it (else None); size: the
# job's ranks; local: this node's; how: where per_node came from, or why it is unknown.
Layout = collections.namedtuple("Layout", "per_node size local how")


def job_layout(environ=os.environ) -> Layout:
    """The job's ranks per node as every rank of it can know before MPI starts."""
    size = launchers.launcher_rank_size(environ)[1] if launchers.launcher(environ) else None
    local = local_ranks(environ)
    if size is None or local is None:
        return Layout(None, size, local, "the launcher does not say how many ranks run on this node")
    # srun's step describes every node; the same variables seen by ranks that another launcher
    # started inside an allocation (Hydra's proxies are one srun step) describe that step instead:
    # used only when they count this job's ranks.
    steps = _counts(environ.get("SLURM_STEP_TASKS_PER_NODE"))
    node = environ.get("SLURM_NODEID", "")
    if (steps and sum(steps) == size and node.isdigit() and int(node) < len(steps)
            and steps[int(node)] == local):
        cpus = _counts(environ.get("SLURM_JOB_CPUS_PER_NODE"))
        if cpus and len(set(cpus)) > 1 and len(set(steps)) == 1:
            return Layout(None, size, local, f"Slurm gave this job's nodes different CPU counts "
                                             f"({environ['SLURM_JOB_CPUS_PER_NODE']})")
        return Layout(tuple(steps), size, local, "Slurm's SLURM_STEP_TASKS_PER_NODE")
    if local == size:
        return Layout((size,), size, local, "one node")
    return Layout(None, size, local, f"the launcher describes only this node ({local} of the job's {size} ranks)")


def node_cpus() -> int:
    return os.cpu_count() or 0


# ---- the tuning file ----

def default_file(environ=os.environ) -> str:
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "mpi-collectives", "tuning.json")


class Refused(Exception):
    """A tuning file that must not be used; the message says why and what to do."""


def _check_owner(path: str) -> None:
    for where in (path, os.path.dirname(os.path.abspath(path))):
        st = os.stat(where)
        if st.st_uid != os.geteuid():
            raise Refused(f"{where} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()})")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise Refused(f"{where} can be written by others (mode {stat.S_IMODE(st.st_mode):o}); "
                          f"fix: chmod go-w {where}")


def read_file(path: str) -> list:
    """The entries of a tuning file, each checked; [] when there is none. Raises Refused."""
    if not os.path.exists(path):
        return []
    _check_owner(path)
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise Refused(f"{path} cannot be read as JSON ({e})")
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), list):
        raise Refused(f"{path} is not a tuning file of format {FORMAT}")
    for entry in data["entries"]:
        _check_entry(path, entry)
    return data["entries"]


def _check_entry(path: str, entry) -> None:
    if not isinstance(entry, dict) or not isinstance(entry.get("settings"), dict):
        raise Refused(f"{path} holds an entry without settings")
    bind = entry.get("bind_cpus", BUILT_IN_BINDING)
    if type(bind) is not int or bind not in BINDINGS:
        raise Refused(f"{path} sets bind_cpus={bind!r}, which is not one of {', '.join(map(str, BINDINGS))}")
    node = entry.get("node_path", {"mode": 0, "collectives": "", "min": 0, "max": 0})
    keys = {"mode", "collectives", "min", "max"}
    if (not isinstance(node, dict) or set(node) - {"across_nodes", "direct", "round"} != keys
            or node["mode"] not in (0, 1) or not isinstance(node["collectives"], str)
            or any(w not in NODE_PATH_COLLECTIVES for w in node["collectives"].split(",") if node["collectives"])
            or any(type(node[k]) is not int or not 0 <= node[k] < 2 ** 31 for k in ("mode", "min", "max"))
            or any(type(node.get(k, 0)) is not int for k in ("across_nodes", "direct", "round"))
            or node.get("across_nodes", 0) not in (0, 1) or node.get("direct", 1) not in (0, 1)
            or not 0 <= node.get("round", 0) <= ROUND_MOST):
        raise Refused(f"{path} sets node_path={node!r}, which is not {{\"mode\": 0 or 1, \"collectives\": "
                      f"\"{','.join(NODE_PATH_COLLECTIVES)}\" or some of them, \"min\": bytes, \"max\": bytes}}, "
                      f"with \"across_nodes\": 0 or 1, \"direct\": 0 or 1, \"round\": 0 to {ROUND_MOST} "
                      "bytes, or without them")
    impl = entry.get("implementation")
    allowed = known(impl)
    for name, value in entry["settings"].items():
        if name not in allowed or not allowed_value(allowed[name], value):
            raise Refused(f"{path} sets {name}={value!r}, which is not among the settings mpi-collectives "
                          f"knows for {impl or 'that MPI'}")


def matching(entries: list, version_line: str, library: str, ranks: int, cpus: int):
    """The entry for this MPI installation, ranks per node and node size, or None."""
    for entry in entries:
        if (entry.get("version") == version_line and entry.get("library") == library
                and entry.get("ranks_per_node") == ranks and entry.get("cpus") == cpus):
            return entry
    return None


def write_entry(path: str, entry: dict) -> None:
    """Adds or replaces the entry for the same installation and node shape; the file and its
    folder are created readable and writable by you alone."""
    entries = [e for e in read_file(path)
               if not (e.get("version") == entry["version"] and e.get("library") == entry["library"]
                       and e.get("ranks_per_node") == entry["ranks_per_node"] and e.get("cpus") == entry["cpus"])]
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"format": FORMAT, "entries": entries + [entry]}, f, indent=1)
    os.replace(tmp, path)


# ---- the decision ----

def _shown(per_node) -> str:
    return ",".join(map(str, per_node))


def from_tuning_file(settings, environ=os.environ) -> dict:
    """{setting name: (value, where it came from)} for the settings the tuning file's entry gives this
    MPI installation and this job's shape, where you did not set them: what initialize() will take
    (binding_for_this_process, node_path_for_this_process), for `mpi-collectives env` and the start-up
    listing. Loads the MPI library (not MPI_Init) to know which one it is."""
    out = {}
    bind, why = binding_for_this_process(settings, environ)
    if why:
        out["bind_cpus"] = (bind, f"tuning file {settings.tuning_file or default_file(environ)}: {why}")
    node, line = node_path_for_this_process(settings, users_node_path(settings, environ), environ)
    if node is not None:
        names = ("node_path", "node_path_collectives", "node_path_min", "node_path_max", "node_path_across_nodes",
                 "node_path_direct", "node_path_round")
        where = f"tuning file {settings.tuning_file or default_file(environ)}"
        for name, value in zip(names, node):
            out[name] = (value, where)
    return out


def missing_file_lines(settings) -> list:
    """A sentence where MPI_COLLECTIVES_TUNING_FILE (or the keyword) names a file that is not there: a
    site that points every job at a shared file and mistypes it got the built-in choice without a word
    (issue 81). The default file may be absent: `tune` has not run."""
    path = settings.tuning_file
    if not path or os.path.exists(path):
        return []
    return [f"mpi-collectives: MPI_COLLECTIVES_TUNING_FILE names {path}, which does not exist here, so the "
            "built-in choices are used. Fix: correct the path (a file every node can read), or unset it for "
            f"the default ({default_file()})"]


def tuned_entry(version_line: str, library: str, environ, *, path=None, ranks=None, cpus=None, layout=None) -> tuple:
    """(the tuning file's entry for this MPI installation and this job's shape, or None; a note for
    the line, "" or starting with "; "): decide()'s arguments of the same names."""
    path = path or default_file(environ)
    library = os.path.realpath(library) if library else library
    if layout is None:
        layout = Layout((ranks,), ranks, ranks, "given") if ranks is not None else job_layout(environ)
    cpus = node_cpus() if cpus is None else cpus
    try:
        entries = read_file(path)
    except Refused as e:
        return None, f"; tuning file ignored: {e}"
    even = layout.per_node is not None and len(set(layout.per_node)) == 1
    ranks = layout.per_node[0] if even else None
    entry = matching(entries, version_line, library, ranks, cpus) if even else None
    if entry is not None or not entries:
        return entry, ""
    if not even:
        # Nodes with different numbers of ranks would each take another entry (or none),
        # and their collectives would no longer meet: one choice for all instead.
        uneven = (f"this job's nodes hold different numbers of ranks ({_shown(layout.per_node)}, "
                  f"{layout.how})" if layout.per_node is not None else layout.how)
        return None, (f"; {path} not used: its entries are each for one number of ranks per node, and "
                      f"{uneven}, so every rank takes the same built-in choice")
    shapes = sorted({f"{e.get('ranks_per_node')} ranks on {e.get('cpus')} CPUs" for e in entries})
    return None, (f"; {path} has no entry for this MPI with {ranks} ranks on {cpus} CPUs "
                  f"(it has {', '.join(shapes)}): run mpi-collectives tune for this shape")


def decide(version_line: str, library: str, environ, *, enabled=True, initialized=False, path=None,
           ranks=None, cpus=None, layout=None) -> tuple:
    """({variable: value} to set, the line for Info.tunings; "" where there is nothing to say).
    `layout` (job_layout()'s) defaults to the environment's; `ranks` is short for an even job of
    that many ranks per node."""
    if not enabled:
        return {}, "mpi-settings: off (MPI_COLLECTIVES_MPI_SETTINGS=0)"
    impl = implementation(version_line)
    if not impl:
        return {}, ""
    own = users_own(impl, environ)
    if own:
        return {}, f"mpi-settings: not applied (left to your {', '.join(own)})"
    if initialized:
        return {}, "mpi-settings: not applied (MPI was initialized before initialize(), by another library)"
    entry, note = tuned_entry(version_line, library, environ, path=path, ranks=ranks, cpus=cpus, layout=layout)
    if entry is not None:
        chosen, why = entry["settings"], f"measured by mpi-collectives tune on {entry.get('date', '?')}"
    else:
        chosen, why = DEFAULTS.get(impl, {}), DEFAULTS_WHY.get(impl, "")
    if not chosen:
        why = "measured fastest by mpi-collectives tune" if entry is not None else "nothing measured faster"
        return {}, f"mpi-settings: the library's defaults ({why}){note}"
    shown = ", ".join(f"{k}={v}" for k, v in chosen.items())
    return with_implied(impl, chosen), f"mpi-settings: {shown} ({why}){note}"


def for_this_process(settings, apply=True) -> tuple:
    """(the variables this process's MPI_Init gets, the line for Info.tunings); with apply=True they
    are put in the environment, before MPI_Init reads them; with apply=False only decided, as if
    MPI were not initialized yet."""
    chosen, line = decide(mpi.library_version(), mpi.library(), os.environ, enabled=bool(settings.mpi_settings),
                          initialized=apply and mpi.is_initialized(), path=settings.tuning_file)
    if apply:
        os.environ.update(chosen)
    return chosen, line


def binding_for_this_process(settings, environ=os.environ) -> tuple:
    """(MPI_COLLECTIVES_BIND_CPUS's value for this rank, where it came from when not from you or the
    built-in BUILT_IN_BINDING, else ""): yours when you set it, else what `mpi-collectives tune`
    measured for this MPI installation and this job's shape (the tuning file's entry, as for the
    library's settings), else the built-in. Binding acts on each rank alone, so ranks may differ."""
    if settings.bind_cpus is not None:
        return settings.bind_cpus, ""
    entry, _ = tuned_entry(mpi.library_version(), mpi.library(), environ, path=settings.tuning_file)
    if entry is None or "bind_cpus" not in entry:
        return BUILT_IN_BINDING, ""
    return entry["bind_cpus"], (f"MPI_COLLECTIVES_BIND_CPUS={entry['bind_cpus']} measured fastest by "
                                f"mpi-collectives tune on {entry.get('date', '?')}")


def users_node_path(settings, environ=os.environ) -> bool:
    """Whether you chose any of the node path's settings (in the environment, or as initialize()'s
    keywords): asked before initialize() exports every native setting to the environment."""
    names = ("node_path", "node_path_collectives", "node_path_min", "node_path_max", "node_path_across_nodes",
             "node_path_direct", "node_path_round")
    # an empty variable is the default, as everywhere (issue 81: an empty MPI_COLLECTIVES_NODE_PATH= threw
    # away the tuning file's node path, where an empty MPI_COLLECTIVES_BIND_CPUS= kept the file's binding)
    return (any(environ.get(SETTINGS_TABLE[name].var) for name in names)
            or any(getattr(settings, name) != SETTINGS_TABLE[name].default for name in names))


def node_path_for_this_process(settings, users_own: bool, environ=os.environ) -> tuple:
    """((mode, collectives, min, max, across_nodes, direct, round) for the native layer, as the
    settings write them, or None to keep the settings as they are; the line for Info.tunings, ""
    where there is nothing to say): what `mpi-collectives tune` measured for this MPI installation
    and this job's shape (the tuning file's entry, as for the library's settings; an entry without
    "direct" or "round" keeps the settings' values), unless you chose any of MPI_COLLECTIVES_NODE_PATH,
    _COLLECTIVES, _MIN, _MAX, _ACROSS_NODES, _DIRECT or _ROUND (users_own: users_node_path()'s
    answer): then yours, all seven."""
    if users_own:
        return None, ""
    entry, _ = tuned_entry(mpi.library_version(), mpi.library(), environ, path=settings.tuning_file)
    if entry is None or "node_path" not in entry:
        return None, ""
    node, when = entry["node_path"], entry.get("date", "?")
    across = node.get("across_nodes", 0)
    direct, round_bytes = node.get("direct", settings.node_path_direct), node.get("round", settings.node_path_round)
    chosen = (node["mode"], node["collectives"], node["min"], node["max"], across, direct, round_bytes)
    measured = f"measured by mpi-collectives tune on {when}"
    if not node["mode"]:
        return chosen, (f"node-path: off (MPI_COLLECTIVES_NODE_PATH=0: the library's own collectives measured "
                        f"faster by mpi-collectives tune on {when})")
    small = (f"; small collectives in one round up to {round_bytes} bytes of the peers' data "
             f"(MPI_COLLECTIVES_NODE_PATH_ROUND={round_bytes})" if round_bytes else
             "; no round for small collectives (MPI_COLLECTIVES_NODE_PATH_ROUND=0)") if "round" in node else ""
    reads = "" if direct or not node["collectives"] else \
        "; every byte through the window, no reads in place (MPI_COLLECTIVES_NODE_PATH_DIRECT=0)"
    if not node["collectives"]:
        return chosen, (f"node-path: the library's own large collectives{small} ({measured})")
    upto = f" to {node['max']}" if node["max"] else ""
    composed = ", all-reduces across nodes composed with each node's window" if across else ""
    return chosen, (f"node-path: {node['collectives']} from {node['min']}{upto} bytes{composed}{reads}{small} "
                    f"(MPI_COLLECTIVES_NODE_PATH_COLLECTIVES={node['collectives']}, _MIN={node['min']}, "
                    f"_MAX={node['max']}{', _ACROSS_NODES=1' if across else ''}: {measured})")


def set_for_this_process(settings, apply=True) -> str:
    """for_this_process()'s line only."""
    return for_this_process(settings, apply)[1]

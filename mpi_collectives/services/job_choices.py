"""One job, one set of choices: what each rank chose that changes what the MPI
library or the wrapper does on the wire, compared across the job after
MPI_Init and before JAX's first collective.

An MPI library whose ranks run different collective algorithms hangs in its
first all-reduce, or fails with an error that names no cause ("Message
truncated"); the wrapper's agreement check on some ranks only does the same.
library_settings.py chooses from what every rank shares, but some things a
rank cannot know before MPI starts (a tuning file only some nodes see, nodes
of different sizes, a variable a launcher passed to some ranks only). So the
ranks compare here, by point-to-point messages to rank 0 (never by a
collective, whose algorithm may be the very thing that differs), and a job
whose ranks differ stops with one line on every rank naming the setting, the
ranks, their values and the fix.

What is compared (this_rank()): the MPI library and the thread level it
granted, the MPI library's collective variables in the environment after
initialize() set its own, JAX's collectives implementation, and the
wrapper's settings that change what goes on the wire or which calls XLA may
make (the agreement check, the split check, the answer to MPI_Is_thread_main,
and the node path's five settings as the native layer will hold them: the
tuning file's entry where initialize() takes it, else the environment's and
initialize()'s keywords').
CPU devices per process are compared right after, in jax_setup. Settings that
act on one rank alone (binding, freed memory, the stall report, watching the
peers) may differ: the start-up exchanges they use run on every rank whatever
the setting (tests/package/test_job_choices.py launches a rank with every such
setting of its own).
"""
import collections
import os
import socket

import numpy as np

from . import library_settings
from ..base import launchers, mpi
from ..base.ending import end_job

CHOICES_BYTES = 4096  # each rank's choices as text (name=value lines)
TAG_CHOICES, TAG_VERDICT = 7311, 7312
UNSET = "unset"

# The wrapper's settings that change what a rank puts on the wire or lets XLA do: the
# environment variable (what a user sets) and the field of settings.Settings.
WIRE_SETTINGS = {"MPI_COLLECTIVES_CHECK_COLLECTIVES": "check_collectives", "MPI_COLLECTIVES_ANY_THREAD": "any_thread",
                 # The split check is an allgather of its own inside each of XLA's MPI_Comm_split calls.
                 "MPI_COLLECTIVES_CHECK_SPLITS": "check_splits",
                 # Whether each of XLA's communicators on one node makes a shared window, and which
                 # collectives go through it: ranks that differ would wait in different calls.
                 "MPI_COLLECTIVES_NODE_PATH": "node_path",
                 "MPI_COLLECTIVES_NODE_PATH_COLLECTIVES": "node_path_collectives",
                 "MPI_COLLECTIVES_NODE_PATH_MIN": "node_path_min",
                 "MPI_COLLECTIVES_NODE_PATH_MAX": "node_path_max",
                 "MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES": "node_path_across_nodes"}
# How to make each kind of setting the same on every rank.
_FIX_ENV = ("set {name} to one value for every rank (export it in the job script before the launcher: "
            "mpiexec -genv, mpirun -x and srun pass the environment on), or unset it everywhere")
_FIX_TUNING = ("make every node read the same tuning file (MPI_COLLECTIVES_TUNING_FILE on a filesystem every "
               "node shares, and `mpi-collectives tune` for each kind of node the job uses), or set "
               "MPI_COLLECTIVES_MPI_SETTINGS=0 for the library's defaults on every rank")
# The node path's settings where a rank took them from its tuning file: set alike by you, they take
# the file's entry out of play (library_settings.users_node_path()).
_FIX_NODE_PATH_TUNING = ("make every node read the same tuning file (MPI_COLLECTIVES_TUNING_FILE on a filesystem "
                         "every node shares, and `mpi-collectives tune` for each kind of node the job uses), or take "
                         "the tuning file's node-path entry out of play on every rank: MPI_COLLECTIVES_NODE_PATH=0 "
                         "(the MPI library's own collectives), or the node path's variables set by you to the same "
                         "values for every rank")
_FIX_INSTALL = ("run every rank with the same MPI installation and the same mpi-collectives settings (one "
                "module environment, one venv on a shared filesystem)")


def this_rank(settings, level: str, collectives: str, settings_line: str = "", environ=os.environ, *,
              node_path=None, users_node_path=None) -> dict:
    """This rank's choices, {name: value} in a fixed order: `settings` (base.settings.read()'s),
    the thread level MPI granted, JAX's collectives implementation, and `settings_line`,
    library_settings' line for this rank (why its MPI library variables are what they are),
    which is said beside a difference and never compared. `node_path`: the tuning file's
    (library_settings.node_path_for_this_process()'s tuple, or None), compared in place of the
    settings' five; `users_node_path`: library_settings.users_node_path()'s answer, asked of
    `environ` where None (after initialize() exported its settings every one is in the environment)."""
    out = {"MPI library": mpi.library_name(), "MPI thread level": level,
           "JAX_CPU_COLLECTIVES_IMPLEMENTATION": collectives or UNSET}
    for name, field in WIRE_SETTINGS.items():
        out[name] = str(getattr(settings, field))
    if node_path:
        out.update(node_path_values(node_path))
    out.update(library_variables(environ))
    out["why"] = _source(settings_line)
    if users_node_path is None:
        users_node_path = library_settings.users_node_path(settings, environ)
    out[NODE_PATH_SOURCE] = TUNING_FILE if node_path else "set by you" if users_node_path else "the default"
    return out


def node_path_values(node_path) -> dict:
    """node_path_for_this_process()'s (mode, collectives, min, max, across_nodes) as the settings
    write them, {MPI_COLLECTIVES_NODE_PATH*: value}: the collectives in the settings' order (a
    tuning file may list them in another), "none" for an entry that names none (the path off)."""
    from ..base.settings import TABLE
    mode, collectives, low, high, across = node_path[:5]  # the last two (direct, round) each window agrees on
    words = collectives.split(",")
    collectives = ",".join(w for w in TABLE["node_path_collectives"].allowed.words if w in words) or "none"
    return dict(zip(library_settings.NODE_PATH_VARIABLES, (str(v) for v in (mode, collectives, low, high, across))))


def library_variables(environ=os.environ) -> dict:
    """The loaded MPI library's collective variables in `environ`, {name: value} by name (every
    library's patterns where the library is not one library_settings knows)."""
    impl = library_settings.implementation(mpi.library_version() or "")
    pattern = library_settings.USERS_OWN.get(impl)
    patterns = [pattern] if pattern else list(library_settings.USERS_OWN.values())
    implied = {k for v in library_settings.KNOWN.get(impl, ()) for k in v.implies}
    return {name: environ[name] for name in sorted(environ) if any(p.match(name) for p in patterns) or name in implied}


def init_crash_note(settings_line: str, environ=os.environ) -> str:
    """What a rank says if its MPI library crashes inside MPI_Init (native init_crash.c): before
    the comparison below can run, ranks whose library settings differ can crash there."""
    rank, size = launchers.launcher_rank_size(environ)
    started = ", ".join(f"{k}={v}" for k, v in library_variables(environ).items())
    source = _source(settings_line)
    return (f"mpi-collectives: error: rank {rank}/{size}: the MPI library crashed inside MPI_Init, before the "
            "ranks could compare their settings. Ranks that start MPI with different settings of the library can "
            "crash there (MPICH, when one rank has an MPIR_CVAR_*_ALGORITHM of its own); this rank started it with "
            + (f"{started}{f' ({source})' if source else ''}" if started else "none of the library's collective "
               "variables") + ". Fix: give every rank the same MPI library variables, or none (export them in "
            "the job script before the launcher: mpiexec -genv, mpirun -x and srun pass the environment on; a rank "
            "with a variable of its own skips initialize()'s built-in choice); if every rank has the same, the "
            "crash is the MPI library's own.")


def _source(settings_line: str) -> str:
    """Where library_settings' line says this rank's MPI library variables came from, in a few words."""
    for words, source in (("left to your", "set by you"), ("measured by mpi-collectives tune", "the tuning file"),
                          ("measured fastest by mpi-collectives tune", "the tuning file"),
                          ("MPI_COLLECTIVES_MPI_SETTINGS=0", "MPI_COLLECTIVES_MPI_SETTINGS=0"),
                          ("initialized before initialize()", "MPI started by another library"),
                          ("mpi-settings: ", "the built-in default")):
        if words in (settings_line or ""):
            return source
    return ""


def encode(choices: dict) -> np.ndarray:
    data = "\n".join(f"{k}={v}" for k, v in choices.items()).encode()[:CHOICES_BYTES - 1]
    out = np.zeros(CHOICES_BYTES, np.uint8)
    out[:len(data)] = np.frombuffer(data, np.uint8)
    return out


def decode(message: np.ndarray) -> dict:
    text = bytes(message).split(b"\0", 1)[0].decode(errors="replace")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def ranks_text(ranks) -> str:
    """[0, 1, 2, 5] -> 'ranks 0-2, 5'; [3] -> 'rank 3'."""
    ranks, parts, start = sorted(ranks), [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(parts)


def _hosts_text(ranks, hosts) -> str:
    names = list(dict.fromkeys(hosts[r] for r in ranks if r < len(hosts) and hosts[r]))
    if len(set(h for h in hosts if h)) < 2:
        return ""  # one host: naming it says nothing
    if not names:
        return ""
    return " on " + ", ".join(names[:4]) + (f" and {len(names) - 4} more hosts" if len(names) > 4 else "")


def difference(choices: list, hosts: list = ()) -> "str | None":
    """The one line for a job whose ranks (choices[r] is rank r's) chose differently, else None."""
    names = list(dict.fromkeys(k for c in choices for k in c if k not in NOT_COMPARED))
    parts, fixes = [], []
    for name in names:
        groups = collections.OrderedDict()
        for r, c in enumerate(choices):
            groups.setdefault(c.get(name, UNSET), []).append(r)
        if len(groups) < 2:
            continue
        said, key = [], _source_key(name)
        for value, ranks in groups.items():
            why = {choices[r].get(key, "") for r in ranks} if key else set()
            why = next(iter(why)) if len(why) == 1 and next(iter(why)) else ""
            said.append(f"{value} on {ranks_text(ranks)}{_hosts_text(ranks, hosts)}"
                        + (f" ({why})" if why else ""))
        parts.append(f"{name} is " + "; ".join(said))
        fixes.append(_fix(name, choices))
    if not parts:
        return None
    own = [f for f in fixes if f not in (_FIX_INSTALL, _FIX_TUNING, _FIX_NODE_PATH_TUNING)]
    if len(own) > 1:  # one sentence for every variable to set alike
        names = [n for n, f in zip([p.split(" is ", 1)[0] for p in parts], fixes) if f in own]
        fixes = [f for f in fixes if f not in own] + [_FIX_ENV.format(name=" and ".join(names) + " each")]
    fixes = list(dict.fromkeys(fixes))
    return ("the ranks of this job chose different settings, and MPI's collectives hang or fail when they "
            "differ: " + " | ".join(parts) + ". Fix: " + "; and ".join(fixes) + ".")


_LIBRARY_PREFIXES = ("MPIR_CVAR_", "MPIR_PARAM_", "MPICH_", "I_MPI_", "OMPI_MCA_")
# Where a rank's node-path settings came from: the tuning file, "set by you" or "the default".
NODE_PATH_SOURCE = "node_path_source"
TUNING_FILE = "the tuning file"
NOT_COMPARED = ("why", NODE_PATH_SOURCE, "host")  # said with a difference, never one


def _source_key(name: str) -> "str | None":
    """The key of a rank's choices that says where its value of `name` came from, if one does."""
    if name.startswith(_LIBRARY_PREFIXES):
        return "why"
    return NODE_PATH_SOURCE if name in library_settings.NODE_PATH_VARIABLES else None


def _fix(name: str, choices) -> str:
    if name in ("MPI library", "MPI thread level"):
        return _FIX_INSTALL
    if name.startswith(_LIBRARY_PREFIXES):
        if any(c.get("why") == "set by you" for c in choices):
            return _FIX_ENV.format(name=name)
        return _FIX_TUNING
    if _source_key(name) == NODE_PATH_SOURCE and any(c.get(NODE_PATH_SOURCE) == TUNING_FILE for c in choices):
        return _FIX_NODE_PATH_TUNING  # a file chose it, not a variable that _FIX_ENV would name
    return _FIX_ENV.format(name=name)


def agree(rank: int, size: int, mine: dict, timeout: float) -> "str | None":
    """Compare every rank's choices (this_rank()'s) at rank 0, point to point only; on every rank,
    None when they are the same, else difference()'s line. A rank that does not send its choices
    within `timeout` seconds ends the job (it died, or never got here)."""
    mine = dict(mine, host=socket.gethostname())
    if size < 2:
        return None
    if rank != 0:
        verdict = mpi.irecv(np.zeros(CHOICES_BYTES, np.uint8), 0, TAG_VERDICT)
        sent = mpi.isend(encode(mine), 0, TAG_CHOICES)
        if mpi.wait_all([verdict], timeout):
            end_job(f"rank {rank}/{size} waited {timeout:.0f} s for rank 0 to compare the ranks' settings: rank 0 "
                    "died or never got there. Fix: call mpi_collectives.initialize() on every rank.")
        mpi.wait_all([sent], timeout)
        text = bytes(verdict[1]).split(b"\0", 1)[0].decode(errors="replace")
        return text or None
    reqs = [mpi.irecv(np.zeros(CHOICES_BYTES, np.uint8), r, TAG_CHOICES) for r in range(1, size)]
    late = mpi.wait_all(reqs, timeout)
    if late:
        end_job(f"rank(s) {', '.join(str(i + 1) for i in late)} of {size} did not send rank 0 their settings "
                f"within {timeout:.0f} s (they died, or never got there). Fix: call mpi_collectives.initialize() "
                "on every rank.")
    every = [mine] + [decode(buf) for _, buf in reqs]
    line = difference(every, [c.get("host", "") for c in every])
    verdict = np.zeros(CHOICES_BYTES, np.uint8)
    data = (line or "").encode()[:CHOICES_BYTES - 1]
    verdict[:len(data)] = np.frombuffer(data, np.uint8)
    mpi.wait_all([mpi.isend(verdict, r, TAG_VERDICT) for r in range(1, size)], timeout)
    return line

"""Room for the job's file descriptors, made before anything opens them.

Rank 0 hosts JAX's coordinator, a gRPC server that holds one connection to
every rank for the whole job; JAX and the MPI library open more per peer
(the scale bench at 2-64 ranks on one node, MPICH: 2 descriptors a rank on
rank 0, 3 a peer of the node on the others, gloo as many; docs/scale.md).
A cluster's usual soft limit of 1,024 open files is then reached near 340
ranks (3 a rank: the bench's 2 and a TCP connection a rank across nodes), where gRPC's accept fails and the
ranks it never registered wait out JAX's start-up timeout with an error that
names nothing a user can act on. So every rank raises its soft limit to the
hard one (Go's runtime does the same for every program since 1.19: the soft
limit exists for select(), which neither JAX nor this package uses), and the
coordinator's rank ends the job with one sentence where even the hard limit
cannot hold a connection per rank."""
import os

try:
    import resource
except ImportError:  # not a POSIX system: nothing to raise
    resource = None

PER_RANK_ON_COORDINATOR = 3  # descriptors rank 0 holds for each rank: the bench's 2 on one node, and MPI's socket across
# Descriptors JAX opens after this check whatever the ranks (its backend, gRPC's pollers): at 2 ranks rank 0
# held 46 once started (the scale bench), and gRPC reported "File descriptor limit reached" under a limit of 40.
JAX_AFTER = 32


def open_now() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 64


def make_room(rank: int, size: int) -> tuple:
    """(a line for the log, a warning for every user to see, an error sentence that ends the job), each ""
    where there is none: the soft limit raised to the hard one; on rank 0, the warning where the limit
    is below the measured rate, the error where it cannot hold even one connection a rank."""
    if resource is None:
        return "", "", ""
    inf = resource.RLIM_INFINITY
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    line = ""
    if soft != inf and (hard == inf or soft < hard):
        target = hard if hard != inf else max(soft, 1 << 20)  # (Linux's nr_open by default)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            line, soft = f"open files: soft limit {soft} raised to {target} (the hard limit)", target
        except (OSError, ValueError) as e:
            line = f"open files: the soft limit {soft} could not be raised to {target}: {e}"
    if rank != 0 or soft == inf:
        return line, "", ""
    opened = open_now()
    likely = opened + JAX_AFTER + PER_RANK_ON_COORDINATOR * size
    if soft < opened + size:  # one connection a rank to the coordinator, at the least
        return line, "", (
            f"rank 0 hosts JAX's coordinator, which holds a connection to each of the {size} ranks, and this "
            f"process may open only {soft} files (`ulimit -Hn`; {opened} are open already), so some ranks could "
            f"never join. Fix: raise the hard limit of open files to at least {likely} (`ulimit -n {likely}` in "
            f"the job script, or ask your administrators), or run fewer ranks")
    if soft < likely:
        return line, (f"rank 0 may open {soft} files, and {size} ranks need about {likely} there (JAX's coordinator "
                      f"and the MPI library hold about {PER_RANK_ON_COORDINATOR} a rank): raise the hard limit "
                      f"(`ulimit -n {likely}` in the job script) if the start-up fails"), ""
    return line, "", ""

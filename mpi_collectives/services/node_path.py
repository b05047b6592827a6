"""What the node's own data path (native/src/services/node/) will do for a job, in
words, for `mpi-collectives info --init` and `doctor`: whether XLA's communicators
among ranks of one node get a shared window, from which size, and whether this
node's /dev/shm has room for them. The native layer decides for itself, per
communicator, by the same rules (docs/design.md, "The node's own data path")."""
import os

# native/src/services/node/internal.h: MPIC_NODE_SHARE: a page of stamps, two halves and an exchange slot of
# MPIC_NODE_CHUNK, and the one round's two buffers, a rank
WINDOW_PER_RANK = 4096 + 3 * 512 * 1024 + 2 * (64 + 65536)


def shm_free(path="/dev/shm"):
    """Bytes free in the node's shared-memory filesystem, or None where there is none."""
    try:
        fs = os.statvfs(path)
    except OSError:
        return None
    return fs.f_bavail * fs.f_frsize


def describe(placements: list, chosen, free=None) -> str:
    """One line: off, or on with its threshold and memory, and the room left where it is short.
    placements: layout.gather's, one per rank; chosen: settings.read()'s."""
    if not chosen.node_path:
        return "off (MPI_COLLECTIVES_NODE_PATH=0): every collective is the MPI library's own"
    per_node = {}
    for p in placements:
        per_node[p.host] = per_node.get(p.host, 0) + 1
    most = max(per_node.values())
    if most < 2:
        return "not used: no two ranks share a node (one rank a node: nothing moves within a node)"
    need = most * WINDOW_PER_RANK
    free = shm_free() if free is None else free
    upto = f" and at most {chosen.node_path_max}" if chosen.node_path_max else ""
    window = f"a shared window of MPI's ({need // 1024} KiB of shared memory for {most} ranks, per communicator)"
    if chosen.node_path_collectives:
        line = (f"on: {chosen.node_path_collectives} of at least {chosen.node_path_min}{upto} "
                f"bytes among ranks of one node through {window}")
    else:  # a tuning entry's round alone: the library's own large collectives
        line = f"on for small collectives only (large ones are the library's own), through {window}"
    if chosen.node_path_round and chosen.check_collectives:
        line += (f"; every checked collective's check, and its data up to {chosen.node_path_round} bytes, in one "
                 "round through it (MPI_COLLECTIVES_NODE_PATH_ROUND)")
    if chosen.node_path == 2:
        line += "; not under Intel MPI (its own is near the memory floor: MPI_COLLECTIVES_NODE_PATH=1 takes it)"
    if len(per_node) > 1:
        if not chosen.node_path_across_nodes:
            line += ("; communicators that span nodes keep the library's "
                     "(MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1 composes their all-reduces)")
        elif len(set(per_node.values())) == 1:
            line += ("; all-reduces of communicators that span nodes: each node's window, the library between "
                     "nodes (MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1)")
        else:
            line += ("; communicators that span nodes keep the library's: the nodes hold different numbers of "
                     "ranks, so MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1 cannot compose them")
    if free is not None and free < 2 * need:
        line += (f"; but /dev/shm has {free // 1024} KiB free here, less than twice that: each communicator "
                 "will use the library's own (a larger /dev/shm, or MPI_COLLECTIVES_NODE_PATH=0)")
    return line

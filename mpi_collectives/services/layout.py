"""Where a job's ranks sit: for each node, its ranks, their CPUs, and the node's sockets and NUMA
domains, from one exchange at start-up (gather()), before any binding of ours. The CPU binding
(tuning.bind_cpus) cuts each node from the same exchange; `doctor` and `info --init` print the
report (describe()); initialize() prints the advice (advice()) once, from rank 0, where a node
holds more ranks than it has sockets or NUMA domains: what was measured for each class of program
(a dense step is fastest as one rank per node, Monte Carlo sampling as one rank per core) and the
command that measures the user's own (docs/layout.md has the figures).
"""
import dataclasses
import os
import socket

import numpy as np

from ..base.topology import Topology

MAX_CPUS = 4096           # CPU numbers a rank can report to the others
HOST_BYTES = 256
COUNTS = ("cpus", "cores", "sockets", "numa")  # the node's, as Topology.summary() gives them
DOCS = "docs/layout.md"


@dataclasses.dataclass(frozen=True)
class Placement:
    """One rank as it started: its host, its CPU set (the launcher's or the user's binding, or
    the whole node), and its node's topology.summary()."""
    host: str
    cpus: frozenset
    node: dict


def _record(host: str, cpus, node: dict) -> np.ndarray:
    out = np.zeros(HOST_BYTES + MAX_CPUS // 8 + 4 * len(COUNTS), np.uint8)
    name = host.encode()[:HOST_BYTES - 1]
    out[:len(name)] = np.frombuffer(name, np.uint8)
    bits = np.zeros(MAX_CPUS, np.uint8)
    bits[[c for c in cpus if c < MAX_CPUS]] = 1
    out[HOST_BYTES:HOST_BYTES + MAX_CPUS // 8] = np.packbits(bits)
    out[HOST_BYTES + MAX_CPUS // 8:] = np.array([node.get(k, 0) for k in COUNTS], np.int32).view(np.uint8)
    return out


def _parse(record: np.ndarray) -> Placement:
    host = bytes(record[:HOST_BYTES]).split(b"\0", 1)[0].decode(errors="replace")
    cpus = frozenset(np.flatnonzero(np.unpackbits(record[HOST_BYTES:HOST_BYTES + MAX_CPUS // 8])).tolist())
    counts = np.ascontiguousarray(record[HOST_BYTES + MAX_CPUS // 8:]).view(np.int32).tolist()
    return Placement(host, cpus, dict(zip(COUNTS, counts)))


def this_rank(topology=None) -> Placement:
    topology = topology if topology is not None else Topology.read()
    return Placement(socket.gethostname(), frozenset(os.sched_getaffinity(0)), topology.summary())


def gather(size: int, allgather, mine: Placement = None) -> list:
    """Every rank's Placement, by rank: one allgather, collective over the job."""
    mine = mine or this_rank()
    return [_parse(r) for r in allgather(_record(mine.host, mine.cpus, mine.node), size)]


@dataclasses.dataclass(frozen=True)
class Node:
    host: str
    ranks: tuple          # the job's ranks on this node
    cpus_each: tuple      # CPUs of each of them, as they started
    shared: bool          # all of them started with the same CPU set (nobody bound them)
    node: dict            # topology.summary() of the node

    @property
    def domains(self) -> int:
        """The units a rank is best given whole: NUMA domains, or sockets where more (or known)."""
        return max(self.node.get("numa", 0), self.node.get("sockets", 0), 1)

    @property
    def crowded(self) -> bool:
        """More ranks than sockets or NUMA domains: slower for a dense program, faster for some
        others (docs/layout.md), so worth one line and a measurement."""
        return len(self.ranks) > self.domains


def oversubscribed(placements: list, rank: int) -> bool:
    """Do the ranks on `rank`'s node outnumber the CPUs they started on (the union of their CPU sets:
    unbound ranks share the node's, bound ones each their own)? Hyperthreads count as CPUs."""
    host = placements[rank].host
    here = [p.cpus for p in placements if p.host == host]
    return len(here) > len(frozenset().union(*here))


def nodes(placements: list) -> list:
    """The placements by node, in the order of each node's first rank."""
    by_host = {}
    for rank, p in enumerate(placements):
        by_host.setdefault(p.host, []).append(rank)
    return [Node(host, tuple(ranks), tuple(len(placements[r].cpus) for r in ranks),
                 len({placements[r].cpus for r in ranks}) == 1, placements[ranks[0]].node)
            for host, ranks in by_host.items()]


def _cpus_text(node: Node) -> str:
    counts = sorted(set(node.cpus_each))
    each = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    if len(node.ranks) == 1:
        return f"{each} CPUs"
    return f"{each} CPUs each" + (" (the same set for all: the launcher bound none)" if node.shared else "")


def _node_text(node: Node) -> str:
    n = node.node
    parts = [f"{n['cpus']} CPUs", f"{n['cores']} cores"] if n.get("cores") else [f"{n['cpus']} CPUs"]
    if n.get("sockets"):
        parts.append(f"{n['sockets']} socket{'s' if n['sockets'] > 1 else ''}")
    if n.get("numa"):
        parts.append(f"{n['numa']} NUMA domain{'s' if n['numa'] > 1 else ''}")
    return ", ".join(parts)


def describe(placements: list, most: int = 8) -> list:
    """The layout in lines, one per kind of node (nodes alike in ranks, CPUs and topology share a
    line, so that a job of 64 nodes reads in one)."""
    kinds = {}
    for node in nodes(placements):
        key = (len(node.ranks), _cpus_text(node), _node_text(node))
        kinds.setdefault(key, []).append(node.host)
    lines = []
    for (ranks, cpus, shape), hosts in kinds.items():
        names = ", ".join(hosts[:most]) + (f" and {len(hosts) - most} more" if len(hosts) > most else "")
        where = f"{len(hosts)} nodes ({names})" if len(hosts) > 1 else names
        lines.append(f"{where}: {ranks} rank{'s' if ranks > 1 else ''}, {cpus}; node of {shape}")
    return lines


def advice(placements: list) -> str:
    """One sentence where a node holds more ranks than its sockets or NUMA domains, else "": which
    layout wins depends on the program, so it gives the figures of both classes measured (a dense
    data-parallel step, Monte Carlo sampling) and the command that measures the user's own."""
    crowded = [n for n in nodes(placements) if n.crowded]
    if not crowded:
        return ""
    node = crowded[0]
    per = len(node.ranks)
    unit = "NUMA domain" if node.node.get("numa", 0) > max(node.node.get("sockets", 0), 1) else \
        "socket" if node.node.get("sockets", 0) > 1 else "node"
    fewer = f"one rank per {unit} ({node.domains} on {node.host})" if unit != "node" else "one rank per node"
    return (f"{per} ranks share node {node.host} ({_shape(node)})"
            + (f", as on {len(crowded) - 1} other node{'s' if len(crowded) > 2 else ''}" if len(crowded) > 1 else "")
            + f": the faster layout depends on the program: a dense data-parallel step ran 3-10x faster as "
            f"{fewer} with all its cores (a 16-core node: 32 ms a step as 1 rank, 99-336 ms as 2-16 ranks), "
            "Monte Carlo sampling 1.55x faster as one rank per core (NetKet's VMC on 2 cores: 20 ms an iteration "
            f"as 2 ranks, 31 as 1); measure yours with `mpi-collectives layouts` ({DOCS})")


def _shape(node: Node) -> str:
    """The node's cores and domains, briefly."""
    n = node.node
    parts = [f"{n['cores'] or n['cpus']} {'cores' if n['cores'] else 'CPUs'}"]
    if n.get("sockets", 0) > 1 or n.get("numa", 0) > 1:
        parts.append(f"{n['sockets']} sockets, {n['numa']} NUMA domains")
    return ", ".join(parts)

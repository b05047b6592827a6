"""A node's CPUs as its kernel describes them in sysfs: the core, the socket (package) and the
NUMA domain of each CPU. The CPU binding (services/tuning.py) cuts a node along these lines, so
that a rank's slice never spans two sockets or two NUMA domains where the counts allow it, and
the layout report (services/layout.py) names them. A test describes another machine with a
folder laid out as /sys is (Topology.read(root)), or with described()."""
import dataclasses
import glob
import os
import re

UNKNOWN = -1


def parse_cpulist(text: str) -> list:
    """The kernel's CPU list format ("0-3,8,10-11") as numbers; [] for an empty or bad one."""
    out = []
    for part in text.strip().split(","):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if not m:
            return []
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        out.extend(range(lo, hi + 1))
    return out


@dataclasses.dataclass(frozen=True)
class Place:
    """Where one CPU is: its socket, its core (numbered within the socket, as the kernel does)
    and its NUMA domain; UNKNOWN where the kernel does not say."""
    package: int = UNKNOWN
    core: int = UNKNOWN
    node: int = UNKNOWN


class Topology:
    """Every CPU the kernel knows on this node, with its place."""

    def __init__(self, places: dict):
        self.places = dict(places)

    @classmethod
    def read(cls, root: str = "/sys") -> "Topology":
        cpu_dir = os.path.join(root, "devices", "system", "cpu")
        numbers = sorted(int(m.group(1)) for path in glob.glob(os.path.join(cpu_dir, "cpu[0-9]*"))
                         if (m := re.fullmatch(r"cpu(\d+)", os.path.basename(path))))
        node_of = {}
        for path in glob.glob(os.path.join(root, "devices", "system", "node", "node[0-9]*")):
            m = re.fullmatch(r"node(\d+)", os.path.basename(path))
            if m:
                for cpu in parse_cpulist(_read(os.path.join(path, "cpulist"))):
                    node_of[cpu] = int(m.group(1))

        def number(cpu, name):
            text = _read(os.path.join(cpu_dir, f"cpu{cpu}", "topology", name))
            return int(text) if text.strip().lstrip("-").isdigit() else UNKNOWN
        return cls({cpu: Place(number(cpu, "physical_package_id"), number(cpu, "core_id"),
                               node_of.get(cpu, UNKNOWN)) for cpu in numbers})

    @classmethod
    def described(cls, places: dict) -> "Topology":
        """{cpu: (package, core, node)}: a machine given outright (tests)."""
        return cls({cpu: Place(*place) for cpu, place in places.items()})

    def place(self, cpu: int) -> Place:
        return self.places.get(cpu, Place())

    def _core(self, cpu: int):
        """What identifies cpu's core on the node (its socket and its core there), None if unknown."""
        p = self.place(cpu)
        return None if UNKNOWN in (p.package, p.core) else (p.package, p.core)

    def cores(self, cpus) -> list:
        """`cpus` grouped into their cores (hardware threads of one core together), ordered so that
        the cores of one socket, and of one NUMA domain in it, are adjacent; a CPU whose core is
        unknown is a core of its own."""
        def key(cpu):
            p = self.place(cpu)
            return (p.package, p.node, p.core, cpu)
        out, index = [], {}
        for cpu in sorted(cpus, key=key):
            core = self._core(cpu)
            if core is not None and core in index:
                out[index[core]].append(cpu)
            else:
                if core is not None:
                    index[core] = len(out)
                out.append([cpu])
        return out

    def domains(self, cpus) -> list:
        """`cpus` cut into the largest units a rank should not straddle, in order: their NUMA
        domains where they span several, else their sockets where they span several, else one
        unit. Each domain is a list of cores (cores())."""
        cores = self.cores(cpus)
        for field in ("node", "package"):
            values = [getattr(self.place(core[0]), field) for core in cores]
            if UNKNOWN not in values and len(set(values)) > 1:
                groups = []
                for core, value in zip(cores, values):
                    if groups and groups[-1][0] == value:
                        groups[-1][1].append(core)
                    else:
                        groups.append((value, [core]))
                return [g for _, g in groups]
        return [cores]

    def summary(self) -> dict:
        """The whole node: {"cpus", "cores", "sockets", "numa"} (0 where the kernel does not say)."""
        places = list(self.places.values())
        known = lambda field: {getattr(p, field) for p in places} - {UNKNOWN}  # noqa: E731
        cores = {(p.package, p.core) for p in places if UNKNOWN not in (p.package, p.core)}
        return {"cpus": len(places), "cores": len(cores), "sockets": len(known("package")), "numa": len(known("node"))}


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""

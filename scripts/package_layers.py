"""The Python package's layers, drawn from its imports (every `import` and
`from ... import`, at module level or inside functions), and checked: no
import runs back up a layer, and none forms a circle.

    python scripts/package_layers.py          # the floors, each module's imports; exit 1 on a violation

From the top: the command line (__main__), the tools (tools/: only the
command line, the bench, the scripts and the tests use them; they call the
package's public API as a user's program does), the public API
(__init__.py), JAX's integration (integration/), the job's runtime services
(services/), the floor (base/), and the native layer (_mpiabi, a C module
at the top level only because cffi and MPITRAMPOLINE_LIB name it so).
tests/package/test_layers.py runs the check.
"""
import ast
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mpi_collectives")
PACKAGE = "mpi_collectives"
# (floor, its modules' dotted-name prefix), lowest first
FLOORS = [("native layer", "mpi_collectives._mpiabi"), ("base", "mpi_collectives.base"),
          ("services", "mpi_collectives.services"), ("integration", "mpi_collectives.integration"),
          ("public API", "mpi_collectives"), ("testing", "mpi_collectives.testing"),
          ("tools", "mpi_collectives.tools"),
          ("command line", "mpi_collectives.__main__")]


def floor(module: str) -> int:
    """The floor of a dotted module name: its longest matching prefix."""
    best, length = None, -1
    for i, (_, prefix) in enumerate(FLOORS):
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
            best, length = i, len(prefix)
    return best


def modules(root: str = ROOT) -> dict:
    """{dotted name: path} of every .py file of the package."""
    found = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, os.path.dirname(root))[:-3].replace(os.sep, ".")
                found[dotted.removesuffix(".__init__")] = path
    found[f"{PACKAGE}._mpiabi"] = None  # the C module
    return found


def imports(name: str, path: str, known: dict) -> set:
    """The package's modules that `name` imports (a name imported from a package is its submodule
    when there is one)."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
                target = node.module
            else:
                continue
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name == PACKAGE or a.name.startswith(PACKAGE + ".")}
    found.discard(name)
    return found


def graph() -> dict:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items() if path}


def violations(edges: dict) -> list:
    """Imports that run up a floor, and circles, as sentences."""
    found = [f"{a} ({FLOORS[floor(a)][0]}) imports {b} ({FLOORS[floor(b)][0]}), a floor above it"
             for a, targets in sorted(edges.items()) for b in sorted(targets) if floor(b) > floor(a)]
    state = {}

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                found.append("a circle: " + " -> ".join(trail[trail.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return found


def main() -> int:
    edges = graph()
    for i in reversed(range(len(FLOORS))):
        members = sorted(m for m in edges if floor(m) == i)
        if members:
            print(f"{FLOORS[i][0]}:")
            for m in members:
                short = sorted(t.removeprefix(PACKAGE + ".") for t in edges[m])
                print(f"  {m.removeprefix(PACKAGE + '.') or PACKAGE} -> {', '.join(short) or '(nothing)'}")
    bad = violations(edges)
    for line in bad:
        print("VIOLATION:", line)
    print(f"{len(edges)} modules, {sum(len(t) for t in edges.values())} imports, {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

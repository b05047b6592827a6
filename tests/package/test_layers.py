"""The Python package's layers (scripts/package_layers.py): drawn from the code's imports, no import
runs back up a floor and none forms a circle; the checker itself catches both; docs/design.md's map
lists exactly the package's modules, each under its folder."""
import importlib.util
import os
import re

from helpers import ROOT

_spec = importlib.util.spec_from_file_location("package_layers", os.path.join(ROOT, "scripts", "package_layers.py"))
layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layers)


def test_no_import_runs_up_a_floor_or_forms_a_circle():
    assert layers.violations(layers.graph()) == []


def test_every_module_has_a_floor_and_user_programs_never_load_the_tools():
    edges = layers.graph()
    assert all(layers.floor(m) is not None for m in edges)
    seen, pending = set(), ["mpi_collectives", "mpi_collectives.integration.plain_programs"]  # what a program loads
    while pending:
        m = pending.pop()
        if m not in seen:
            seen.add(m)
            pending += edges.get(m, ())
    assert not [m for m in seen if m.startswith("mpi_collectives.tools")], sorted(seen)


def test_the_checker_finds_an_import_up_a_floor_and_a_circle(tmp_path):
    pkg = tmp_path / "mpi_collectives"
    for folder in ("base", "services"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "base" / "mpi.py").write_text("def f():\n    from ..services import stall\n")
    (pkg / "services" / "stall.py").write_text("from . import peers\n")
    (pkg / "services" / "peers.py").write_text("from .stall import x\n")
    known = layers.modules(str(pkg))
    edges = {n: layers.imports(n, p, known) for n, p in known.items() if p}
    found = layers.violations(edges)
    assert any("mpi_collectives.base.mpi (base) imports mpi_collectives.services.stall (services)" in line
               for line in found), found
    assert any(line.startswith("a circle: ") and "services.peers" in line and "services.stall" in line
               for line in found), found


def test_design_md_maps_the_tree():
    """Each module named in design.md's map table (`folder/module.py`) exists, and every module of the
    package is named there."""
    with open(os.path.join(ROOT, "docs", "design.md")) as f:
        text = f.read()
    named = set(re.findall(r"`((?:base|services|integration|testing|tools(?:/bench)?)/\w+\.py)`", text))
    on_disk = set()
    for folder in ("base", "services", "integration", "testing", "tools", "tools/bench"):
        for name in os.listdir(os.path.join(ROOT, "mpi_collectives", folder)):
            if name.endswith(".py") and name != "__init__.py":
                on_disk.add(f"{folder}/{name}")
    assert named == on_disk, f"in design.md, not on disk: {sorted(named - on_disk)}; " \
                             f"on disk, not in design.md: {sorted(on_disk - named)}"

"""Every cross-reference a reader follows by hand points at something that exists: the paths the
examples, the docs and the README name (docs/x.md, examples/y.py, scripts/z.sh, tests/...), and the
sections they name in quotes (`docs/installation.md, "Import order"`, `README: "Use"`). mkdocs
--strict checks the docs' links; these are the references it cannot see (issue 53: an example
cited a README section that did not exist)."""
import glob
import os
import re

import pytest

from helpers import ROOT

SOURCES = sorted(glob.glob(os.path.join(ROOT, "examples", "*")) + glob.glob(os.path.join(ROOT, "docs", "*.md"))
                 + [os.path.join(ROOT, "README.md")])
PATH = re.compile(r"(?<![\w/.-])((?:docs|examples|scripts|tests)/[\w/.-]*\w)")
SECTION = re.compile(r"(docs/[\w/-]+\.md|README(?:\.md)?)(?:'s)?[,:]? \"([^\"]+)\"")


def headings(path: str) -> set:
    with open(path) as f:
        return {m.group(1).strip().strip("`") for m in re.finditer(r"^#+ (.+)$", f.read(), re.M)}


@pytest.mark.parametrize("source", SOURCES, ids=[os.path.relpath(s, ROOT) for s in SOURCES])
def test_every_path_and_section_named_exists(source):
    with open(source) as f:
        text = f.read()
    missing = []
    for m in PATH.finditer(text):
        name = m.group(1).rstrip(".")
        if re.search(r"JAX's `?$", text[max(0, m.start() - 8):m.start()]):
            continue  # a path in JAX's source tree (JAX's `tests/multiprocess`), not ours
        if not os.path.exists(os.path.join(ROOT, name)) and not glob.glob(os.path.join(ROOT, name + "*")):
            missing.append(f"{name}: no such file")
    for m in SECTION.finditer(text):
        target = "README.md" if m.group(1).startswith("README") else m.group(1)
        if m.group(2) not in headings(os.path.join(ROOT, target)):
            missing.append(f'{target}, "{m.group(2)}": no such section')
    assert not missing, f"{os.path.relpath(source, ROOT)} names what does not exist:\n" + "\n".join(missing)


def test_the_examples_use_only_the_public_api():
    """What users copy: mpi_collectives' own names (`mpi_collectives.assert_equal`), never its
    inner modules, whose names may change (issue 53: an example called services.host.assert_equal)."""
    inner = re.compile(r"\bmpi_collectives\.(?:base|services|integration|tools)\b")
    found = [f"{os.path.relpath(path, ROOT)}:{n}: {line.strip()}"
             for path in glob.glob(os.path.join(ROOT, "examples", "*.py"))
             for n, line in enumerate(open(path), 1) if inner.search(line.split("#")[0])]
    assert not found, "examples reach into the package's inner modules:\n" + "\n".join(found)

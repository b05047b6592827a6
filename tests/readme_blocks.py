"""The code blocks of README.md and of the documentation pages (docs/*.md),
and the marker line before each, which says how the block is tested
(docs/test_readme.py; cluster/test_cluster.py runs the Slurm ones):

    <!-- readme: fresh-machine (...) -->   README's first block: exactly the two commands CI runs
    <!-- readme: run -->                   run with bash from the checkout, in the mpich venv
    <!-- readme: python (...) -->          Python: compiled (a fragment, not a program)
    <!-- readme: cluster (...) -->         run on node1 of the simulated cluster (Slurm commands)
    <!-- readme: not here (reason) -->     cannot run in the test suite, and why

A block keeps its test when it moves from the README to a page of docs/.
Generated pages in docs/'s subfolders (docs/benchmarks/README.md, written by
scripts/bench.py) are not scanned: their blocks are data, checked by the test
of their generator."""
import glob
import os
import re
from typing import NamedTuple

from helpers import ROOT

README = os.path.join(ROOT, "README.md")
DOCS = os.path.join(ROOT, "docs")
MARKER = re.compile(r"<!-- readme: (fresh-machine|run|python|cluster|not here)\b(.*?)-->")


class Block(NamedTuple):
    file: str   # relative to the checkout: README.md, docs/launchers.md, ...
    line: int   # of the opening fence, from 1
    kind: str   # the marker's kind, None when the block has no marker
    rest: str   # what follows the kind in the marker: "(how, or why not)"
    code: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def files():
    """README.md, then the pages of docs/ in name order."""
    return [README] + sorted(glob.glob(os.path.join(DOCS, "*.md")))


def blocks_of(path):
    """Every fenced block of one Markdown file."""
    name = os.path.relpath(path, ROOT)
    lines = open(path).read().splitlines()
    found, i = [], 0
    while i < len(lines):
        if lines[i].lstrip().startswith("```"):
            start = i
            fence = lines[i].lstrip()[:3]
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(fence):
                i += 1
            before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
            m = MARKER.search(before)
            found.append(Block(name, start + 1, m.group(1) if m else None, m.group(2).strip() if m else "",
                               "\n".join(lines[start + 1:i])))
        i += 1
    return found


def blocks():
    """Every fenced block of README.md and docs/*.md, README's first."""
    return [b for path in files() for b in blocks_of(path)]

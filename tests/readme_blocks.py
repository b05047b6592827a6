"""The README's code blocks and the marker line before each, which says how
the block is tested (docs/test_readme.py; cluster/test_cluster.py runs the
Slurm ones)."""
import os
import re

from helpers import ROOT

README = os.path.join(ROOT, "README.md")
MARKER = re.compile(r"<!-- readme: (fresh-machine|run|python|cluster|not here)\b(.*?)-->")


def blocks():
    """(line number, marker kind, marker rest, code) of every fenced block."""
    lines = open(README).read().splitlines()
    found, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            start = i
            i += 1
            while not lines[i].startswith("```"):
                i += 1
            before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
            m = MARKER.search(before)
            found.append((start + 1, m.group(1) if m else None, m.group(2).strip() if m else "",
                          "\n".join(lines[start + 1:i])))
        i += 1
    return found

"""The documentation site builds with no warning, and its pages speak to any
reader, not from the machine they were written on.

scripts/build_docs.sh makes .venv-docs from PyPI on a first run (the `docs`
extra of pyproject.toml) and runs `mkdocs build --strict` into site/: a broken
link or anchor, a page missing from mkdocs.yml's nav, or an API name that
mkdocstrings cannot find in the docstrings fails the build. It cannot depend
on the MPI family, so it runs once, in the mpich configuration."""
import glob
import os
import re

import pytest

from helpers import ROOT, TEST_CONFIG, explain, run

PAGES = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))

# Phrases that speak from the development machine: a measurement says where
# and how it was taken (cores, MPI, ranks, date) instead.
MACHINE_RELATIVE = re.compile(
    r"this (?:\d+-core )?(?:machine|vm|host|computer|box|laptop|workstation)"
    r"|\b(?:measured|verified|tested|seen|found|run|ran) here\b"
    r"|\bhere:"
    r"|\bour machines?\b",
    re.IGNORECASE)


@pytest.mark.skipif(TEST_CONFIG != "mpich", reason="the site does not depend on the MPI family: built once, "
                                                     "in the mpich configuration")
def test_the_site_builds_with_no_warning():
    proc = run(["bash", os.path.join(ROOT, "scripts", "build_docs.sh")], cwd=ROOT, timeout=900)
    assert proc.returncode == 0, "scripts/build_docs.sh (mkdocs build --strict) failed:\n" + explain(proc)
    for page in ("index.html", "api/index.html", "configuration/index.html", "troubleshooting/index.html"):
        assert os.path.exists(os.path.join(ROOT, "site", page)), page
    api = open(os.path.join(ROOT, "site", "api", "index.html")).read()
    for name in ("initialize", "Info", "InitializeError", "prepare", "broadcast_one_to_all", "process_allgather"):
        assert f"mpi_collectives.{name}" in api, f"the API page lacks mpi_collectives.{name}"
    assert "stall_timeout" in api, "initialize()'s keyword signature is missing from the API page"


def test_every_page_is_in_the_nav():
    nav = open(os.path.join(ROOT, "mkdocs.yml")).read()
    missing = [os.path.basename(p) for p in PAGES if f" {os.path.basename(p)}" not in nav]
    assert not missing, f"docs pages missing from mkdocs.yml's nav: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=[os.path.basename(p) for p in PAGES])
def test_no_page_speaks_of_this_machine(page):
    found = [f"{os.path.relpath(page, ROOT)}:{n}: {m.group(0)!r}"
             for n, line in enumerate(open(page), 1) for m in MACHINE_RELATIVE.finditer(line)]
    assert not found, ("say where and how it was taken (cores, MPI, ranks, date) instead of:\n"
                       + "\n".join(found))

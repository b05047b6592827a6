#!/usr/bin/env bash
# Build the documentation site (docs/*.md, mkdocs.yml) into site/, with every
# warning an error (a broken link or anchor, a page missing from the nav, an
# API name mkdocstrings cannot find).
#   bash scripts/build_docs.sh            -> site/index.html
# The tools live in a venv of their own, .venv-docs in the checkout
# (MPI_COLLECTIVES_VENV_DIR moves it, as for scripts/setup_env.sh), made on
# the first run, and again whenever the list changes, from PyPI: the `docs`
# extra of pyproject.toml (mkdocs, mkdocs-material, mkdocstrings[python],
# ruff). The API reference reads the docstrings of mpi_collectives/ from the
# source (griffe's static analysis): nothing is imported, so no MPI, jax or
# built native layer is needed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
venv=${MPI_COLLECTIVES_VENV_DIR:-$root}/.venv-docs
# The docs extra's requirements, read from pyproject.toml (one list to keep).
requirements=$("$python" - "$root/pyproject.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
block = re.search(r'^docs = \[(.*)\]', text, re.M).group(1)  # one line; greedy: [python] inside
print("\n".join(re.findall(r'"([^"]+)"', block)))
PY
)
if [ ! -x "$venv/bin/mkdocs" ] || [ "$(cat "$venv/docs-requirements.txt" 2>/dev/null)" != "$requirements" ]; then
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv" >&2
  mapfile -t wanted <<< "$requirements"
  log=$(mktemp)
  if ! "$venv/bin/python" -m pip --disable-pip-version-check -q install "${wanted[@]}" > "$log" 2>&1; then
    grep -v '^WARNING: Location' "$log" >&2; rm -f "$log"
    echo "build_docs.sh: pip install ${wanted[*]} failed" >&2; exit 1
  fi
  rm -f "$log"
  printf '%s\n' "$requirements" > "$venv/docs-requirements.txt"
fi
cd "$root"
export NO_MKDOCS_2_WARNING=1  # Material's banner about its successor, printed on every build
"$venv/bin/mkdocs" build --strict --clean --site-dir "$root/site" "$@"
echo "build_docs.sh: site built: $root/site/index.html"

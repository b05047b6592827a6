#!/usr/bin/env bash
# The whole test suite, from nothing: builds a venv per MPI family (MPICH 5
# and Intel MPI 2021 wheels), installs the package into each, and runs the
# same tests against each. Extra arguments go to pytest.
#   bash scripts/test.sh [pytest args]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
families=${MPI_COLLECTIVES_TEST_FAMILIES:-mpich impi}
status=0
for family in $families; do
  start=$(date +%s)
  venv=$(bash "$root/scripts/setup_env.sh" "$family")
  echo "== $family: $("$venv/bin/python" -m mpi_collectives info | grep -E '^library' | tr -s ' ')"
  # Run from the tests folder so that the installed package, not the source tree, is imported.
  (cd "$root/tests" && "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs "$@" .) || status=1
  echo "== $family: $(( $(date +%s) - start )) s"
done
exit $status

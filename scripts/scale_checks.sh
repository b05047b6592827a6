#!/bin/bash
# The promises at many ranks, by hand (issue 82; CI runs test_at_scale's first case at 16 ranks):
# tests/jax_over_mpi/test_at_scale.py whole (every collective exact over 1-D and 2-D meshes, the
# round's P - 1 slots, the stall report's one line, a killed rank named, SIGTERM) and the node path's
# differential fuzzer (every collective through the path's three ways against the library, every step
# checked on every rank) at each rank count, oversubscribed on a small machine.
#
#   bash scripts/scale_checks.sh [VENV] [RANKS...]     (default: .venv-mpich, 32 64)
#
# The venv is scripts/setup_env.sh's (its mpiexec, its installed package). Prints one line a check
# and a summary; exits non-zero if any failed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$root/.venv-mpich}
shift || true
counts=${*:-32 64}
status=0
summary=""
for n in $counts; do
  start=$(date +%s)
  if (cd "$root/tests" && MPI_COLLECTIVES_TEST_FAMILY=mpich MPI_COLLECTIVES_TEST_CONFIG=mpich \
        MPI_COLLECTIVES_TEST_EXTENDED=1 MPI_COLLECTIVES_TEST_SCALE_RANKS=$n \
        "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs jax_over_mpi/test_at_scale.py); then
    result=passed
  else
    result=FAILED; status=1
  fi
  summary="$summary\n  test_at_scale at $n ranks: $result in $(( $(date +%s) - start )) s"
  start=$(date +%s)
  out=$(mktemp --suffix=.json)
  if (cd /tmp && "$venv/bin/python" "$root/scripts/fuzz_node_path.py" --seeds 1 --ranks "$n" --steps 40 \
        --timeout 900 --json "$out"); then
    result=passed
  else
    result=FAILED; status=1
  fi
  summary="$summary\n  the node path's fuzzer, seed 1, 40 steps at $n ranks: $result in $(( $(date +%s) - start )) s"
done
echo -e "== scale checks:$summary"
exit $status

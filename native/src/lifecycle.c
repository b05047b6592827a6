/* MPI_Init, MPI_Init_thread and MPI_Finalize (treatment.txt: own lifecycle.c).
 *
 * Never initialize twice: mpi4py, or the user, may have done it already
 * (reported to hang with Intel MPI). Finalize only what the wrapper
 * initialized, and only once: JAX's atexit MPI_Finalize and ours may both
 * come, and mpi4py must keep working after JAX is done. Calls that free
 * handles after MPI_Finalize succeed silently (treatment.txt:
 * frees-after-finalize), so that XLA's teardown does not fail the run. */
#include "common.h"
#include "end_job.h"
#include "family.h"
#include "launchers.h"
#include "lifecycle.h"
#include "log.h"
#include "xla_policy.h"

int mpic_initialized_by_us = 0;
static int finalized_by_us = 0;

int mpic_mpi_is_finalized(void) {
  int flag = 0;
  if (__atomic_load_n(&finalized_by_us, __ATOMIC_ACQUIRE)) return 1;
  return mpic_family && MPIABI_Finalized(&flag) == 0 && flag;
}

int mpic_mpi_is_up(void) {
  int flag = 0;
  return mpic_family && !mpic_mpi_is_finalized() && MPIABI_Initialized(&flag) == 0 && flag;
}

static void check_launcher(void) {
  int size = 0, rank = 0;
  MPIABI_Comm_size(MPIABI_COMM_WORLD, &size);
  MPIABI_Comm_rank(MPIABI_COMM_WORLD, &rank);
  mpic_check_launcher(size, rank);
}

MPIABI_EXPORT int MPIABI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  int flag = 0, level = 0, ret;
  if (!mpic_family) mpic_not_loaded("MPI_Init_thread");
  if ((ret = MPIABI_Initialized(&flag)) != 0) return ret;
  if (flag) {
    if ((ret = MPIABI_Query_thread(&level)) != 0) return ret;
    if (provided) *provided = level;
    mpic_log(1, "MPI already initialized by someone else; not initializing again (thread level %d)", level);
    check_launcher();
    return 0;
  }
  int request = mpic_xla_thread_level(required);
  if (!provided) provided = &level;
  mpic_check_launcher_before_init();
  ret = mpic_next_Init_thread(argc, argv, request, provided);
  if (ret == 0) {
    mpic_initialized_by_us = 1;
    check_launcher();
  }
  mpic_log(1, "MPI_Init_thread(asked %d, requested %d) -> %d, provided %d", required, request, ret, *provided);
  return ret;
}

MPIABI_EXPORT int MPIABI_Init(int *argc, char ***argv) {
  int provided;
  return MPIABI_Init_thread(argc, argv, MPIABI_THREAD_SINGLE, &provided);
}

MPIABI_EXPORT int MPIABI_Finalize(void) {
  if (!mpic_initialized_by_us) return 0;
  int expected = 0;
  if (!__atomic_compare_exchange_n(&finalized_by_us, &expected, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
    return 0;
  mpic_log(1, "MPI_Finalize");
  return mpic_next_Finalize();
}

/* MPI_Init, MPI_Init_thread and MPI_Finalize (treatment.txt: own entry/lifecycle.c).
 *
 * Never initialize twice: mpi4py, or the user, may have done it already
 * (reported to hang with Intel MPI). Finalize only what the wrapper
 * initialized, and only once: JAX's atexit MPI_Finalize and ours may both
 * come, and mpi4py must keep working after JAX is done. Calls that free
 * handles after MPI_Finalize succeed silently (treatment.txt:
 * frees-after-finalize), so that XLA's teardown does not fail the run. */
#include <unistd.h>

#include "common.h"
#include "family.h"
#include "init_crash.h"
#include "init_memory.h"
#include "launcher_abort.h"
#include "launchers.h"
#include "library.h"
#include "loader.h"
#include "log.h"
#include "node.h"
#include "shm_names.h"
#include "xla_policy.h"

static void check_launcher(void) {
  int size = 0, rank = 0;
  mpic_next_Comm_size(MPIABI_COMM_WORLD, &size);
  mpic_next_Comm_rank(MPIABI_COMM_WORLD, &rank);
  mpic_check_launcher(size, rank);
}

/* The process that started MPI here, or found it started: a process forked from it (multiprocessing, a
 * test's fork) shares its windows' pages and its library's connections, and its exit may run the
 * parent's atexit handlers (JAX's MPI_Finalize among them). */
static pid_t mpi_process = 0;

MPIABI_EXPORT int MPIABI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  if (!mpi_process) mpi_process = getpid();
  int flag = 0, level = 0, ret;
  if (!mpic_family) mpic_not_loaded("MPI_Init_thread");
  if ((ret = mpic_next_Initialized(&flag)) != 0) return ret;
  if (flag) {
    if ((ret = mpic_next_Query_thread(&level)) != 0) return ret;
    if (provided) *provided = level;
    /* Started by this package (initialize(), the bench's helpers: this library's own call, earlier)
     * or by the program before (mpi4py, say): said in words, it is the first question of a log. */
    mpic_log(1, "MPI was started %s, at %s; this MPI_Init_thread (%s asked) does not start it again",
             mpic_initialized_by_us ? "by this package" : "before, by the program (mpi4py or its own MPI_Init)",
             mpic_thread_level_name(level), mpic_thread_level_name(required));
    check_launcher();
    return 0;
  }
  int request = mpic_xla_thread_level(required);
  if (!provided) provided = &level;
  mpic_check_launcher_before_init();
  mpic_launcher_init_begins();
  mpic_shm_names_before(); /* what is not the library's (end_job.c drops the library's at an abort) */
  int zeroed = mpic_init_memory_begin();
  mpic_init_crash_begin();
  ret = mpic_next_Init_thread(argc, argv, request, provided);
  mpic_init_crash_end();
  mpic_init_memory_end(zeroed);
  if (ret == 0) {
    mpic_initialized_by_us = 1;
    check_launcher();
  }
  mpic_log(1, "MPI started: %s asked by the caller, %s asked of the library, %s granted (MPI_Init_thread returned %d)",
           mpic_thread_level_name(required), mpic_thread_level_name(request),
           ret == 0 ? mpic_thread_level_name(*provided) : "none", ret);
  return ret;
}

MPIABI_EXPORT int MPIABI_Init(int *argc, char ***argv) {
  int provided;
  return MPIABI_Init_thread(argc, argv, MPIABI_THREAD_SINGLE, &provided);
}

MPIABI_EXPORT int MPIABI_Finalize(void) {
  if (mpi_process && getpid() != mpi_process) {
    /* A forked child's exit: finalizing would mark the parent's arrival at MPI_Finalize in every window (its
     * peers would end the job, "the ranks ran different numbers of collectives") and finalize the parent's
     * library state from another process (issue 81). MPI belongs to the parent: nothing is done. */
    mpic_log(1, "MPI_Finalize in process %d, forked from the rank's process %d: left to the rank", (int)getpid(),
             (int)mpi_process);
    return 0;
  }
  /* XLA is done with its communicators: the node path's windows go first, whoever finalizes
   * MPI (a window left to the library's finalize, or to mpi4py's later, is an error on some). */
  int finalized = 1;
  if (mpic_next_Finalized(&finalized) == 0 && !finalized) mpic_node_finalize();
  if (!mpic_initialized_by_us) return 0;
  if (!mpic_claim_finalize()) return 0;
  mpic_log(1, "MPI_Finalize");
  return mpic_next_Finalize();
}

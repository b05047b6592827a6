/* Ending the job (end_job.h): one line on stderr, then the whole job ends.
 *
 * MPI_Abort, so that the launcher ends the ranks on every node. But MPICH's
 * MPI_Abort then calls exit(), whose teardown of XLA once let a pending
 * collective hand the Python main thread a wrong result before the launcher
 * killed the process (seen once in CI): a handler registered at that moment
 * runs first in exit() (atexit runs in reverse order) and leaves with _exit
 * at once. A thread ends the process in any case if MPI_Abort has not done so
 * within a few seconds (a launcher that does not answer). Before MPI_Init,
 * the launcher's own abort (launcher_abort.c), where it has one; after
 * MPI_Finalize only this process can be ended: the launcher ends the others
 * when it sees it fail. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "terminal.h"
#include "end_job.h"
#include "family.h"
#include "launcher_abort.h"
#include "flight.h"
#include "library.h"
#include "self_watch.h"
#include "shm_names.h"

static int ending = 0;

static void exit_now(void) { _exit(1); }
static void *exit_later(void *unused) {
  (void)unused;
  sleep(5);
  _exit(1);
}

void mpic_hold_if_ending(void) {
  if (__atomic_load_n(&ending, __ATOMIC_ACQUIRE))
    for (;;) pause();
}

void mpic_end_job_line(const char *line) {
  if (__atomic_exchange_n(&ending, 1, __ATOMIC_SEQ_CST)) {
    for (;;) pause(); /* another thread is ending the job: its line is the one */
  }
  mpic_terminal_printf("%s\n", line);
  fflush(stderr); /* (the library's own lines first) */
  mpic_flight_report(); /* what this rank ran last, for the one who reads the line */
  mpic_watch_self_quiet(); /* this line says why; the rank's watcher process must not add another */
  /* Give the launcher a moment to forward the line first (Hydra loses it
   * otherwise, about one time in fifteen). */
  sleep(1);
  atexit(exit_now);
  pthread_t t;
  pthread_create(&t, NULL, exit_later, NULL);
  if (mpic_family && mpic_mpi_is_up()) {
    /* MPI_Abort skips the library's cleanup: the names of the files it made in /dev/shm (MPICH's 2 MiB
     * segment of the node, Open MPI's 16 MiB one a rank) would stay until a reboot (shm_names.h). The
     * job is ending: no rank opens them again. */
    mpic_shm_names_drop_new();
    mpic_next_Abort(MPIABI_COMM_WORLD, 1);
  }
  mpic_launcher_abort(1); /* before MPI_Init: the launcher's own abort, where it has one */
  _exit(1);
}

void mpic_fatal(const char *fmt, ...) {
  char line[2048] = "mpi-collectives: error: ";
  size_t len = strlen(line);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + len, sizeof line - len, fmt, ap);
  va_end(ap);
  mpic_end_job_line(line);
}

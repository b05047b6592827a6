/* SIGTERM is how launchers and schedulers stop a job (Hydra's mpiexec
 * forwards it to every rank, scancel sends it to every task, `timeout` to the
 * launcher). JAX's distributed runtime installs a SIGTERM handler of its own
 * that only notes the signal, so the ranks computed on until SIGKILL. After
 * initialize(), this handler takes its place: one line, this rank's watcher
 * process told to keep quiet, and the rank ends at once with 128 + the
 * signal's number, as a shell reports a death by signal. Everything it does
 * is async-signal-safe; the line is written in advance. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common.h"
#include "flight.h"
#include "self_watch.h"
#include "stop_signals.h"

int mpic_stopping = 0;
static char line[512], record_head[160];
static size_t line_len, record_head_len;

static void on_stop(int sig) {
  __atomic_store_n(&mpic_stopping, 1, __ATOMIC_SEQ_CST);
  ssize_t w = write(2, line, line_len);
  (void)w;
  mpic_watch_self_quiet();
  mpic_flight_report_from_signal(record_head, record_head_len);
  /* A moment for the launcher to forward the line before it sees the rank
   * end: Hydra's proxy, itself stopping, once dropped one rank's line of
   * three (CI, MPI-5 ABI configuration). */
  struct timespec pause = {0, 200 * 1000 * 1000};
  nanosleep(&pause, NULL);
  _exit(128 + sig);
}

/* For Python (mpi_collectives.mpi.stop_on_signals), once JAX has set up its own. */
MPIABI_EXPORT int mpic_stop_on_sigterm(int rank, int size) {
  int n = snprintf(line, sizeof line,
                   "mpi-collectives: rank %d/%d was asked to stop (SIGTERM: the launcher, scancel or a time "
                   "limit); ending it now.\n",
                   rank, size);
  line_len = n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
  n = snprintf(record_head, sizeof record_head,
               "mpi-collectives: rank %d/%d's last collectives (its flight record, oldest first):\n", rank, size);
  record_head_len = n < 0 ? 0 : (size_t)n < sizeof record_head ? (size_t)n : sizeof record_head - 1;
  mpic_flight_prepare();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGTERM, &sa, NULL);
}

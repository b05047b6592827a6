/* SIGTERM is how launchers and schedulers stop a job (Hydra's mpiexec
 * forwards it to every rank, scancel sends it to every task, `timeout` to the
 * launcher). JAX's distributed runtime installs a SIGTERM handler of its own
 * that only notes the signal, so the ranks computed on until SIGKILL. After
 * initialize(), this handler takes its place: one line, this rank's watcher
 * process told to keep quiet, and the rank ends at once with 128 + the
 * signal's number, as a shell reports a death by signal. Everything it does
 * is async-signal-safe; the line is written in advance.
 *
 * Except for a program that asks JAX's preemption sync point
 * (multihost_utils.reached_preemption_sync_point, as Orbax's CheckpointManager
 * does at every step): it is told of the signal, as JAX's own handler would
 * have told it, so that every rank reaches the same step, saves and ends.
 * A rank that has not ended `grace` seconds later (stuck in a collective,
 * away from its loop) is ended then, with a line: a thread of ours waits
 * for that, woken by the handler through a semaphore (sem_post is
 * async-signal-safe; a timer or SIGALRM would take a signal from the program).
 * A second SIGTERM ends the rank at once. */
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "terminal.h"
#include "common.h"
#include "flight.h"
#include "self_watch.h"
#include "stop_signals.h"
#include "threads.h"

int mpic_stopping = 0;
static char line[512], record_head[160], grace_line[640], too_late_line[640];
static size_t line_len, record_head_len, grace_line_len, too_late_line_len;
static struct sigaction previous;      /* JAX's handler, which only notes the signal */
static int grace_seconds;              /* > 0 once the program asks the preemption sync point */
static int in_grace;
static sem_t grace_started;

/* The line, and the flight record where the line points to it (the grace ran out: where was the
 * rank?); a plain SIGTERM (scancel, a time limit) is the one line the docs promise. */
static void end_now(const char *text, size_t len, int sig, int with_record) {
  ssize_t w = write(mpic_terminal(), text, len);
  (void)w;
  mpic_watch_self_quiet();
  if (with_record) mpic_flight_report_from_signal(record_head, record_head_len);
  /* A moment for the launcher to forward the line before it sees the rank
   * end: Hydra's proxy, itself stopping, once dropped one rank's line of
   * three (CI, MPI-5 ABI configuration). */
  struct timespec pause = {0, 200 * 1000 * 1000};
  nanosleep(&pause, NULL);
  _exit(128 + sig);
}

static void tell_jax(int sig) {
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction) previous.sa_sigaction(sig, NULL, NULL);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler) {
    previous.sa_handler(sig);
  }
}

static void on_stop(int sig) {
  __atomic_store_n(&mpic_stopping, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&grace_seconds, __ATOMIC_SEQ_CST) > 0 && !__atomic_exchange_n(&in_grace, 1, __ATOMIC_SEQ_CST)) {
    ssize_t w = write(mpic_terminal(), grace_line, grace_line_len);
    (void)w;
    tell_jax(sig);
    sem_post(&grace_started);
    return;
  }
  end_now(line, line_len, sig, 0);
}

static void *end_after_grace(void *unused) {
  (void)unused;
  while (sem_wait(&grace_started) != 0) {
  }
  struct timespec grace = {__atomic_load_n(&grace_seconds, __ATOMIC_SEQ_CST), 0};
  while (nanosleep(&grace, &grace) != 0) {
  }
  end_now(too_late_line, too_late_line_len, SIGTERM, 1);
  return NULL;
}

/* For Python (mpi_collectives.integration.preemption), the first time the program asks JAX's preemption sync
 * point: from now on SIGTERM gives this rank `grace` seconds to reach it (0: none). Once only. */
MPIABI_EXPORT int mpic_preemption_grace(int rank, int size, int grace) {
  if (grace <= 0 || __atomic_load_n(&grace_seconds, __ATOMIC_SEQ_CST) > 0) return 0;
  int n = snprintf(grace_line, sizeof grace_line,
                   "mpi-collectives: rank %d/%d was asked to stop (SIGTERM); its program asks JAX's preemption "
                   "sync point, so it has %d s to reach it, save and end (MPI_COLLECTIVES_PREEMPTION_GRACE).\n",
                   rank, size, grace);
  grace_line_len = n < 0 ? 0 : (size_t)n < sizeof grace_line ? (size_t)n : sizeof grace_line - 1;
  n = snprintf(too_late_line, sizeof too_late_line,
               "mpi-collectives: rank %d/%d was asked to stop (SIGTERM) %d s ago and has not ended: it did not "
               "reach JAX's preemption sync point, or did not finish saving (stuck in a collective, or away from "
               "its training loop); ending it now. Fix: see where it was in its flight record below; raise "
               "MPI_COLLECTIVES_PREEMPTION_GRACE if saving takes longer.\n",
               rank, size, grace);
  too_late_line_len = n < 0 ? 0 : (size_t)n < sizeof too_late_line ? (size_t)n : sizeof too_late_line - 1;
  if (sem_init(&grace_started, 0, 0) != 0) return -1;
  if (mpic_start_detached(end_after_grace, NULL) != 0) return -1;
  __atomic_store_n(&grace_seconds, grace, __ATOMIC_SEQ_CST);
  return 0;
}

/* For the pytest plugin (mpi_collectives/testing/pytest_plugin.py), after mpic_preemption_grace: the
 * grace's two lines in its words (its Python handler writes the report of the tests run so far). */
MPIABI_EXPORT int mpic_stop_grace_words(const char *grace, const char *too_late) {
  if (__atomic_load_n(&grace_seconds, __ATOMIC_SEQ_CST) <= 0) return -1;
  int n = snprintf(grace_line, sizeof grace_line, "%s\n", grace);
  grace_line_len = n < 0 ? 0 : (size_t)n < sizeof grace_line ? (size_t)n : sizeof grace_line - 1;
  n = snprintf(too_late_line, sizeof too_late_line, "%s\n", too_late);
  too_late_line_len = n < 0 ? 0 : (size_t)n < sizeof too_late_line ? (size_t)n : sizeof too_late_line - 1;
  return 0;
}

/* For Python (mpi_collectives.base.mpi.stop_on_sigterm), once JAX has set up its own. */
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
  struct sigaction before;
  if (sigaction(SIGTERM, &sa, &before) != 0) return -1;
  if (before.sa_handler != on_stop) previous = before; /* (a second call must not make us JAX's) */
  return 0;
}

/* The phases' watchdog (phases_watchdog.h).
 *
 * While the Python watcher beats (every 0.5 s), it decides and this thread
 * only looks at the clock: a program whose main thread returns to Python
 * pays nothing. Once the beat is 3 s old, the main thread holds Python's
 * lock in C, and this thread applies phases.py's rules itself, reading only
 * what MPI shows on the phases' communicator (it probes; it receives only a
 * message that ends the job):
 * - a rank said it left (a LEFT line): stuck at once, with that rank's line;
 * - rank 0: a stuck rank's line arrived: stuck, with that line;
 * - every other rank's vote on the phase has arrived (nobody can still send
 *   to this rank) and stayed so for the hold: stuck;
 * - the phase's time (--mpi-timeout) is 2 s past: stuck.
 * Stuck, rank 0 ends the job with the line (its report cannot be written: the
 * words of the tests so far stand for it); another rank sends the line to
 * rank 0, whose main thread writes the report and ends the job, and ends it
 * itself 10 s later if rank 0 has not. Needs MPI_THREAD_MULTIPLE, which the
 * package asks for; it runs on the phases' own communicator, never XLA's. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "common.h"
#include "end_job.h"
#include "flight.h"
#include "library.h"
#include "phases.h"
#include "phases_watchdog.h"
#include "threads.h"

static int64_t beat_ns = 0;
static int voting = 0, me = 0, size = 1, started = 0;
static int64_t hold_ns = 10000000000LL; /* --mpi-hold: set again where the caller learns it later */
static char progress[1024] = "";
static pthread_mutex_t words = PTHREAD_MUTEX_INITIALIZER;

void mpic_phases_watchdog_beat(int now_voting) {
  __atomic_store_n(&voting, now_voting, __ATOMIC_RELEASE);
  __atomic_store_n(&beat_ns, mpic_monotonic_ns(), __ATOMIC_RELEASE);
}

void mpic_phases_watchdog_progress(const char *text) {
  pthread_mutex_lock(&words);
  snprintf(progress, sizeof progress, "%s", text ? text : "");
  pthread_mutex_unlock(&words);
}

static int arrived(int source, int tag, int *from) {
  int flag = 0;
  MPIABI_Status st;
  if (mpic_next_Iprobe(source, tag, mpic_phases_comm(), &flag, &st) != 0 || !flag) return 0;
  if (from) *from = st.MPI_SOURCE;
  return 1;
}

/* A line sent to this rank (LEFT or STUCK), received: the job ends after it. */
static void receive_line(int source, int tag, char *out, size_t len) {
  static char buffer[MPIC_PHASE_LINE_MAX];
  MPIABI_Request req;
  memset(buffer, 0, sizeof buffer);
  out[0] = 0;
  if (mpic_next_Irecv(buffer, MPIC_PHASE_LINE_MAX, MPIABI_BYTE, source, tag, mpic_phases_comm(), &req) != 0) return;
  if (mpic_phase_poll(&req, 2.0) == 0) snprintf(out, len, "%.*s", MPIC_PHASE_LINE_MAX - 1, buffer);
}

static void stuck(const char *line) {
  char name[200];
  mpic_phase_name(name, sizeof name);
  if (me == 0) {
    char so_far[sizeof progress];
    pthread_mutex_lock(&words);
    snprintf(so_far, sizeof so_far, "%s", progress);
    pthread_mutex_unlock(&words);
    mpic_fatal("%s cannot finish: %s. Rank 0's report could not be written: its main thread holds Python's lock "
               "in a call into C (mpi4py's first lowercase collective on a communicator holds it)%s%s. Fix: make "
               "every rank reach the same MPI calls in each test, or fail the test on every rank",
               name[0] ? name : "the phase", line, so_far[0] ? "; before this test: " : "", so_far);
  }
  static char sent[MPIC_PHASE_LINE_MAX];
  snprintf(sent, sizeof sent, "%s (%s)", line, name[0] ? name : "the phase");
  MPIABI_Request req;
  if (mpic_next_Isend(sent, (int)strlen(sent) + 1, MPIABI_BYTE, 0, MPIC_PHASE_STUCK_TAG, mpic_phases_comm(), &req) == 0)
    mpic_phase_poll(&req, 2.0);
  struct timespec wait = {10, 0};
  while (nanosleep(&wait, &wait) != 0) {
  }
  mpic_fatal("%s cannot finish: %s; rank 0 did not end the job within 10 s", name[0] ? name : "the phase", line);
}

static void *run(void *unused) {
  (void)unused;
  int64_t all_since = 0;
  char line[MPIC_PHASE_LINE_MAX + 200];
  for (;;) {
    struct timespec half = {0, 500 * 1000 * 1000};
    nanosleep(&half, NULL);
    if (!mpic_mpi_is_up()) return NULL; /* MPI finalized: nothing to watch */
    int64_t now = mpic_monotonic_ns(), beat = __atomic_load_n(&beat_ns, __ATOMIC_ACQUIRE);
    if (!mpic_phases_on() || now - beat < 3000000000LL || __atomic_load_n(&voting, __ATOMIC_ACQUIRE) ||
        mpic_phase_now() <= 0) {
      all_since = 0;
      continue; /* Python's watcher runs, or no phase: it decides */
    }
    int from = -1;
    if (arrived(MPIABI_ANY_SOURCE, MPIC_PHASE_LEFT_TAG, &from)) {
      receive_line(from, MPIC_PHASE_LEFT_TAG, line, sizeof line);
      if (!line[0]) snprintf(line, sizeof line, "rank %d left the job", from);
      stuck(line);
    }
    if (me == 0 && arrived(MPIABI_ANY_SOURCE, MPIC_PHASE_STUCK_TAG, &from)) {
      receive_line(from, MPIC_PHASE_STUCK_TAG, line, sizeof line);
      if (line[0]) stuck(line);
    }
    int all = size > 1, tag = mpic_phase_tag(mpic_phase_now());
    for (int r = 0; r < size && all; r++)
      if (r != me && !arrived(r, tag, NULL)) all = 0;
    if (!all) all_since = 0;
    else if (!all_since) all_since = now;
    if (all_since && now - all_since >= __atomic_load_n(&hold_ns, __ATOMIC_ACQUIRE)) {
      snprintf(line, sizeof line,
               "rank %d waits in a call that holds Python's lock, while every other rank ended the phase, for "
               "%.0f s",
               me, (double)(now - all_since) / 1e9);
      stuck(line);
    }
    int64_t deadline = mpic_phase_deadline_ns();
    if (deadline && now > deadline + 2000000000LL) {
      snprintf(line, sizeof line,
               "rank %d ran past --mpi-timeout in a call that holds Python's lock, where the stage's alarm cannot "
               "stop it",
               me);
      stuck(line);
    }
  }
}

int mpic_phases_watchdog_start(int rank, int job_size, double hold_s) {
  __atomic_store_n(&hold_ns, (int64_t)((hold_s > 0 ? hold_s : 10.0) * 1e9), __ATOMIC_RELEASE);
  if (__atomic_exchange_n(&started, 1, __ATOMIC_SEQ_CST)) return 0; /* (a later call sets the hold alone) */
  me = rank, size = job_size;
  /* As if the Python watcher had just beaten: a main thread that takes Python's lock before the
   * watcher's first look (a suite whose first test waits in mpi4py's first call) never lets it beat. */
  mpic_phases_watchdog_beat(0);
  return mpic_start_detached(run, NULL);
}

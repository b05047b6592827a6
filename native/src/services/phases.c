/* Phases of a program (phases.h): waits a rank can give up, and the settling
 * of what it gave up once the ranks have voted.
 *
 * Why a wait may be given up: in a pytest suite a rank that fails a test
 * before a collective goes on to the next test, and its peers wait in that
 * collective for a rank that will never come; XLA would then pair the peers'
 * call with the next test's (a wrong number, or a hang). Only a wait that no
 * data has passed can be given up without harm: the check's block (each of
 * XLA's collectives begins with one while the checks are on). It is a
 * nonblocking call here, polled, so that the wait can look for the vote of a member that has
 * already ended the phase. A call given up stays pending in `given[]`; once
 * every rank has voted, the members that never entered it join it with a
 * block that carries nothing, and the communicator is whole again.
 *
 * A split of the world cannot be given up: XLA (jaxlib 0.10.2) takes the
 * communicator MPI_Comm_split returns whatever its return code, and asks it
 * for its rank and size at once; a rank that left would have to bring its own
 * color and key, which only its program knows. So a rank waiting in one is
 * stuck (mpic_phase_stuck), and the pytest plugin makes the communicator of
 * every device up front (mpi_collectives.prepare) so that the usual first
 * collective of a test is not a split. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "flight.h"
#include "end_job.h"
#include "library.h"
#include "phases.h"
#include "signature.h"
#include "test_hooks.h"
#include "waits.h"

static MPIABI_Comm phase_comm; /* MPIABI_COMM_NULL until mpic_phases_start */
static int phases_on = 0;
static int error_code = 0;
static int64_t phase = 0, deadline_ns = 0;
static double phase_timeout = 0;
static char phase_name[160] = "";
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* given[] and the error string */

/* A call given up, or being waited for; its buffers live here, not on a
 * caller's stack, because the library writes them until the call completes.
 * A test gives up one call when a peer failed before it, unless it catches
 * the error and calls again: past this many in one phase the job ends with a
 * sentence (phases.h) rather than wait in a call the peers never join. The
 * pytest plugin's vote carries as many (mpi_collectives/services/phases.py). */
#define MPIC_GIVEN_MAX 64
struct given {
  int state; /* 0 free, 1 waiting, 2 given up */
  int kind, id;
  unsigned seq;
  MPIABI_Request req;
  struct mpic_block block;
};
static struct given given[MPIC_GIVEN_MAX];

int mpic_phases_start(void) {
  if (phases_on) return 0;
  int ret = mpic_next_Comm_dup(MPIABI_COMM_WORLD, &phase_comm);
  if (ret == 0) ret = mpic_next_Comm_set_errhandler(phase_comm, MPIABI_ERRORS_RETURN);
  int cls = 0;
  if (ret == 0) ret = mpic_next_Add_error_class(&cls);
  if (ret == 0) ret = mpic_next_Add_error_code(cls, &error_code);
  if (ret == 0) ret = mpic_next_Add_error_string(error_code, "mpi-collectives: a wait was given up");
  if (ret == 0) __atomic_store_n(&phases_on, 1, __ATOMIC_RELEASE);
  return ret;
}

int mpic_phase_error_code(void) { return error_code; }
int mpic_phases_on(void) { return __atomic_load_n(&phases_on, __ATOMIC_ACQUIRE); }
MPIABI_Comm mpic_phases_comm(void) { return phase_comm; }
/* One tag for every phase's votes (issue 80): a vote carries its phase's
 * number, and messages from one rank on one tag arrive in the order sent, so
 * the next vote received from a rank is its vote on this phase, or its word
 * that it left, or (a rank that ran other phases) a number that differs and is
 * named. With a tag per phase, a rank that left pytest's loop voted on the
 * next phase's tag while its peers waited on this one's: both for ever (the
 * fourth read's B2). So a vote that has arrived and not been received means
 * that rank ended the current phase, or left. */
int mpic_phase_tag(int64_t p) {
  (void)p;
  return 1;
}
int64_t mpic_phase_now(void) { return __atomic_load_n(&phase, __ATOMIC_ACQUIRE); }
int64_t mpic_phase_deadline_ns(void) { return __atomic_load_n(&deadline_ns, __ATOMIC_ACQUIRE); }
void mpic_phase_name(char *out, size_t len) {
  pthread_mutex_lock(&lock);
  snprintf(out, len, "%s", phase_name);
  pthread_mutex_unlock(&lock);
}

void mpic_phase_begin(int64_t p, const char *name, double timeout_s) {
  pthread_mutex_lock(&lock);
  snprintf(phase_name, sizeof phase_name, "%s", name ? name : "");
  phase_timeout = timeout_s;
  pthread_mutex_unlock(&lock);
  __atomic_store_n(&deadline_ns, timeout_s > 0 ? mpic_monotonic_ns() + (int64_t)(timeout_s * 1e9) : 0,
                   __ATOMIC_RELEASE);
  __atomic_store_n(&phase, p, __ATOMIC_RELEASE);
}

static struct given *take(int kind, int id, unsigned seq) {
  pthread_mutex_lock(&lock);
  struct given *g = NULL;
  for (int i = 0; i < MPIC_GIVEN_MAX && !g; i++)
    if (given[i].state == 0) g = &given[i];
  if (g) g->state = 1, g->kind = kind, g->id = id, g->seq = seq;
  pthread_mutex_unlock(&lock);
  return g;
}

static void release(struct given *g) {
  pthread_mutex_lock(&lock);
  g->state = 0;
  pthread_mutex_unlock(&lock);
}

/* The member of `members` (world ranks; NULL: every rank) whose vote on the
 * current phase has arrived, or -1. Votes are received only when the phase
 * ends, so the oldest queued one may be a non-member's (the other group of a
 * 2x2 mesh finished first) and stays first: each member is then probed by
 * its rank, else a member's vote behind it was never seen and the wait never
 * given up (issue 71: 4 ranks hung). */
static int member_done(const int *members, int n) {
  int flag = 0, tag = mpic_phase_tag(mpic_phase_now());
  MPIABI_Status st;
  if (mpic_next_Iprobe(MPIABI_ANY_SOURCE, tag, phase_comm, &flag, &st) != 0 || !flag) return -1;
  if (!members) return st.MPI_SOURCE;
  for (int i = 0; i < n; i++)
    if (members[i] == st.MPI_SOURCE) return st.MPI_SOURCE;
  for (int i = 0; i < n; i++) {
    flag = 0;
    if (mpic_next_Iprobe(members[i], tag, phase_comm, &flag, &st) == 0 && flag) return members[i];
  }
  return -1;
}

/* Sets the phase's error text for this wait and returns its code. */
/* Open MPI keeps at most 255 characters of an error string (MPI_MAX_ERROR_STRING, 256), and refuses a
 * longer one: the text is kept within it, the phase's name cut to its last 90 characters (a test's
 * name ends a pytest node id). */
#define MPIC_ERROR_TEXT 250
static int give_up(struct given *g, const char *what, int comm_id, int left, double waited) {
  char text[MPIC_ERROR_TEXT], name[100];
  pthread_mutex_lock(&lock);
  size_t full = strlen(phase_name);
  snprintf(name, sizeof name, "%s%s", full > 90 ? "..." : "", phase_name + (full > 90 ? full - 90 : 0));
  double limit = phase_timeout;
  g->state = 2;
  if (left >= 0)
    snprintf(text, sizeof text,
             "mpi-collectives: rank %d ended %s before this %s (communicator %d) and will not call it: "
             "no result. See that rank's own outcome",
             left, name[0] ? name : "this phase", what, comm_id);
  else
    snprintf(text, sizeof text,
             "mpi-collectives: %s waited %.0f s in this %s (communicator %d), past its limit of %.0f s "
             "(--mpi-timeout): no result. See where each rank was",
             name[0] ? name : "this phase", waited, what, comm_id, limit);
  mpic_next_Add_error_string(error_code, text);
  pthread_mutex_unlock(&lock);
  return error_code;
}

/* A member's vote says it ended the phase, not that it never entered this
 * call: a member that took part in it may end the phase while this rank still
 * waits for the call to complete (an all-reduce completes at different times
 * on different ranks). But once one member has completed the check's small
 * all-reduce every member has entered it, and it completes here within
 * microseconds of progress; so a wait is given up only when it has not
 * completed this long after the vote arrived (a seen 4-rank all-gather, ended
 * on rank 2 while rank 1 still waited, completed within 1 ms). */
#define MPIC_AFTER_VOTE_NS (mpic_test_hook("MPI_COLLECTIVES_TEST_AFTER_VOTE_MS", 2000) * 1000 * 1000LL)
#define MPIC_AFTER_VOTE_POLLS 20000

/* Polls g's request until it completes (0) or is given up (the error code).
 * Completed, g is still the caller's to copy from and release. */
static int wait_or_give_up(struct given *g, const char *what, int comm_id, const int *members, int n) {
  int64_t start = mpic_monotonic_ns(), next_look = start, vote_seen = 0;
  unsigned spins = 0;
  long polls_since_vote = 0;
  int ret = 0, left = -1;
  mpic_wait_begin();
  for (;;) {
    int done = 0;
    if ((ret = mpic_next_Test(&g->req, &done, MPIABI_STATUS_IGNORE)) != 0 || done) break;
    polls_since_vote++;
    /* Looking costs an Iprobe and a clock read: every 50 us, not every poll. */
    if (++spins % 64 == 0) {
      int64_t now = mpic_monotonic_ns();
      if (now >= next_look) {
        next_look = now + 50000;
        if (left < 0 && (left = member_done(members, n)) >= 0) vote_seen = now, polls_since_vote = 0;
        int64_t deadline = __atomic_load_n(&deadline_ns, __ATOMIC_ACQUIRE);
        /* the time, and polls of this rank's own: a rank descheduled for the 2 s (ranks outnumbering
         * cores) has not yet given the call the progress it needed */
        int gone = left >= 0 && now - vote_seen > MPIC_AFTER_VOTE_NS && polls_since_vote > MPIC_AFTER_VOTE_POLLS;
        if (gone || (deadline && now > deadline)) {
          ret = give_up(g, what, comm_id, gone ? left : -1, (double)(now - start) / 1e9);
          break;
        }
      }
      if (spins % 4096 == 0) sched_yield(); /* ranks may outnumber cores */
    }
  }
  mpic_wait_end();
  return ret;
}

int mpic_phase_agree(struct mpic_record *r, struct mpic_block *b, MPIABI_Datatype type, MPIABI_Op op) {
  struct given *g = take(MPIC_GIVEN_UP_BLOCK, r->id, __atomic_load_n(&r->seq, __ATOMIC_RELAXED));
  if (!g) { /* each given up by this rank in this phase (and still unsettled): the peers left it */
    char name[sizeof phase_name];
    pthread_mutex_lock(&lock);
    snprintf(name, sizeof name, "%s", phase_name[0] ? phase_name : "one phase");
    pthread_mutex_unlock(&lock);
    mpic_fatal("%d collectives were given up in %s on this rank, the most the package keeps: a test went on "
               "calling collectives after each failed because another rank had ended the test (pytest). "
               "Fix: let the test fail at the first failed collective instead of catching its error",
               MPIC_GIVEN_MAX, name);
  }
  g->block = *b;
  int ret = mpic_next_Iallreduce(MPIABI_IN_PLACE, &g->block, 1, type, op, r->comm, &g->req);
  /* A test build descheduled here, past the 2 s, while its peers complete and vote (issue 71's suspect
   * 10; read at each call: a test sets it on one rank around one collective) */
  long starve_ms = mpic_test_hook("MPI_COLLECTIVES_TEST_STARVE_MS", 0);
  if (starve_ms > 0) nanosleep(&(struct timespec){starve_ms / 1000, starve_ms % 1000 * 1000000}, NULL);
  if (ret != 0) {
    release(g);
    return ret;
  }
  char what[160];
  mpic_describe(b->sig, what, sizeof what);
  ret = wait_or_give_up(g, what, r->id, r->members, r->size);
  if (ret == error_code) return ret; /* kept, given up, until settled */
  if (ret == 0) *b = g->block;
  release(g);
  return ret;
}

int mpic_phase_given_up(int *out, int max) {
  int n = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MPIC_GIVEN_MAX && n < max; i++)
    if (given[i].state == 2) {
      out[3 * n] = given[i].kind, out[3 * n + 1] = given[i].id, out[3 * n + 2] = (int)given[i].seq;
      n++;
    }
  pthread_mutex_unlock(&lock);
  return n;
}

/* Polls a request until done or `timeout_s` passed: 0, 1 (time up) or the library's error. */
int mpic_phase_poll(MPIABI_Request *req, double timeout_s) {
  int64_t deadline = mpic_monotonic_ns() + (int64_t)(timeout_s * 1e9);
  for (unsigned spins = 1;; spins++) {
    int done = 0, ret = mpic_next_Test(req, &done, MPIABI_STATUS_IGNORE);
    if (ret != 0) return ret;
    if (done) return 0;
    if (spins % 64 == 0 && mpic_monotonic_ns() > deadline) return 1;
    if (spins % 4096 == 0) sched_yield();
  }
}

int mpic_phase_wait_given(int kind, int id, unsigned seq, double timeout_s, int *ret) {
  struct given *g = NULL;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MPIC_GIVEN_MAX && !g; i++)
    if (given[i].state == 2 && given[i].kind == kind && given[i].id == id && given[i].seq == seq) g = &given[i];
  pthread_mutex_unlock(&lock);
  if (!g) return 0;
  *ret = mpic_phase_poll(&g->req, timeout_s);
  if (*ret == 0) release(g);
  return 1;
}

int mpic_phase_stuck(char *where, int len) {
  if (!mpic_phases_on() || !mpic_mpi_is_up() || __atomic_load_n(&mpic_waiting_now, __ATOMIC_RELAXED) <= 0)
    return 0;
  uint64_t sig = 0;
  int comm_id = -1;
  unsigned seq = 0;
  int64_t since = 0;
  int members[4096], n = -1;
  int current = mpic_flight_current(&sig, &comm_id, &seq, &since);
  if (current && comm_id >= 0) n = mpic_record_members(comm_id, members, 4096);
  int left = member_done(n > 0 && n <= 4096 ? members : NULL, n);
  if (left < 0) return 0;
  char what[160] = "a call that waits for other ranks (a point-to-point transfer)";
  if (current) {
    char words[120];
    mpic_describe(sig, words, sizeof words);
    snprintf(what, sizeof what, "%s, collective %u on communicator %d", words, seq, comm_id);
  }
  int me = -1;
  mpic_next_Comm_rank(MPIABI_COMM_WORLD, &me);
  snprintf(where, (size_t)len, "rank %d waits in %s, which rank %d has left", me, what, left);
  return 1;
}

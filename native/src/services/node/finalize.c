/* Every window this process made, from its making to its free (internal.h,
 * node.h).
 *
 * MPI_Win_free synchronises a window's ranks (MPI-4.0 12.2.5), so a window
 * is freed only where every one of its ranks frees it at the same point of
 * its sequence of waits, never in an order of each process's own (jax 0.4's
 * XLA frees its communicators in its hash map's order, different on each
 * rank: a free there would hang). Two such points:
 *   - the making of another communicator's window (mpic_node_reclaim), a
 *     call every member of that communicator makes: the windows of freed
 *     communicators whose ranks are all among its members, and which all of
 *     them freed, are freed there, in the order of their splits' ids, so a
 *     program that makes and frees communicators (a mesh per test, a sweep
 *     over sub-meshes) holds the shared memory of its live ones only;
 *   - MPI_Finalize (mpic_node_finalize): the rest, in the order agreed when
 *     they were made, each after every one of its ranks has arrived (a rank
 *     waiting longer than MPI_COLLECTIVES_STALL_REPORT names the ranks that
 *     have not). */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "call_failed.h"
#include "end_job.h"
#include "flight.h"
#include "internal.h"
#include "log.h"
#include "node.h"

static struct mpic_node *windows = NULL; /* every window made and not freed, live or forgotten */
static int64_t made = 0;                 /* the highest order this process has seen */
static pthread_mutex_t windows_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t reclaiming = PTHREAD_MUTEX_INITIALIZER; /* one reclaim at a time in a process */

/* ---- the order ----
 * A window's order is agreed by its ranks when it is made, as the highest of
 * their proposals: one more than the highest order each has seen. A rank's
 * later window therefore has a higher order than its earlier ones, so two
 * windows that share a rank are freed in the same order on all of their
 * ranks. Two windows made at once in one process (two threads: two devices a
 * process, each group's first large collective) can agree on the same order,
 * each made before the other was kept; the split's id breaks the tie, the
 * same on every rank of a window and different between two windows (issue
 * 65: 3 of 6 such runs hung in MPI_Win_free at MPI_Finalize). */
int64_t mpic_node_order_proposal(void) {
  pthread_mutex_lock(&windows_lock);
  int64_t next = made + 1;
  pthread_mutex_unlock(&windows_lock);
  return next;
}

void mpic_node_keep(struct mpic_node *n) {
  pthread_mutex_lock(&windows_lock);
  if (n->order > made) made = n->order;
  n->next = windows;
  windows = n;
  pthread_mutex_unlock(&windows_lock);
}

static int before(const struct mpic_node *a, const struct mpic_node *b) {
  return a->order < b->order || (a->order == b->order && a->record_id < b->record_id);
}

/* ---- forgetting ---- */
struct mpic_node *mpic_node_of(struct mpic_record *r) {
  if (__atomic_load_n(&r->node_state, __ATOMIC_ACQUIRE) != MPIC_NODE_ATTACHED) return NULL;
  return __atomic_load_n(&r->node, __ATOMIC_ACQUIRE);
}

void mpic_node_forget(struct mpic_record *r) {
  if (!r) return;
  pthread_mutex_lock(&windows_lock);
  __atomic_store_n(&r->node_state, MPIC_NODE_LIBRARY, __ATOMIC_RELEASE);
  struct mpic_node *n = __atomic_exchange_n(&r->node, NULL, __ATOMIC_ACQ_REL);
  if (n) n->record = NULL; /* the window stays on the list, for a reclaim or MPI_Finalize */
  pthread_mutex_unlock(&windows_lock);
}

struct mpic_node_census mpic_node_count(void) {
  struct mpic_node_census c = {0, 0, 0};
  pthread_mutex_lock(&windows_lock);
  for (struct mpic_node *n = windows; n; n = n->next) {
    if (n->record) c.live++;
    else c.kept++;
    c.bytes += (long long)n->size * (long long)n->share_bytes;
  }
  pthread_mutex_unlock(&windows_lock);
  return c;
}

/* Its ranks are at the same free: unlock, free, and its communicators. */
static void free_window(struct mpic_node *n) {
  mpic_next_Win_unlock_all(n->win);
  int ret = mpic_next_Win_free(&n->win);
  if (ret != 0) mpic_call_failed("MPI_Win_free (the node path's)", ret);
  if (n->across != MPIABI_COMM_NULL) mpic_next_Comm_free(&n->across);
  mpic_next_Comm_free(&n->shm);
  free(n->shares);
  free(n->world);
  free(n->pids);
  free(n->tmp);
  free(n);
}

/* ---- reclaiming freed communicators' windows ---- */

/* Every rank of n's window is a member of r: judged alike by all of n's ranks that are in r. */
static int within(const struct mpic_node *n, const struct mpic_record *r) {
  if (!r->members) return 0;
  for (int q = 0; q < n->size; q++) {
    int found = 0;
    for (int k = 0; k < r->size && !found; k++) found = r->members[k] == n->world[q];
    if (!found) return 0;
  }
  return 1;
}

/* One MIN all-reduce a round over r's members: whether every process could take part (a process
 * reclaims on one thread at a time, and a thread never waits for another's reclaim: it tries the
 * lock, and where one member could not, none reclaims this time); the lowest id of a forgotten
 * window within r above the last round's; and, for the last round's, whether no rank holds it
 * still live. The answers are the same on every member, so every member runs as many rounds and
 * frees the same windows. */
enum { CAN, NEXT, UNUSED, ROUND };

void mpic_node_reclaim(struct mpic_record *r) {
  int can = pthread_mutex_trylock(&reclaiming) == 0;
  int previous = -1, *agreed = NULL, nagreed = 0;
  for (;;) {
    int mine[ROUND] = {can, INT_MAX, 1}, all[ROUND];
    pthread_mutex_lock(&windows_lock);
    for (struct mpic_node *n = windows; n; n = n->next) {
      if (n->record_id > previous && n->record_id < mine[NEXT] && !n->record && within(n, r))
        mine[NEXT] = n->record_id;
      if (previous >= 0 && n->record_id == previous && n->record) mine[UNUSED] = 0;
    }
    pthread_mutex_unlock(&windows_lock);
    int ret = mpic_next_Allreduce(mine, all, ROUND, MPIABI_INT, MPIABI_MIN, r->comm);
    if (ret != 0) mpic_call_failed("MPI_Allreduce (the node path's)", ret);
    if (!all[CAN]) break;
    if (previous >= 0 && all[UNUSED]) {
      int *grown = realloc(agreed, sizeof *agreed * (size_t)(nagreed + 1));
      if (!grown)
        mpic_fatal("rank %d: out of memory freeing the node path's windows. Fix: give the job more memory, or "
                   "MPI_COLLECTIVES_NODE_PATH=0",
                   mpic_record_world_rank());
      agreed = grown;
      agreed[nagreed++] = previous;
    }
    if (all[NEXT] == INT_MAX) break;
    previous = all[NEXT];
  }
  /* In ascending ids, the same order on every rank of each; a member of r that is not one of a window's
   * ranks holds none of that id and goes on. */
  for (int i = 0; i < nagreed; i++) {
    pthread_mutex_lock(&windows_lock);
    struct mpic_node *n = NULL;
    for (struct mpic_node **p = &windows; *p; p = &(*p)->next)
      if ((*p)->record_id == agreed[i] && !(*p)->record) {
        n = *p;
        *p = n->next;
        break;
      }
    pthread_mutex_unlock(&windows_lock);
    if (!n) continue;
    mpic_log(2, "communicator %d: the node path's window of freed communicator %d freed (%d KiB of shared memory)",
             r->id, n->record_id, n->size * (int)(n->share_bytes / 1024));
    free_window(n);
  }
  free(agreed);
  if (can) pthread_mutex_unlock(&reclaiming);
}

/* ---- MPI_Finalize ---- */
static double report_after = 60, give_up_after = 0; /* MPI_COLLECTIVES_STALL_REPORT's default, no limit */

int mpic_node_set_finalize_waits(double report_s, double limit_s) {
  if (report_s < 0 || limit_s < 0) return 1;
  report_after = report_s, give_up_after = limit_s;
  return 0;
}

static double seconds_since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

/* The window's ranks that have not yet marked their arrival in their shares. */
static void missing(const struct mpic_node *n, char *out, size_t len) {
  size_t at = 0;
  out[0] = 0;
  mpic_next_Win_sync(n->win);
  for (int q = 0; q < n->size && at + 16 < len; q++)
    if (!__atomic_load_n((const int *)(n->shares[q] + MPIC_NODE_FINAL_AT), __ATOMIC_ACQUIRE))
      at += (size_t)snprintf(out + at, len - at, "%s%d", at ? ", " : "", n->world[q]);
}

/* Every rank of n at its free before this one waits in MPI_Win_free, which cannot be given up: an
 * MPI_Ibarrier, tested with a pause, and this rank's arrival marked in its share so that a rank
 * still waiting after the stall report's seconds names the ranks that have not come; past
 * MPI_COLLECTIVES_STALL_TIMEOUT the job is ended. */
static void arrive(struct mpic_node *n) {
  __atomic_store_n((int *)(n->shares[n->rank] + MPIC_NODE_FINAL_AT), 1, __ATOMIC_RELEASE);
  mpic_next_Win_sync(n->win);
  MPIABI_Request request;
  if (mpic_next_Ibarrier(n->shm, &request) != 0) return; /* MPI_Win_free waits as it would */
  struct timespec t0, pause = {0, 1000000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  double report = report_after, limit = give_up_after;
  for (;;) {
    int done = 0;
    if (mpic_next_Test(&request, &done, MPIABI_STATUS_IGNORE) != 0 || done) return;
    double waited = seconds_since(&t0);
    if ((report > 0 && waited >= report) || (limit > 0 && waited >= limit)) {
      char who[512];
      missing(n, who, sizeof who);
      if (!who[0]) { /* every rank has marked its arrival: the barrier is completing */
        nanosleep(&pause, NULL);
        continue;
      }
      if (limit > 0 && waited >= limit)
        mpic_fatal("rank %d: MPI_Finalize waited %.0f s (MPI_COLLECTIVES_STALL_TIMEOUT) for rank(s) %s to reach "
                   "it: they share the node path's window of communicator %d, which its ranks free together. "
                   "Fix: make every rank end its program (a rank waiting elsewhere says where), or "
                   "MPI_COLLECTIVES_NODE_PATH=0",
                   n->world[n->rank], waited, who, n->record_id);
      mpic_log(0, "rank %d: MPI_Finalize has waited %.0f s for rank(s) %s to reach it: they share the node "
                  "path's window of communicator %d, which its ranks free together (a rank still computing, "
                  "or waiting elsewhere). Fix: make every rank end its program; MPI_COLLECTIVES_STALL_TIMEOUT "
                  "ends such a wait",
               n->world[n->rank], waited, who, n->record_id);
      report = report > 0 ? 2 * report : 0;
    }
    nanosleep(&pause, NULL);
  }
}

void mpic_node_finalize(void) {
  /* This rank's arrival marked in every window first: a peer waiting in a round on any of them names it
   * at once (round.c), where marked window by window, in the frees' order, a peer waiting on a later
   * window than the first heard nothing until the stall report (issue 71). */
  pthread_mutex_lock(&windows_lock);
  for (struct mpic_node *n = windows; n; n = n->next) {
    __atomic_store_n((int *)(n->shares[n->rank] + MPIC_NODE_FINAL_AT), 1, __ATOMIC_RELEASE);
    mpic_next_Win_sync(n->win);
  }
  pthread_mutex_unlock(&windows_lock);
  for (;;) {
    pthread_mutex_lock(&windows_lock);
    struct mpic_node **first = NULL;
    for (struct mpic_node **p = &windows; *p; p = &(*p)->next)
      if (!first || before(*p, *first)) first = p;
    struct mpic_node *n = first ? *first : NULL;
    if (n) *first = n->next;
    if (n && n->record) { /* a communicator XLA still holds: the library's from now on, its checks too */
      __atomic_store_n(&n->record->round, MPIC_ROUND_OFF, __ATOMIC_RELEASE);
      __atomic_store_n(&n->record->node_state, MPIC_NODE_LIBRARY, __ATOMIC_RELEASE);
      __atomic_store_n(&n->record->node, NULL, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&windows_lock);
    if (!n) return;
    arrive(n);
    free_window(n);
  }
}

/* ---- for the harness and diagnostics ---- */
void mpic_node_windows_held(int *live, int *kept, long long *bytes, int *returning) {
  struct mpic_node_census c = mpic_node_count();
  *live = c.live, *kept = c.kept, *bytes = c.bytes, *returning = 0;
  pthread_mutex_lock(&windows_lock);
  for (struct mpic_node *n = windows; n; n = n->next) {
    MPIABI_Errhandler h = MPIABI_ERRHANDLER_NULL;
    if (mpic_next_Win_get_errhandler(n->win, &h) != 0) continue;
    *returning += h == MPIABI_ERRORS_RETURN;
    if (h != MPIABI_ERRORS_RETURN && h != MPIABI_ERRORS_ARE_FATAL) mpic_next_Errhandler_free(&h);
  }
  pthread_mutex_unlock(&windows_lock);
}

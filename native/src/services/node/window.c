/* A communicator's window (node.h, internal.h): made at the first call the
 * path takes on it, never at the communicator's creation, so a communicator
 * that only carries small collectives costs no shared memory and no
 * collective of its own; freed at MPI_Finalize only.
 *
 * Every decision here is agreed over the communicator's members, every
 * node's ranks (one MPI_Allreduce of a few ints): all of them use a window,
 * or none does. Errors of the library's calls end the job with their words;
 * none is swallowed, since a rank that went on alone would wait in a
 * different call from its peers. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include "call_failed.h"
#include "end_job.h"
#include "internal.h"
#include "log.h"
#include "node.h"
#include "settings.h"

static struct mpic_node *windows = NULL; /* every window made, live or forgotten */
static int64_t made = 0;                 /* the highest order this process has seen (mpic_node_finalize) */
static pthread_mutex_t windows_lock = PTHREAD_MUTEX_INITIALIZER;

void mpic_node_words(int code, char *out, int len) {
  int n = 0;
  if (mpic_next_Error_string(code, out, &n) != 0) snprintf(out, (size_t)len, "error code %d", code);
  for (char *p = out; *p; p++)
    if (*p == '\n') *p = ' ';
}

static void must(int ret, const char *function) {
  if (ret != 0) mpic_call_failed(function, ret);
}

/* Whether the node's shared-memory filesystem has room for the window twice
 * over: the first look, before the window is made. A node without /dev/shm
 * says nothing: the library keeps its windows elsewhere, and the touch below
 * is the real test. */
static int room_for(size_t bytes, char *why, size_t len) {
  struct statvfs fs;
  if (statvfs("/dev/shm", &fs) != 0) return 1;
  unsigned long long free_bytes = (unsigned long long)fs.f_bavail * fs.f_frsize;
  if (free_bytes >= 2ULL * bytes) return 1;
  snprintf(why, len, "/dev/shm has %llu KiB free, and the window needs %zu KiB", free_bytes / 1024, bytes / 1024);
  return 0;
}

/* ---- touching this rank's share under a SIGBUS guard ----
 * MPICH and Open MPI map a window's file (in /dev/shm, or Open MPI's
 * osc_sm_backing_directory) and its pages are made when first touched:
 * where the filesystem is full then (a container's 64 MiB /dev/shm, or the
 * windows of other communicators touched since their own look at the room),
 * the rank dies of SIGBUS in a copy. So each rank touches its whole share
 * once, here, where a SIGBUS is caught and becomes an answer; the pages then
 * count as used for every later look at the room. */
static __thread sigjmp_buf *touching; /* this thread's guard, while it touches */
static struct sigaction before;       /* the handler that was there (Python's faulthandler, or none) */
static pthread_mutex_t touch_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_sigbus(int sig, siginfo_t *info, void *context) {
  if (touching) siglongjmp(*touching, 1);
  /* another thread's SIGBUS: what was there before takes it */
  if (before.sa_flags & SA_SIGINFO) {
    before.sa_sigaction(sig, info, context);
  } else if (before.sa_handler != SIG_IGN && before.sa_handler != SIG_DFL) {
    before.sa_handler(sig);
  } else {
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
  }
}

static int touch(char *share, size_t bytes) {
  struct sigaction guard;
  memset(&guard, 0, sizeof guard);
  guard.sa_sigaction = on_sigbus;
  guard.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&guard.sa_mask);
  sigjmp_buf here;
  volatile int ok = 0;
  pthread_mutex_lock(&touch_lock);
  sigaction(SIGBUS, &guard, &before);
  if (!sigsetjmp(here, 1)) {
    touching = &here;
    memset(share, 0, bytes);
    ok = 1;
  }
  touching = NULL;
  sigaction(SIGBUS, &before, NULL);
  pthread_mutex_unlock(&touch_lock);
  return ok;
}

/* Whether the window's loads and stores are seen by the other ranks once
 * synchronised (MPI's unified memory model): the path's only model. */
static int unified(MPIABI_Win win) {
  void *value = NULL;
  int flag = 0;
  return mpic_next_Win_get_attr(win, MPIABI_WIN_MODEL, &value, &flag) == 0 && flag && value &&
         *(int *)value == MPIABI_WIN_UNIFIED;
}

static void say_attached(const struct mpic_record *r, const struct mpic_node *n) {
  char which[128] = "";
  for (int i = 0; mpic_node_path_collectives_words[i]; i++)
    if (mpic_settings.node_path_collectives & (1 << i))
      snprintf(which + strlen(which), sizeof which - strlen(which), "%s%s", which[0] ? "," : "",
               mpic_node_path_collectives_words[i]);
  if (n->across == MPIABI_COMM_NULL)
    mpic_log(2, "communicator %d: %d ranks on one node: %s from %d bytes through a shared window (%d KiB a rank; "
                "up to %d bytes, 0: no limit)",
             r->id, r->size, which[0] ? which : "no collective", mpic_settings.node_path_min,
             MPIC_NODE_SHARE / 1024, mpic_settings.node_path_max);
  else
    mpic_log(2, "communicator %d: %d ranks, %d on each node: %s from %d bytes through each node's shared window "
                "and the MPI library between nodes (%d KiB a rank; up to %d bytes, 0: no limit)",
             r->id, r->size, n->size,
             mpic_settings.node_path_collectives & MPIC_NODE_PATH_COLLECTIVES_ALL_REDUCE ? "all-reduce"
                                                                                          : "no collective",
             mpic_settings.node_path_min, MPIC_NODE_SHARE / 1024, mpic_settings.node_path_max);
}

static void no_room(const struct mpic_record *r, const char *why) {
  mpic_log(0, "rank %d: no room for the node path of communicator %d (%s); its collectives use the MPI library's "
              "own. Fix: a larger /dev/shm (docker run --shm-size), or MPI_COLLECTIVES_NODE_PATH=0 to leave it off",
           mpic_record_world_rank(), r->id, why);
}

/* What every member learnt from the window's making, as one MIN all-reduce. */
enum { ALLOCATED, TOUCHED, UNIFIED, ORDER, ANSWERS };

static struct mpic_node *make(struct mpic_record *r) {
  MPIABI_Comm shm = MPIABI_COMM_NULL, across = MPIABI_COMM_NULL;
  must(mpic_next_Comm_split_type(r->comm, MPIABI_COMM_TYPE_SHARED, r->rank, MPIABI_INFO_NULL, &shm),
       "MPI_Comm_split_type (the node path's)");
  mpic_next_Comm_set_errhandler(shm, MPIABI_ERRORS_RETURN);
  int size = 0, rank = 0;
  must(mpic_next_Comm_size(shm, &size), "MPI_Comm_size (the node path's)");
  must(mpic_next_Comm_rank(shm, &rank), "MPI_Comm_rank (the node path's)");
  if (size != r->size) {
    /* Ranks on several nodes: each node's part sees fewer ranks than the communicator has, on every node
     * alike, so every member decides the same. */
    if (mpic_settings.node_path_across_nodes) across = mpic_node_across(r, size, rank);
    if (across == MPIABI_COMM_NULL) {
      mpic_next_Comm_free(&shm);
      mpic_log(2, "communicator %d: its %d ranks span nodes: the MPI library's own collectives%s", r->id, r->size,
               mpic_settings.node_path_across_nodes ? "" : " (MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1 composes "
                                                           "its all-reduces with each node's window)");
      return NULL;
    }
  }
  char why[512] = "";
  int room = room_for((size_t)size * MPIC_NODE_SHARE, why, sizeof why), everywhere = 0;
  must(mpic_next_Allreduce(&room, &everywhere, 1, MPIABI_INT, MPIABI_MIN, r->comm), "MPI_Allreduce (the node path's)");
  if (!everywhere) {
    if (r->rank == 0) no_room(r, room ? "another rank's /dev/shm is short" : why);
    if (across != MPIABI_COMM_NULL) mpic_next_Comm_free(&across);
    mpic_next_Comm_free(&shm);
    return NULL;
  }
  MPIABI_Info info = MPIABI_INFO_NULL;
  if (mpic_next_Info_create(&info) == 0) mpic_next_Info_set(info, "alloc_shared_noncontig", "true");
  void *base = NULL;
  MPIABI_Win win = MPIABI_WIN_NULL;
  int ret = mpic_next_Win_allocate_shared((MPIABI_Aint)MPIC_NODE_SHARE, 1, info, shm, &base, &win);
  if (info != MPIABI_INFO_NULL) mpic_next_Info_free(&info);
  if (ret != 0) mpic_node_words(ret, why, sizeof why);
  char **shares = ret == 0 ? calloc((size_t)size, sizeof *shares) : NULL;
  int mine[ANSWERS] = {ret == 0, 0, 0, 0}, all[ANSWERS];
  for (int q = 0; shares && q < size; q++) {
    MPIABI_Aint bytes = 0;
    int unit = 0;
    if (mpic_next_Win_shared_query(win, q, &bytes, &unit, &shares[q]) != 0 || bytes < MPIC_NODE_SHARE)
      mpic_fatal("rank %d: could not map the node path's shared window of communicator %d. Fix: "
                 "MPI_COLLECTIVES_NODE_PATH=0",
                 mpic_record_world_rank(), r->id);
  }
  if (ret == 0 && !shares)
    mpic_fatal("rank %d: out of memory making the node path's window of communicator %d. Fix: give the job more "
               "memory, or MPI_COLLECTIVES_NODE_PATH=0",
               mpic_record_world_rank(), r->id);
  if (shares) {
    mine[TOUCHED] = touch(shares[rank], MPIC_NODE_SHARE);
    if (!mine[TOUCHED]) {
      struct statvfs fs;
      unsigned long long left = statvfs("/dev/shm", &fs) == 0 ? (unsigned long long)fs.f_bavail * fs.f_frsize : 0;
      snprintf(why, sizeof why, "the window's file ran out of room as this rank's share was touched; /dev/shm has "
                                "%llu KiB free", left / 1024);
    }
    mine[UNIFIED] = unified(win);
  }
  pthread_mutex_lock(&windows_lock);
  mine[ORDER] = (int)-(made + 1);
  pthread_mutex_unlock(&windows_lock);
  must(mpic_next_Allreduce(mine, all, ANSWERS, MPIABI_INT, MPIABI_MIN, r->comm), "MPI_Allreduce (the node path's)");
  if (all[ALLOCATED] && all[TOUCHED] && all[UNIFIED]) {
    struct mpic_node *n = calloc(1, sizeof *n);
    int *world = calloc((size_t)size, sizeof *world);
    if (!n || !world)
      mpic_fatal("rank %d: out of memory making the node path's window of communicator %d. Fix: give the job more "
                 "memory, or MPI_COLLECTIVES_NODE_PATH=0",
                 mpic_record_world_rank(), r->id);
    int me = mpic_record_world_rank();
    must(mpic_next_Allgather(&me, 1, MPIABI_INT, world, 1, MPIABI_INT, shm), "MPI_Allgather (the node path's)");
    /* a passive-target epoch for the life of the window: MPI_Win_sync (turns.c) is valid only in one */
    must(mpic_next_Win_lock_all(MPIABI_MODE_NOCHECK, win), "MPI_Win_lock_all (the node path's)");
    *n = (struct mpic_node){.shm = shm, .across = across, .win = win, .size = size, .rank = rank, .world = world,
                            .shares = shares, .record_id = r->id, .order = -(int64_t)all[ORDER], .record = r};
    pthread_mutex_lock(&windows_lock);
    if (n->order > made) made = n->order;
    n->next = windows;
    windows = n;
    pthread_mutex_unlock(&windows_lock);
    say_attached(r, n);
    return n;
  }
  /* The library's own, and one line: from the rank that failed, else from rank 0. */
  if (!all[ALLOCATED]) {
    if (r->rank == 0 || !mine[ALLOCATED])
      mpic_log(0, "rank %d: no shared memory for the node path of communicator %d (%s); its collectives use the "
                  "MPI library's own. Fix: a larger /dev/shm, or MPI_COLLECTIVES_NODE_PATH=0 to leave it off",
               mpic_record_world_rank(), r->id, mine[ALLOCATED] ? "another rank's MPI_Win_allocate_shared failed" : why);
  } else if (!all[TOUCHED]) {
    if (r->rank == 0 || !mine[TOUCHED])
      no_room(r, mine[TOUCHED] ? "another rank's share did not fit in its node's shared memory" : why);
  } else if (r->rank == 0) {
    mpic_log(1, "communicator %d: the MPI library's windows are not in the unified memory model (MPI_WIN_MODEL): "
                "the MPI library's own collectives",
             r->id);
  }
  /* Every rank holds a window: all free it here, at the same point. Where only some do (an allocation that
   * failed on some ranks only), the holders would wait in MPI_Win_free for ranks that never call it: it is
   * left to the end of the process instead. */
  if (all[ALLOCATED]) mpic_next_Win_free(&win);
  else if (mine[ALLOCATED])
    mpic_log(1, "communicator %d: this rank's share of a window that other ranks could not make is kept until the "
                "process ends (freeing it would wait for them)",
             r->id);
  free(shares);
  if (across != MPIABI_COMM_NULL) mpic_next_Comm_free(&across);
  mpic_next_Comm_free(&shm);
  return NULL;
}

struct mpic_node *mpic_node_attach(struct mpic_record *r) {
  int state = MPIC_NODE_UNKNOWN;
  if (!__atomic_compare_exchange_n(&r->node_state, &state, MPIC_NODE_ATTACHING, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    if (state == MPIC_NODE_ATTACHED) return r->node;
    if (state == MPIC_NODE_LIBRARY) return NULL;
    mpic_fatal("rank %d: a collective started on communicator %d while its previous one was still running in the "
               "node path (collectives dispatched from two threads at once). No result was returned. Fix: dispatch "
               "collectives from one thread",
               mpic_record_world_rank(), r->id);
  }
  struct mpic_node *n = make(r);
  r->node = n;
  __atomic_store_n(&r->node_state, n ? MPIC_NODE_ATTACHED : MPIC_NODE_LIBRARY, __ATOMIC_RELEASE);
  return n;
}

void mpic_node_forget(struct mpic_record *r) {
  if (!r) return;
  pthread_mutex_lock(&windows_lock);
  if (r->node) r->node->record = NULL; /* the window stays on the list, for mpic_node_finalize */
  r->node = NULL;
  pthread_mutex_unlock(&windows_lock);
  __atomic_store_n(&r->node_state, MPIC_NODE_LIBRARY, __ATOMIC_RELEASE);
}

void mpic_node_finalize(void) {
  for (;;) {
    /* The lowest order first. Orders were agreed by each window's ranks when it was made, and a rank's later
     * window always has a higher one (its count of windows seen rises with each), so two windows that share
     * ranks are freed in the same order on all of them: no rank waits in one while a peer waits in another.
     * Two windows made at once in one process (two threads: two devices a process, each group's first large
     * collective) can agree on the same order, each made before the other raised the count; their list
     * order is each rank's timing. The split's id breaks the tie: the same on every member of a window,
     * different between two windows (issue 65: 3 of 6 such runs hung in MPI_Win_free at MPI_Finalize). */
    pthread_mutex_lock(&windows_lock);
    struct mpic_node **first = NULL;
    for (struct mpic_node **p = &windows; *p; p = &(*p)->next)
      if (!first || (*p)->order < (*first)->order ||
          ((*p)->order == (*first)->order && (*p)->record_id < (*first)->record_id))
        first = p;
    struct mpic_node *n = first ? *first : NULL;
    if (n) *first = n->next;
    if (n && n->record) { /* a communicator XLA still holds: the library's from now on */
      n->record->node = NULL;
      __atomic_store_n(&n->record->node_state, MPIC_NODE_LIBRARY, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&windows_lock);
    if (!n) return;
    mpic_next_Win_unlock_all(n->win);
    mpic_next_Win_free(&n->win);
    if (n->across != MPIABI_COMM_NULL) mpic_next_Comm_free(&n->across);
    mpic_next_Comm_free(&n->shm);
    free(n->shares);
    free(n->world);
    free(n);
  }
}

/* A communicator's window (node.h, internal.h): made inside a call every
 * member of the communicator makes (its first collective the path takes, or,
 * where all-to-all is on the path, its creation: an all-to-all is only
 * point-to-point calls, which some members may not make), never at a
 * point-to-point call; freed where every rank of it agrees (finalize.c).
 *
 * Every decision here is agreed over the communicator's members, every
 * node's ranks (one MPI_Allreduce of a few ints): all of them use a window,
 * or none does. Errors of the library's calls end the job with their words;
 * none is swallowed, since a rank that went on alone would wait in a
 * different call from its peers. The steps, in order: the node's part
 * (node_part), the room (room_everywhere), the allocation (allocate), the
 * shares mapped (map_shares) and touched (touch.c), every rank's answers
 * agreed (one all-reduce), then the window's files' names dropped from
 * /dev/shm (shm_names.h) and the window kept (keep), or given up (give_up). */
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
#include "shm_names.h"

void mpic_node_words(int code, char *out, int len) {
  int n = 0;
  if (mpic_next_Error_string(code, out, &n) != 0) snprintf(out, (size_t)len, "error code %d", code);
  for (char *p = out; *p; p++)
    if (*p == '\n') *p = ' ';
}

static void must(int ret, const char *function) {
  if (ret != 0) mpic_call_failed(function, ret);
}

static __attribute__((noreturn)) void out_of_memory(const struct mpic_record *r) {
  mpic_fatal("rank %d: out of memory making the node path's window of communicator %d. Fix: give the job more "
             "memory, or MPI_COLLECTIVES_NODE_PATH=0",
             mpic_record_world_rank(), r->id);
}

static unsigned long long shm_free(void) {
  struct statvfs fs;
  return statvfs("/dev/shm", &fs) == 0 ? (unsigned long long)fs.f_bavail * fs.f_frsize : 0;
}

/* ---- the sentences ---- */
static void say_attached(const struct mpic_record *r, const struct mpic_node *n) {
  char which[128] = "";
  for (int i = 0; mpic_node_path_collectives_words[i]; i++)
    if (mpic_settings.node_path_collectives & (1 << i))
      snprintf(which + strlen(which), sizeof which - strlen(which), "%s%s", which[0] ? "," : "",
               mpic_node_path_collectives_words[i]);
  if (mpic_node_library_keeps_large())
    mpic_log(2, "communicator %d: %d ranks on one node: Intel MPI's own collectives (MPI_COLLECTIVES_NODE_PATH=1 "
                "takes the node path); its window (%d KiB a rank) serves the one round",
             r->id, r->size, (int)(n->share_bytes / 1024));
  else if (n->across == MPIABI_COMM_NULL && !which[0]) /* a tuning entry's round alone */
    mpic_log(2, "communicator %d: %d ranks on one node: the library's own large collectives; its window (%d KiB a "
                "rank) serves the one round",
             r->id, r->size, (int)(n->share_bytes / 1024));
  else if (n->across == MPIABI_COMM_NULL)
    mpic_log(2, "communicator %d: %d ranks on one node: %s from %d bytes through a shared window (%d KiB a rank; "
                "up to %d bytes, 0: no limit)",
             r->id, r->size, which[0] ? which : "no collective", mpic_settings.node_path_min,
             (int)(n->share_bytes / 1024), mpic_settings.node_path_max);
  else
    mpic_log(2, "communicator %d: %d ranks, %d on each node: %s from %d bytes through each node's shared window "
                "and the MPI library between nodes (%d KiB a rank; up to %d bytes, 0: no limit)",
             r->id, r->size, n->size,
             mpic_settings.node_path_collectives & MPIC_NODE_PATH_COLLECTIVES_ALL_REDUCE ? "all-reduce"
                                                                                          : "no collective",
             mpic_settings.node_path_min, (int)(n->share_bytes / 1024), mpic_settings.node_path_max);
}

/* No room: the cause named. Where this rank's other windows hold much of /dev/shm, they are the cause
 * (a program that keeps many communicators: meshes, sub-meshes), not the filesystem's size. */
static void no_room(const struct mpic_record *r, const char *why) {
  struct mpic_node_census c = mpic_node_count();
  char held[256] = "";
  if (c.live + c.kept)
    snprintf(held, sizeof held, "; this rank's %d other windows hold %lld MiB of the node's shared memory: %d of "
                                "live communicators, %d of freed ones a rank has not freed yet",
             c.live + c.kept, c.bytes >> 20, c.live, c.kept);
  mpic_log(0, "rank %d: no room for the node path of communicator %d (%s%s); its collectives use the MPI library's "
              "own. Fix: %sa larger /dev/shm (docker run --shm-size), or MPI_COLLECTIVES_NODE_PATH=0 to leave it off",
           mpic_record_world_rank(), r->id, why, held,
           c.live + c.kept ? "free the communicators (meshes) the program no longer uses, " : "");
}

/* ---- the steps ---- */

/* The communicator's ranks on this node (shm, its size and this rank's place there) and, over several
 * nodes, the communicator across them; 0 where the path does not apply (nodes of unequal parts, or
 * across nodes not asked for). The same answer on every member. */
static int node_part(struct mpic_record *r, MPIABI_Comm *shm, int *size, int *rank, MPIABI_Comm *across) {
  *shm = *across = MPIABI_COMM_NULL;
  must(mpic_next_Comm_split_type(r->comm, MPIABI_COMM_TYPE_SHARED, r->rank, MPIABI_INFO_NULL, shm),
       "MPI_Comm_split_type (the node path's)");
  mpic_next_Comm_set_errhandler(*shm, MPIABI_ERRORS_RETURN);
  must(mpic_next_Comm_size(*shm, size), "MPI_Comm_size (the node path's)");
  must(mpic_next_Comm_rank(*shm, rank), "MPI_Comm_rank (the node path's)");
  if (*size == r->size) return 1;
  /* Ranks on several nodes: each node's part sees fewer ranks than the communicator has, on every node
   * alike, so every member decides the same. */
  if (mpic_settings.node_path_across_nodes) *across = mpic_node_across(r, *size, *rank);
  if (*across != MPIABI_COMM_NULL) return 1;
  mpic_next_Comm_free(shm);
  mpic_log(2, "communicator %d: its %d ranks span nodes: the MPI library's own collectives%s", r->id, r->size,
           mpic_settings.node_path_across_nodes ? "" : " (MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1 composes "
                                                       "its all-reduces with each node's window)");
  return 0;
}

/* Whether every node's /dev/shm has room for the window twice over (the first look, before the window is
 * made; a node without /dev/shm says yes: the library keeps its windows elsewhere, and the touch is the
 * real test). Agreed over r's members; the line from rank 0. */
static int room_everywhere(const struct mpic_record *r, size_t bytes) {
  char why[256] = "";
  struct statvfs fs;
  int room = 1, everywhere = 0;
  unsigned long long left = statvfs("/dev/shm", &fs) == 0 ? (unsigned long long)fs.f_bavail * fs.f_frsize : ~0ULL;
  if (left < 2ULL * bytes) {
    room = 0;
    snprintf(why, sizeof why, "/dev/shm has %llu KiB free, and the window needs %zu KiB", left / 1024, bytes / 1024);
  }
  must(mpic_next_Allreduce(&room, &everywhere, 1, MPIABI_INT, MPIABI_MIN, r->comm), "MPI_Allreduce (the node path's)");
  if (!everywhere && r->rank == 0) no_room(r, room ? "another rank's /dev/shm is short" : why);
  return everywhere;
}

/* The window, its memory not spread over NUMA pages of one rank (alloc_shared_noncontig): 0, or the
 * library's error code with its words in why. */
static int allocate(MPIABI_Comm shm, size_t share, MPIABI_Win *win, char *why, int len) {
  MPIABI_Info info = MPIABI_INFO_NULL;
  if (mpic_next_Info_create(&info) == 0) mpic_next_Info_set(info, "alloc_shared_noncontig", "true");
  void *base = NULL;
  *win = MPIABI_WIN_NULL;
  int ret = mpic_next_Win_allocate_shared((MPIABI_Aint)share, 1, info, shm, &base, win);
  if (info != MPIABI_INFO_NULL) mpic_next_Info_free(&info);
  if (ret != 0) mpic_node_words(ret, why, len);
  else mpic_next_Win_set_errhandler(*win, MPIABI_ERRORS_RETURN); /* our sentences, not the library's abort */
  return ret;
}

/* Where each rank's share lies in this process. */
static char **map_shares(const struct mpic_record *r, MPIABI_Win win, int size, size_t share) {
  char **shares = calloc((size_t)size, sizeof *shares);
  if (!shares) out_of_memory(r);
  for (int q = 0; q < size; q++) {
    MPIABI_Aint bytes = 0;
    int unit = 0;
    int ret = mpic_next_Win_shared_query(win, q, &bytes, &unit, &shares[q]);
    if (ret != 0) mpic_call_failed("MPI_Win_shared_query (the node path's)", ret);
    if (bytes < (MPIABI_Aint)share)
      mpic_fatal("rank %d: the node path's shared window of communicator %d gave rank %d %lld bytes where %zu were "
                 "asked. Fix: MPI_COLLECTIVES_NODE_PATH=0",
                 mpic_record_world_rank(), r->id, q, (long long)bytes, share);
  }
  return shares;
}

/* Whether the window's loads and stores are seen by the other ranks once synchronised (MPI's unified
 * memory model): the path's only model. */
static int unified(MPIABI_Win win) {
  void *value = NULL;
  int flag = 0;
  return mpic_next_Win_get_attr(win, MPIABI_WIN_MODEL, &value, &flag) == 0 && flag && value &&
         *(int *)value == MPIABI_WIN_UNIFIED;
}

/* What every member learnt from the window's making, as one MIN all-reduce. */
enum { ALLOCATED, TOUCHED, UNIFIED, ORDER, ANSWERS };

static struct mpic_node *keep(struct mpic_record *r, MPIABI_Comm shm, MPIABI_Comm across, MPIABI_Win win,
                              int size, int rank, char **shares, size_t share, int64_t order) {
  struct mpic_node *n = calloc(1, sizeof *n);
  int *world = calloc((size_t)size, sizeof *world), *pids = calloc((size_t)size, sizeof *pids);
  if (!n || !world || !pids) out_of_memory(r);
  int me = mpic_record_world_rank();
  must(mpic_next_Allgather(&me, 1, MPIABI_INT, world, 1, MPIABI_INT, shm), "MPI_Allgather (the node path's)");
  /* a passive-target epoch for the life of the window: MPI_Win_sync (turns.c) is valid only in one */
  must(mpic_next_Win_lock_all(MPIABI_MODE_NOCHECK, win), "MPI_Win_lock_all (the node path's)");
  *n = (struct mpic_node){.shm = shm, .across = across, .win = win, .size = size, .rank = rank, .world = world,
                          .pids = pids, .shares = shares, .record_id = r->id, .order = order, .record = r,
                          .direct = MPIC_NODE_DIRECT_UNDECIDED, /* direct.c: at the first call that would */
                          .share_bytes = share,
                          .round_at = share == MPIC_NODE_SHARE ? MPIC_NODE_ROUND_AT : MPIC_NODE_STAMPS};
  mpic_node_keep(n);
  say_attached(r, n);
  return n;
}

/* The library's own, and one line: from the rank that failed, else from rank 0. */
static void give_up(struct mpic_record *r, const int *mine, const int *all, const char *why) {
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
}

/* The share a window needs: the round's alone where the library keeps every large collective (the same
 * answer on every member: the job's settings and library). */
static size_t share_needed(void) {
  return mpic_node_library_keeps_large() || !mpic_settings.node_path_collectives ? MPIC_NODE_ROUND_ONLY_SHARE
                                                                                  : MPIC_NODE_SHARE;
}

static struct mpic_node *make(struct mpic_record *r) {
  mpic_node_reclaim(r); /* freed communicators' windows first: their room is this one's */
  MPIABI_Comm shm, across;
  int size = 0, rank = 0;
  if (!node_part(r, &shm, &size, &rank, &across)) return NULL;
  char why[512] = "";
  MPIABI_Win win = MPIABI_WIN_NULL;
  char **shares = NULL;
  int mine[ANSWERS] = {0, 0, 0, (int)-mpic_node_order_proposal()}, all[ANSWERS];
  size_t share = share_needed();
  if (room_everywhere(r, (size_t)size * share)) {
    mine[ALLOCATED] = allocate(shm, share, &win, why, sizeof why) == 0;
    if (mine[ALLOCATED]) {
      shares = map_shares(r, win, size, share);
      mine[TOUCHED] = mpic_node_touch(shares[rank], share);
      if (!mine[TOUCHED])
        snprintf(why, sizeof why, "the window's file ran out of room as this rank's share was touched; /dev/shm "
                                  "has %llu KiB free", shm_free() / 1024);
      mine[UNIFIED] = unified(win);
    }
    must(mpic_next_Allreduce(mine, all, ANSWERS, MPIABI_INT, MPIABI_MIN, r->comm), "MPI_Allreduce (the node path's)");
    /* every member has mapped the window's file(s): their names may go (shm_names.h; also where the window
     * is given up below) */
    if (all[ALLOCATED]) mpic_shm_names_drop_at(shares, size);
    if (all[ALLOCATED] && all[TOUCHED] && all[UNIFIED])
      return keep(r, shm, across, win, size, rank, shares, share, -(int64_t)all[ORDER]);
    give_up(r, mine, all, why);
    /* Every rank holds a window: all free it here, at the same point. Where only some do (an allocation
     * that failed on some ranks only), the holders would wait in MPI_Win_free for ranks that never call
     * it: it is left to the end of the process, which the library's shared memory does not outlive. */
    if (all[ALLOCATED]) mpic_next_Win_free(&win);
    else if (mine[ALLOCATED])
      mpic_log(1, "communicator %d: this rank's share of a window that other ranks could not make is kept until "
                  "the process ends (freeing it would wait for them)",
               r->id);
  }
  free(shares);
  if (across != MPIABI_COMM_NULL) mpic_next_Comm_free(&across);
  mpic_next_Comm_free(&shm);
  return NULL;
}

struct mpic_node *mpic_node_attach(struct mpic_record *r) {
  int state = MPIC_NODE_UNKNOWN;
  if (!__atomic_compare_exchange_n(&r->node_state, &state, MPIC_NODE_ATTACHING, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    if (state == MPIC_NODE_ATTACHED) return mpic_node_of(r);
    if (state == MPIC_NODE_LIBRARY) return NULL;
    mpic_node_two_threads(mpic_record_world_rank(), r->id);
  }
  struct mpic_node *n = make(r);
  __atomic_store_n(&r->node, n, __ATOMIC_RELEASE);
  __atomic_store_n(&r->node_state, n ? MPIC_NODE_ATTACHED : MPIC_NODE_LIBRARY, __ATOMIC_RELEASE);
  return n;
}

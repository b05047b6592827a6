/* The node's own data path (node.h).
 *
 * The window: each rank of the communicator owns MPIC_NODE_SHARE bytes of
 * shared memory (its own pages: alloc_shared_noncontig), and every rank can
 * read and write every rank's share directly: two halves of MPIC_NODE_CHUNK
 * for the collectives, then a slot of MPIC_NODE_CHUNK for the exchanges of
 * XLA's all-to-all (mpic_node_sendrecv), kept apart because an exchange
 * involves two ranks only, while a rank may still be reading the halves of
 * the communicator's last collective.
 *
 * An all-reduce, chunk by chunk (at most MPIC_NODE_CHUNK bytes each):
 *   1. each rank copies its chunk of the input into its share;
 *   2. barrier;
 *   3. each rank reduces its own slice of the chunk (a P-th, on element
 *      boundaries) from every other rank's share into its own, with
 *      MPI_Reduce_local: the library's own arithmetic for every datatype and
 *      reduction it knows, the narrow types and user operations included;
 *   4. barrier;
 *   5. each rank copies every slice of the result from its owner's share.
 * Each element is reduced once, by one rank, in one order, so every rank
 * gets the same bits. Memory traffic per rank is about three times the
 * buffer, spread over all ranks at once; the library's own protocols on
 * MPICH and Open MPI copy through fixed cells several times over. Chunks use
 * the two halves of each share in turn, so a half is written again only
 * after every rank has passed the barrier that follows its last reading:
 * two barriers a chunk, none at the end of a call.
 *
 * The barriers are MPI_Barrier on the window's communicator: a rank waits
 * in MPI, where the stall report, the peer watch and SIGTERM find it.
 *
 * Over several nodes (MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1, every node
 * holding as many of the communicator's ranks): each node has its own
 * window, and an all-reduce is composed (composed_allreduce): a
 * reduce-scatter within the node, the library's MPI_Allreduce of each rank's
 * part among the ranks at its place on the other nodes (`across`), an
 * all-gather within the node. The library moves a P-th of the buffer
 * between nodes from every rank at once, and nothing of the node's own
 * traffic. The other collectives keep the library's there. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include "call_failed.h"
#include "dispatch.h"
#include "end_job.h"
#include "log.h"
#include "node.h"
#include "settings.h"

struct mpic_node {
  MPIABI_Comm shm;    /* the record's members on this node, in the communicator's order */
  MPIABI_Comm across; /* across nodes, the ranks whose place on their node is this rank's (MPI_COMM_NULL
                       * where the communicator is on one node, shm then its very members) */
  MPIABI_Win win;
  int size, rank;
  char **shares; /* size: each rank's MPIC_NODE_SHARE bytes */
  unsigned long turn; /* chunks so far: which half is next */
  int id;             /* the record's id, for the order of mpic_node_finalize */
  struct mpic_record *record; /* whose node this is (records are never freed: comm_record.c) */
  struct mpic_node *next; /* every live window, for mpic_node_finalize */
};

static struct mpic_node *windows = NULL;
static pthread_mutex_t windows_lock = PTHREAD_MUTEX_INITIALIZER;

/* The library's words for an error code, on one line. */
static void words(int code, char *out, int len) {
  int n = 0;
  if (mpic_next_Error_string(code, out, &n) != 0) snprintf(out, (size_t)len, "error code %d", code);
  for (char *p = out; *p; p++)
    if (*p == '\n') *p = ' ';
}

/* Whether the node's shared-memory filesystem has room for the window
 * twice over. MPICH maps a window's file in /dev/shm and touches its pages
 * later: where the filesystem is full then (a container's 64 MiB /dev/shm),
 * the rank dies of SIGBUS instead of an error from MPI_Win_allocate_shared,
 * so the room is looked at first. A node without /dev/shm says nothing: the
 * library keeps its windows elsewhere. */
static int room_for(size_t bytes, char *why, size_t len) {
  struct statvfs fs;
  if (statvfs("/dev/shm", &fs) != 0) return 1;
  unsigned long long free_bytes = (unsigned long long)fs.f_bavail * fs.f_frsize;
  if (free_bytes >= 2ULL * bytes) return 1;
  snprintf(why, len, "/dev/shm has %llu KiB free, and the window needs %zu KiB", free_bytes / 1024, bytes / 1024);
  return 0;
}

/* Intel MPI's own shared-memory all-reduce is within 1.2-1.5x of the copy
 * floor on a 16-core node (issue 55's measurements), and on a 2-core VM it
 * was faster than this path at 1 MiB and from 64 MiB: MPI_COLLECTIVES_NODE_PATH=2
 * (the default) leaves it its own. */
static int library_is_intel(void) {
  static int known = -1;
  if (known < 0) {
    char text[8192] = "";
    int len = 0;
    known = mpic_next_Get_library_version(text, &len) == 0 && strstr(text, "Intel(R) MPI") != NULL;
  }
  return known;
}

/* A communicator over several nodes whose all-reduces
 * MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1 composes: every node holds the same
 * number of its ranks, two or more (so each rank's part of a buffer is the
 * same elements on every node); returns the communicator of the ranks at the
 * same place on their nodes, or MPI_COMM_NULL. The counts are gathered over
 * the whole communicator, so every member answers alike. shm_size is 0 where
 * this rank's node could not be told. */
static MPIABI_Comm across_nodes(const struct mpic_record *r, int shm_size, int shm_rank) {
  int counts[2] = {shm_size, -shm_size}, seen[2] = {0, 0}; /* the fewest and the most on a node */
  if (mpic_next_Allreduce(counts, seen, 2, MPIABI_INT, MPIABI_MIN, r->comm) != 0) return MPIABI_COMM_NULL;
  if (seen[0] < 2 || seen[0] != -seen[1]) {
    mpic_log(2, "communicator %d: its %d ranks span nodes with %d to %d on each: the MPI library's own collectives "
                "(the node path composes only where every node holds as many, two or more)",
             r->id, r->size, seen[0], -seen[1]);
    return MPIABI_COMM_NULL;
  }
  MPIABI_Comm across = MPIABI_COMM_NULL;
  if (mpic_next_Comm_split(r->comm, shm_rank, r->rank, &across) != 0) return MPIABI_COMM_NULL;
  mpic_next_Comm_set_errhandler(across, MPIABI_ERRORS_RETURN);
  return across;
}

void mpic_node_attach(struct mpic_record *r) {
  if (!r || !mpic_settings.node_path || r->size < 2) return;
  if (mpic_settings.node_path == 2 && library_is_intel()) {
    mpic_log(2, "communicator %d: Intel MPI's own collectives (MPI_COLLECTIVES_NODE_PATH=1 takes the node path)",
             r->id);
    return;
  }
  MPIABI_Comm shm = MPIABI_COMM_NULL, across = MPIABI_COMM_NULL;
  int ret = mpic_next_Comm_split_type(r->comm, MPIABI_COMM_TYPE_SHARED, r->rank, MPIABI_INFO_NULL, &shm);
  int size = 0, rank = 0;
  if (ret == 0 && shm != MPIABI_COMM_NULL) {
    mpic_next_Comm_size(shm, &size);
    mpic_next_Comm_rank(shm, &rank);
  }
  if (size != r->size) {
    /* Ranks on several nodes: each node's part sees fewer ranks than the communicator has, on every
     * node alike, so every member decides the same. */
    if (mpic_settings.node_path_across_nodes) across = across_nodes(r, size, rank);
    if (across == MPIABI_COMM_NULL) {
      if (shm != MPIABI_COMM_NULL) mpic_next_Comm_free(&shm);
      mpic_log(2, "communicator %d: its %d ranks span nodes: the MPI library's own collectives%s", r->id, r->size,
               mpic_settings.node_path_across_nodes ? "" : " (MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1 composes "
                                                           "its all-reduces with each node's window)");
      return;
    }
  }
  mpic_next_Comm_set_errhandler(shm, MPIABI_ERRORS_RETURN);
  char why[512] = "";
  /* The answers below are agreed over the whole communicator, every node's ranks: all use a window, or none. */
  int room = room_for((size_t)size * MPIC_NODE_SHARE, why, sizeof why), everywhere = 0;
  if (mpic_next_Allreduce(&room, &everywhere, 1, MPIABI_INT, MPIABI_MIN, r->comm) != 0 || !everywhere) {
    if (r->rank == 0)
      mpic_log(0, "rank %d: no room for the node path of communicator %d (%s); its collectives use the MPI "
                  "library's own. Fix: a larger /dev/shm (docker run --shm-size), or MPI_COLLECTIVES_NODE_PATH=0 "
                  "to leave it off",
               mpic_record_world_rank(), r->id, room ? "another rank's /dev/shm is short" : why);
    if (across != MPIABI_COMM_NULL) mpic_next_Comm_free(&across);
    mpic_next_Comm_free(&shm);
    return;
  }
  MPIABI_Info info = MPIABI_INFO_NULL;
  if (mpic_next_Info_create(&info) == 0) mpic_next_Info_set(info, "alloc_shared_noncontig", "true");
  void *base = NULL;
  MPIABI_Win win = MPIABI_WIN_NULL;
  ret = mpic_next_Win_allocate_shared((MPIABI_Aint)MPIC_NODE_SHARE, 1, info, shm, &base, &win);
  if (info != MPIABI_INFO_NULL) mpic_next_Info_free(&info);
  int ok = ret == 0, all = 0;
  if (!ok) words(ret, why, sizeof why);
  /* Every rank learns whether every rank has its share: all use the window, or none. */
  if (mpic_next_Allreduce(&ok, &all, 1, MPIABI_INT, MPIABI_MIN, r->comm) != 0) all = 0;
  struct mpic_node *n = NULL;
  if (all) {
    n = calloc(1, sizeof *n);
    char **shares = calloc((size_t)size, sizeof *shares);
    for (int q = 0; n && shares && q < size; q++) {
      MPIABI_Aint bytes = 0;
      int unit = 0;
      if (mpic_next_Win_shared_query(win, q, &bytes, &unit, &shares[q]) != 0 || bytes < MPIC_NODE_SHARE) {
        free(shares);
        shares = NULL;
      }
    }
    if (!n || !shares)
      mpic_fatal("rank %d: could not map the node path's shared window of communicator %d. Fix: "
                 "MPI_COLLECTIVES_NODE_PATH=0",
                 mpic_record_world_rank(), r->id);
    *n = (struct mpic_node){shm, across, win, size, rank, shares, 0, r->id, r, NULL};
    pthread_mutex_lock(&windows_lock);
    n->next = windows;
    windows = n;
    pthread_mutex_unlock(&windows_lock);
    r->node = n;
    char which[128] = "";
    for (int i = 0; mpic_node_path_collectives_words[i]; i++)
      if (mpic_settings.node_path_collectives & (1 << i))
        snprintf(which + strlen(which), sizeof which - strlen(which), "%s%s", which[0] ? "," : "",
                 mpic_node_path_collectives_words[i]);
    if (across == MPIABI_COMM_NULL)
      mpic_log(2, "communicator %d: %d ranks on one node: %s from %d bytes through a shared window (%d KiB a rank; "
                  "up to %d bytes, 0: no limit)",
               r->id, r->size, which[0] ? which : "no collective", mpic_settings.node_path_min,
               MPIC_NODE_SHARE / 1024, mpic_settings.node_path_max);
    else
      mpic_log(2, "communicator %d: %d ranks, %d on each node: %s from %d bytes through each node's shared window "
                  "and the MPI library between nodes (%d KiB a rank; up to %d bytes, 0: no limit)",
               r->id, r->size, size,
               mpic_settings.node_path_collectives & MPIC_NODE_PATH_COLLECTIVES_ALL_REDUCE ? "all-reduce"
                                                                                            : "no collective",
               mpic_settings.node_path_min, MPIC_NODE_SHARE / 1024, mpic_settings.node_path_max);
    return;
  }
  /* Where it cannot be had (a small /dev/shm, a container): the library's own, and one line. */
  if (r->rank == 0 || !ok)
    mpic_log(0, "rank %d: no shared memory for the node path of communicator %d (%s); its collectives use the "
                "MPI library's own. Fix: a larger /dev/shm, or MPI_COLLECTIVES_NODE_PATH=0 to leave it off",
             mpic_record_world_rank(), r->id, ok ? "another rank's MPI_Win_allocate_shared failed" : why);
  if (ok) mpic_next_Win_free(&win);
  if (across != MPIABI_COMM_NULL) mpic_next_Comm_free(&across);
  mpic_next_Comm_free(&shm);
}

static void release(struct mpic_node *n) {
  mpic_next_Win_free(&n->win);
  if (n->across != MPIABI_COMM_NULL) mpic_next_Comm_free(&n->across);
  mpic_next_Comm_free(&n->shm);
  free(n->shares);
  free(n);
}

void mpic_node_detach(struct mpic_record *r) {
  if (!r || !r->node) return;
  struct mpic_node *n = r->node;
  r->node = NULL;
  pthread_mutex_lock(&windows_lock);
  for (struct mpic_node **p = &windows; *p; p = &(*p)->next)
    if (*p == n) {
      *p = n->next;
      break;
    }
  pthread_mutex_unlock(&windows_lock);
  release(n);
}

void mpic_node_finalize(void) {
  for (;;) {
    /* The oldest first: every rank frees the windows it shares with others in one order. */
    pthread_mutex_lock(&windows_lock);
    struct mpic_node **oldest = NULL;
    for (struct mpic_node **p = &windows; *p; p = &(*p)->next)
      if (!oldest || (*p)->id < (*oldest)->id) oldest = p;
    struct mpic_node *n = oldest ? *oldest : NULL;
    if (n) *oldest = n->next;
    pthread_mutex_unlock(&windows_lock);
    if (!n) return;
    n->record->node = NULL;
    release(n);
  }
}

int mpic_node_takes(const struct mpic_record *r, int collective, MPIABI_Datatype type, int64_t count) {
  /* the cheap questions first: most calls stop at them, before the library is asked the type's size */
  if (!r || !r->node || !(mpic_settings.node_path_collectives & collective) || count <= 0) return 0;
  /* over several nodes, the all-reduce alone is composed */
  if (r->node->across != MPIABI_COMM_NULL && collective != MPIC_NODE_PATH_COLLECTIVES_ALL_REDUCE) return 0;
  int esize = 0;
  if (mpic_next_Type_size(type, &esize) != 0 || esize <= 0) return 0;
  size_t bytes = (size_t)esize * (size_t)count;
  return bytes >= (size_t)mpic_settings.node_path_min &&
         (!mpic_settings.node_path_max || bytes <= (size_t)mpic_settings.node_path_max);
}

static void barrier(const struct mpic_node *n) {
  int ret = mpic_next_Barrier(n->shm);
  if (ret != 0) mpic_call_failed("MPI_Barrier (the node path's)", ret);
}

/* The half of every share the next chunk uses (see the top of this file). */
static size_t next_half(struct mpic_node *n) { return (n->turn++ & 1) * MPIC_NODE_CHUNK; }

static void reduce_local(const void *in, void *inout, int64_t count, MPIABI_Datatype type, MPIABI_Op op) {
  if (count <= 0) return;
  int ret = mpic_next_Reduce_local(in, inout, (int)count, type, op);
  if (ret != 0) mpic_call_failed("MPI_Reduce_local (the node path's)", ret);
}

/* The window of the record whose communicator is comm, and the size of one
 * element of type; NULL where the library's own call must run instead. */
static struct mpic_node *window_for(MPIABI_Comm comm, MPIABI_Datatype type, int *esize) {
  struct mpic_record *r = mpic_record_of(comm);
  struct mpic_node *n = r ? r->node : NULL;
  *esize = 0;
  if (!n || mpic_next_Type_size(type, esize) != 0 || *esize <= 0 || *esize > MPIC_NODE_CHUNK / n->size) return NULL;
  return n;
}

/* Where each of P parts of a buffer begins (at) and how long it is (counts),
 * in elements: calloc'd, freed by the caller. Not the library's call on
 * failure: the other ranks are already in the window's. */
static int64_t *parts_table(int64_t P, const char *what) {
  int64_t *t = calloc((size_t)(2 * P), sizeof *t);
  if (!t)
    mpic_fatal("rank %d: out of memory in %s through the node path. Fix: give the job more memory, or "
               "MPI_COLLECTIVES_NODE_PATH=0",
               mpic_record_world_rank(), what);
  return t;
}

static int64_t piece(int64_t count, int64_t first, int64_t most) {
  return count - first < most ? count - first : most;
}

/* An all-gather of parts (rank q's counts[q] elements go to at[q] in every
 * rank's result), chunk by chunk: each rank copies its next piece (at most
 * MPIC_NODE_CHUNK bytes) into its share, barrier, and every rank copies every
 * rank's piece into its place in the result. One barrier a chunk: a half is
 * written again two chunks later, after the barrier that follows every
 * rank's copy-out of it. Memory traffic per rank: its part once in, the
 * result once out, the floor of an all-gather. `in_place`: this rank's part
 * already lies at its place in `out` (then `in` is that place). */
static void gather_parts(struct mpic_node *n, const char *in, char *out, const int64_t *at, const int64_t *counts,
                         int esize, int in_place) {
  int64_t per_chunk = MPIC_NODE_CHUNK / esize, longest = 0;
  for (int q = 0; q < n->size; q++)
    if (counts[q] > longest) longest = counts[q];
  for (int64_t first = 0; first < longest; first += per_chunk) {
    size_t half = next_half(n);
    int64_t mine = piece(counts[n->rank], first, per_chunk);
    if (mine > 0) memcpy(n->shares[n->rank] + half, in + first * esize, (size_t)(mine * esize));
    barrier(n);
    for (int q = 0; q < n->size; q++) {
      int64_t count = piece(counts[q], first, per_chunk);
      if (count > 0 && (q != n->rank || !in_place))
        memcpy(out + (at[q] + first) * esize, n->shares[q] + half, (size_t)(count * esize));
    }
  }
}

/* A reduce-scatter of parts (every rank's input the concatenation of P
 * parts, part q counts[q] elements at at[q]; rank q's result, `out`, part q
 * reduced over the ranks), chunk by chunk along the parts: each rank copies
 * the next `per_part` elements of every part into its share, side by side,
 * barrier, and each rank reduces its own part's piece from every share
 * straight into its result, in one order (its own share first, then the
 * others from the next rank on). One barrier a chunk, as the all-gather.
 * `out` may be this rank's own part of `in`: each piece is read into the
 * share before its place is written. */
static void reduce_parts(struct mpic_node *n, const char *in, char *out, const int64_t *at, const int64_t *counts,
                         MPIABI_Datatype type, MPIABI_Op op, int esize) {
  int64_t P = n->size, longest = 0, per_part = MPIC_NODE_CHUNK / esize / P, mine = counts[n->rank];
  for (int q = 0; q < P; q++)
    if (counts[q] > longest) longest = counts[q];
  for (int64_t first = 0; first < longest; first += per_part) {
    size_t half = next_half(n);
    char *share = n->shares[n->rank] + half;
    for (int64_t q = 0; q < P; q++) {
      int64_t count = piece(counts[q], first, per_part);
      if (count > 0) memcpy(share + q * per_part * esize, in + (at[q] + first) * esize, (size_t)(count * esize));
    }
    barrier(n);
    int64_t count = piece(mine, first, per_part);
    if (count <= 0) continue;
    size_t from = (size_t)(n->rank * per_part * esize);
    memcpy(out + first * esize, share + from, (size_t)(count * esize));
    for (int k = 1; k < P; k++)
      reduce_local(n->shares[(n->rank + k) % P] + half + from, out + first * esize, count, type, op);
  }
}

/* An all-reduce over several nodes: the buffer in P parts (P ranks on each
 * node); a reduce-scatter within the node puts part q, reduced over the
 * node, in local rank q's result; the library all-reduces it among the
 * ranks holding part q on the other nodes (one call: the library pipelines
 * its own large messages, and the network carries a P-th of the buffer from
 * every rank at once); an all-gather within the node gives every rank every
 * part. Every node reduces each element in the same order, and every rank
 * of a node reads the same copy, so every rank gets the same bits. */
static int composed_allreduce(struct mpic_node *n, struct mpic_allreduce_args *a, int esize) {
  int64_t *at = parts_table(n->size, "an all-reduce"), *counts = at + n->size;
  for (int64_t q = 0; q < n->size; q++) {
    at[q] = (int64_t)a->count * q / n->size;
    counts[q] = (int64_t)a->count * (q + 1) / n->size - at[q];
  }
  char *out = a->recv, *mine = out + at[n->rank] * esize;
  reduce_parts(n, a->send == MPIABI_IN_PLACE ? out : a->send, mine, at, counts, a->type, a->op, esize);
  if (counts[n->rank] > 0) {
    int ret = mpic_next_Allreduce(MPIABI_IN_PLACE, mine, (int)counts[n->rank], a->type, a->op, n->across);
    if (ret != 0) mpic_call_failed("MPI_Allreduce (the node path's, between nodes)", ret);
  }
  gather_parts(n, mine, out, at, counts, esize, 1);
  free(at);
  return 0;
}

int mpic_node_call_allreduce(void *args) {
  struct mpic_allreduce_args *a = args;
  int esize = 0;
  struct mpic_node *n = window_for(a->comm, a->type, &esize);
  if (!n) return mpic_call_allreduce(args);
  if (n->across != MPIABI_COMM_NULL) return composed_allreduce(n, a, esize);
  const char *in = a->send == MPIABI_IN_PLACE ? a->recv : a->send;
  char *out = a->recv;
  int64_t per_chunk = MPIC_NODE_CHUNK / esize, P = n->size;
  for (int64_t first = 0; first < a->count; first += per_chunk) {
    int64_t count = a->count - first < per_chunk ? a->count - first : per_chunk;
    size_t half = next_half(n);
    memcpy(n->shares[n->rank] + half, in + first * esize, (size_t)(count * esize));
    barrier(n);
    int64_t lo = count * n->rank / P, hi = count * (n->rank + 1) / P;
    char *mine = n->shares[n->rank] + half + lo * esize;
    for (int k = 1; k < P; k++)
      reduce_local(n->shares[(n->rank + k) % P] + half + lo * esize, mine, hi - lo, a->type, a->op);
    barrier(n);
    for (int64_t q = 0; q < P; q++) {
      int64_t qlo = count * q / P, qhi = count * (q + 1) / P;
      memcpy(out + (first + qlo) * esize, n->shares[q] + half + qlo * esize, (size_t)((qhi - qlo) * esize));
    }
  }
  return 0;
}

int mpic_node_call_allgather(void *args) {
  struct mpic_allgather_args *a = args;
  int esize = 0;
  int same = a->send == MPIABI_IN_PLACE || (a->sendtype == a->recvtype && a->sendcount == a->recvcount);
  struct mpic_node *n = same ? window_for(a->comm, a->recvtype, &esize) : NULL;
  if (!n || n->across != MPIABI_COMM_NULL) return mpic_call_allgather(args);
  int64_t *at = parts_table(n->size, "an all-gather"), *counts = at + n->size;
  for (int q = 0; q < n->size; q++) {
    at[q] = (int64_t)q * a->recvcount;
    counts[q] = a->recvcount;
  }
  int in_place = a->send == MPIABI_IN_PLACE;
  char *out = a->recv;
  gather_parts(n, in_place ? out + at[n->rank] * esize : a->send, out, at, counts, esize, in_place);
  free(at);
  return 0;
}

int mpic_node_call_reduce_scatter(void *args) {
  struct mpic_reduce_scatter_args *a = args;
  int esize = 0;
  struct mpic_node *n = a->send == MPIABI_IN_PLACE ? NULL : window_for(a->comm, a->type, &esize);
  if (!n || n->across != MPIABI_COMM_NULL) return mpic_call_reduce_scatter(args);
  int64_t *at = parts_table(n->size, "a reduce-scatter"), *counts = at + n->size;
  for (int64_t q = 0, sum = 0; q < n->size; sum += a->counts[q], q++) {
    at[q] = sum;
    counts[q] = a->counts[q];
  }
  reduce_parts(n, a->send, a->recv, at, counts, a->type, a->op, esize);
  free(at);
  return 0;
}

/* XLA's all-to-all is one MPI_Sendrecv with each peer in turn: this rank
 * sends to `dest` and receives from `source`, which differ beyond 2 ranks.
 * Through the window, MPIC_NODE_CHUNK bytes at a time: copy the piece into
 * this rank's exchange slot; tell dest it is there, and learn from source
 * that its piece is (one message each way, carrying the sizes, so that
 * ranks that disagree about the transfer are named instead of reading the
 * wrong bytes); copy source's piece out of its slot; tell source it has been
 * read, and learn from dest that this rank's slot may be written again.
 * The messages go on the window's own communicator (the same ranks), so
 * they never meet XLA's own; a rank waits in MPI_Sendrecv, where the stall
 * report and the peer watch find it. */
enum { READY_TAG = 1, READ_TAG = 2 };

int mpic_node_takes_sendrecv(const struct mpic_record *r, int sendcount, MPIABI_Datatype sendtype, int dest,
                             int recvcount, MPIABI_Datatype recvtype, int source) {
  if (!r || !r->node || sendcount != recvcount || sendtype != recvtype || sendcount <= 0) return 0;
  if (dest < 0 || dest >= r->size || source < 0 || source >= r->size || dest == r->rank || source == r->rank)
    return 0; /* MPI_PROC_NULL, or itself: the library's own */
  /* the all-to-all's whole buffer, as the other collectives count theirs */
  return mpic_node_takes(r, MPIC_NODE_PATH_COLLECTIVES_ALL_TO_ALL, sendtype, (int64_t)sendcount * r->size);
}

int mpic_node_sendrecv(struct mpic_record *r, const void *sendbuf, int count, MPIABI_Datatype type, int dest,
                       void *recvbuf, int source, int recvtag, MPIABI_Status *status) {
  struct mpic_node *n = r->node;
  int esize = 0, ret = mpic_next_Type_size(type, &esize);
  if (ret != 0) mpic_call_failed("MPI_Type_size (the node path's)", ret);
  /* bytes relayed as they are: a piece need not end on an element */
  int64_t total = (int64_t)esize * count, per_chunk = MPIC_NODE_CHUNK;
  char *mine = n->shares[n->rank] + 2 * MPIC_NODE_CHUNK;
  const char *theirs = n->shares[source] + 2 * MPIC_NODE_CHUNK;
  for (int64_t first = 0; first < total; first += per_chunk) {
    size_t bytes = (size_t)(total - first < per_chunk ? total - first : per_chunk);
    memcpy(mine, (const char *)sendbuf + first, bytes);
    long long sending = total, coming = -1;
    ret = mpic_next_Sendrecv(&sending, 1, MPIABI_LONG_LONG, dest, READY_TAG, &coming, 1, MPIABI_LONG_LONG, source,
                             READY_TAG, n->shm, MPIABI_STATUS_IGNORE);
    if (ret != 0) mpic_call_failed("MPI_Sendrecv (the node path's)", ret);
    if (coming != total)
      mpic_fatal("rank %d: an all-to-all expected %lld bytes from rank %d of XLA's communicator but that rank sends "
                 "%lld: the ranks disagree about the transfer's size. No result was returned. Fix: make every rank "
                 "run the same collectives with the same shapes",
                 mpic_record_world_rank(), (long long)total, source, coming);
    memcpy((char *)recvbuf + first, theirs, bytes);
    ret = mpic_next_Sendrecv(NULL, 0, MPIABI_BYTE, source, READ_TAG, NULL, 0, MPIABI_BYTE, dest, READ_TAG, n->shm,
                             MPIABI_STATUS_IGNORE);
    if (ret != 0) mpic_call_failed("MPI_Sendrecv (the node path's)", ret);
  }
  if (status && status != MPIABI_STATUS_IGNORE) { /* as the library's would read: all of it, from source */
    status->MPI_SOURCE = source;
    status->MPI_TAG = recvtag;
    status->MPI_ERROR = 0;
    mpic_next_Status_set_elements(status, type, count);
  }
  return 0;
}

/* Reading a peer's buffer in place (internal.h): Linux cross-memory attach
 * (process_vm_readv), so that a byte moves between two ranks of a node in
 * one copy, where the window moves it in two (into the sender's share, out
 * of it). Open MPI's smsc/cma and MPICH's CMA transfers do the same for
 * large messages.
 *
 * Whether it works is decided once per window, when it is made, by every
 * rank of it (mpic_node_direct_probe: each rank reads a word of every peer;
 * one MIN all-reduce): the kernel may forbid it (Yama's ptrace_scope 2 or 3,
 * a seccomp profile, a container without the capability), and then the
 * window's copies stay. Under Yama's ptrace_scope 1 a process may read
 * another only where that one named it, so each rank allows every process of
 * its user to (prctl PR_SET_PTRACER_ANY), as MPI libraries do for the same
 * transfers; MPI_COLLECTIVES_NODE_PATH_DIRECT=0 leaves that, and this file,
 * unused (docs/security.md).
 *
 * Each call publishes, beside its stamp (turns.c), the addresses of its
 * buffers; peers read them after the stamp's check, and a last
 * synchronisation keeps every buffer in place until no peer reads it. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>
#include "call_failed.h"
#include "end_job.h"
#include "internal.h"
#include "log.h"
#include "settings.h"

/* ---- the probe ---- */
static const uint64_t probe_word = 0x6d7069632d636d61ull; /* what a peer must read at this address */

struct probe {
  int64_t pid;
  uint64_t at;
};

static int yama_scope(void) {
  FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  int scope = 0;
  if (f) {
    if (fscanf(f, "%d", &scope) != 1) scope = 0;
    fclose(f);
  }
  return scope;
}

/* Bytes from `from` in process pid into `to`, whole: 0, or errno. */
static int read_peer(int pid, void *to, uint64_t from, size_t bytes) {
  while (bytes > 0) {
    struct iovec local = {to, bytes}, remote = {(void *)(uintptr_t)from, bytes};
    ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return got < 0 ? errno : EIO;
    to = (char *)to + got, from += (uint64_t)got, bytes -= (size_t)got;
  }
  return 0;
}

int mpic_node_direct_probe(struct mpic_node *n) {
  int mine = mpic_settings.node_path_direct != 0, all = 0;
  if (mine && yama_scope() == 1) mine = prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) == 0;
  struct probe *own = (struct probe *)(n->shares[n->rank] + MPIC_NODE_PROBE_AT);
  *own = (struct probe){getpid(), (uint64_t)(uintptr_t)&probe_word};
  mpic_turn_sync(n);
  int failed_errno = 0;
  for (int q = 0; mine && q < n->size; q++) {
    if (q == n->rank) continue;
    const struct probe *theirs = (const struct probe *)(n->shares[q] + MPIC_NODE_PROBE_AT);
    uint64_t word = 0;
    failed_errno = read_peer((int)theirs->pid, &word, theirs->at, sizeof word);
    mine = !failed_errno && word == probe_word;
    n->pids[q] = (int)theirs->pid;
  }
  int ret = mpic_next_Allreduce(&mine, &all, 1, MPIABI_INT, MPIABI_MIN, n->shm);
  if (ret != 0) mpic_call_failed("MPI_Allreduce (the node path's)", ret);
  if (all && !(n->tmp = malloc(MPIC_NODE_CHUNK))) all = 0; /* the reduction's staging, cache-sized */
  if (n->rank == 0 || failed_errno)
    mpic_log(2, "communicator %d: its ranks on this node %s each other's buffers in place (cross-memory attach)%s%s",
             n->record_id, all ? "read" : "do not read",
             mpic_settings.node_path_direct ? "" : ": MPI_COLLECTIVES_NODE_PATH_DIRECT=0",
             failed_errno ? (failed_errno == EPERM ? ": the kernel does not allow it here (EPERM: Yama's "
                                                    "ptrace_scope, seccomp or the container)"
                                                  : ": the kernel's process_vm_readv failed")
                          : "");
  return all;
}

/* ---- the buffers' addresses, beside the stamp ---- */
struct where {
  uint64_t in, out;
};

static struct where *where_of(const struct mpic_node *n, int q, size_t half) {
  return (struct where *)(mpic_turn_line(n, q, half) + MPIC_NODE_WHERE_AT);
}

/* One turn: this rank's stamp and buffers published, every peer's stamp checked. */
static size_t publish(struct mpic_node *n, const void *in, const void *out) {
  size_t half = mpic_turn_begin(n, 0);
  *where_of(n, n->rank, half) = (struct where){(uint64_t)(uintptr_t)in, (uint64_t)(uintptr_t)out};
  mpic_turn_publish(n, half);
  return half;
}

void mpic_node_read_peer(struct mpic_node *n, int q, void *to, uint64_t from, size_t bytes) {
  int err = read_peer(n->pids[q], to, from, bytes);
  /* most often the peer died (ESRCH) a moment before the peer watch names it: its sentence first */
  if (err) mpic_end_if_a_peer_died("read of a peer's buffer in the node path");
  if (err)
    mpic_fatal("rank %d: reading rank %d's buffer in the node path (cross-memory attach) failed: %s. No result "
               "was returned. Fix: MPI_COLLECTIVES_NODE_PATH_DIRECT=0 (copies through the window)",
               n->world[n->rank], n->world[q], strerror(err));
}

/* This rank's slice of a reduction: `count` elements of its own input at `mine` (NULL where the result
 * already holds them: in place) and of every peer's at that peer's address `at[q]`, reduced into `out`.
 * A staging piece at a time, every peer's piece reduced into the result's piece before the next, so that
 * the result's piece stays in the cache across the peers instead of crossing memory once per peer. The
 * order for an element: its own rank's input, then the next ranks' (one order, on one rank). */
#define STAGE (256 * 1024)
static void reduce_slice(struct mpic_node *n, const char *mine, const uint64_t *at, char *out, int64_t count,
                         int esize, MPIABI_Datatype type, MPIABI_Op op) {
  int64_t per = STAGE / esize;
  for (int64_t first = 0; first < count; first += per) {
    int64_t k = mpic_node_piece(count, first, per);
    size_t off = (size_t)(first * esize), bytes = (size_t)(k * esize);
    if (mine) memmove(out + off, mine + off, bytes);
    for (int j = 1; j < n->size; j++) {
      int q = (n->rank + j) % n->size;
      mpic_node_read_peer(n, q, n->tmp, at[q] + off, bytes);
      mpic_node_reduce_local(n->tmp, out + off, k, type, op);
    }
  }
}

/* ---- the collectives ----
 * All-reduce: rank q reduces slice q (a P-th, on element boundaries) of every rank's input into its own
 * result, its own input first and then every other rank's in one order (each element reduced once, by one
 * rank, in one order: the same bits everywhere); a synchronisation; then each rank reads every other slice
 * from its owner's result. Per rank about twice the buffer crosses between ranks, once each way: the window
 * path's copy into the share is gone. In place, a rank's input is its result: the slices other ranks read
 * are never the one it writes. */
int mpic_node_direct_allreduce(struct mpic_node *n, struct mpic_allreduce_args *a, int esize) {
  int in_place = a->send == MPIABI_IN_PLACE;
  const char *in = in_place ? a->recv : a->send;
  char *out = a->recv;
  int64_t P = n->size, lo = a->count * n->rank / P, hi = a->count * (n->rank + 1) / P;
  size_t half = publish(n, in, out);
  uint64_t *at = (uint64_t *)mpic_node_parts(P, "an all-reduce");
  for (int q = 0; q < P; q++) at[q] = where_of(n, q, half)->in + (uint64_t)(lo * esize);
  reduce_slice(n, in_place ? NULL : in + lo * esize, at, out + lo * esize, hi - lo, esize, a->type, a->op);
  free(at);
  mpic_turn_sync(n); /* every slice reduced */
  for (int q = 0; q < P; q++) {
    int64_t qlo = a->count * q / P, qhi = a->count * (q + 1) / P;
    if (q != n->rank && qhi > qlo)
      mpic_node_read_peer(n, q, out + qlo * esize, where_of(n, q, half)->out + (uint64_t)(qlo * esize),
                (size_t)((qhi - qlo) * esize));
  }
  mpic_turn_sync(n); /* every rank done reading: the buffers may change */
  return 0;
}

/* All-gather: each rank reads every other rank's part straight into its place in the result. */
int mpic_node_direct_allgather(struct mpic_node *n, struct mpic_allgather_args *a, int esize) {
  int in_place = a->send == MPIABI_IN_PLACE;
  size_t part = (size_t)a->recvcount * (size_t)esize;
  char *out = a->recv;
  const char *in = in_place ? out + part * (size_t)n->rank : a->send;
  size_t half = publish(n, in, out);
  if (!in_place) memcpy(out + part * (size_t)n->rank, in, part);
  for (int q = 0; q < n->size; q++)
    if (q != n->rank) mpic_node_read_peer(n, q, out + part * (size_t)q, where_of(n, q, half)->in, part);
  mpic_turn_sync(n);
  return 0;
}

/* Reduce-scatter: rank q reduces part q of every rank's input into its result, its own first. */
int mpic_node_direct_reduce_scatter(struct mpic_node *n, struct mpic_reduce_scatter_args *a, int esize) {
  int64_t at = 0, P = n->size;
  for (int q = 0; q < n->rank; q++) at += a->counts[q];
  int64_t count = a->counts[n->rank];
  const char *in = a->send;
  size_t half = publish(n, in, a->recv);
  uint64_t *from = (uint64_t *)mpic_node_parts(P, "a reduce-scatter");
  for (int q = 0; q < P; q++) from[q] = where_of(n, q, half)->in + (uint64_t)(at * esize);
  /* the result may be this rank's own part of the input (then its piece is copied onto itself) */
  reduce_slice(n, (const char *)in + at * esize == (const char *)a->recv ? NULL : in + at * esize, from, a->recv,
               count, esize, a->type, a->op);
  free(from);
  mpic_turn_sync(n);
  return 0;
}

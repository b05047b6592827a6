/* The chunks' turns (internal.h): the one protocol every collective of the
 * path follows for its chunks, and the one file that knows their memory model.
 *
 * A chunk uses one of the two halves of every rank's share, in turn: a half
 * is written again two chunks later, only after a barrier that every rank
 * enters after its last reading of it. Each rank writes a stamp with its
 * chunk (the call's number on the window, the chunk's index, its signature, the
 * count, the shape) and, once the chunk is published, reads every peer's:
 * ranks that disagree about a call (the agreement check off and counts that
 * differ, a permuted reduce-scatter, another collective) stop at its first
 * chunk, naming both calls, instead of pairing later barriers wrongly and
 * returning wrong numbers from later, correct calls. Open MPI's coll/xhc
 * keeps per-member sequence flags for the same reason.
 *
 * The chunks' memory model, as MPI states it (round.c's one round synchronises
 * its own buffers with sequence numbers, and says why): the window is in a passive-target
 * epoch for its whole life (MPI_Win_lock_all at attach, window.c), each
 * synchronisation is MPI_Win_sync, MPI_Barrier, MPI_Win_sync (MPI-4.0
 * 12.5.4 and 12.7: a barrier alone orders nothing for loads and stores to a
 * shared window), and the window is in the unified model (window.c checks).
 * A rank waits in MPI_Barrier, where the stall report, the peer watch and
 * SIGTERM find it. */
#include "call_failed.h"
#include "end_job.h"
#include "internal.h"
#include "signature.h"

/* What a chunk's stamp names: the call's number on the window, the chunk's
 * index, the call's signature (signature.h: its kind, operation, datatype;
 * the count alone is not enough: sum against max, or float against int32,
 * with the same count would otherwise pair up), its exact count, and the
 * shape of a reduce-scatter's parts. */
struct stamp {
  uint64_t call;
  int64_t chunk, count;
  uint64_t shape, sig;
};
_Static_assert(sizeof(struct stamp) <= MPIC_NODE_WHERE_AT, "the stamp ends where direct.c's addresses begin");

char *mpic_turn_line(const struct mpic_node *n, int q, size_t half) {
  return n->shares[q] + (half == MPIC_NODE_STAMPS ? 0 : MPIC_NODE_STAMP_STRIDE);
}

static struct stamp *stamp_of(const struct mpic_node *n, int q, size_t half) {
  return (struct stamp *)mpic_turn_line(n, q, half);
}

void mpic_node_two_threads(int world_rank, int record_id) {
  mpic_fatal("rank %d: a collective started on communicator %d while its previous one was still running in the "
             "node path (collectives dispatched from two threads at once). No result was returned. Fix: dispatch "
             "collectives from one thread",
             world_rank, record_id);
}

void mpic_turns_enter(struct mpic_node *n, uint64_t sig, int64_t count, uint64_t shape, int collective) {
  if (__atomic_exchange_n(&n->busy, 1, __ATOMIC_ACQUIRE)) mpic_node_two_threads(n->world[n->rank], n->record_id);
  /* the number every member gives this call: collectives only (an exchange between two ranks counted
   * here made the next collective's stamps differ on the others: issue 71) */
  if (collective) n->calls++;
  n->sig = sig;
  n->count = count;
  n->shape = shape;
}

void mpic_turns_leave(struct mpic_node *n) { __atomic_store_n(&n->busy, 0, __ATOMIC_RELEASE); }

void mpic_turn_fence(struct mpic_node *n) {
  int ret = mpic_next_Win_sync(n->win);
  if (ret != 0) mpic_call_failed("MPI_Win_sync (the node path's)", ret);
}

void mpic_turn_sync(struct mpic_node *n) {
  mpic_turn_fence(n); /* this rank's stores, before the others may read them */
  int ret = mpic_next_Barrier(n->shm);
  if (ret != 0) mpic_call_failed("MPI_Barrier (the node path's)", ret);
  mpic_turn_fence(n); /* the others' stores, before this rank reads them */
}

size_t mpic_turn_begin(struct mpic_node *n, int64_t chunk) {
  size_t half = MPIC_NODE_STAMPS + (n->turn++ & 1) * MPIC_NODE_CHUNK;
  *stamp_of(n, n->rank, half) = (struct stamp){n->calls, chunk, n->count, n->shape, n->sig};
  return half;
}

static int same(const struct stamp *a, const struct stamp *b) {
  return a->call == b->call && a->chunk == b->chunk && a->count == b->count && a->shape == b->shape &&
         a->sig == b->sig;
}

static void words(const struct stamp *s, char *out, size_t len) {
  mpic_call_words(s->sig, (unsigned long long)s->call, (long long)s->count, out, len);
}

void mpic_turn_publish(struct mpic_node *n, size_t half) {
  mpic_turn_sync(n);
  const struct stamp *mine = stamp_of(n, n->rank, half);
  for (int q = 0; q < n->size; q++) {
    const struct stamp *theirs = stamp_of(n, q, half);
    if (q == n->rank || same(theirs, mine)) continue;
    char a[160], b[160];
    words(mine, a, sizeof a);
    words(theirs, b, sizeof b);
    mpic_fatal("rank %d: the ranks called different collectives on communicator %d: this rank's %s met rank %d's "
               "%s%s in the node path (chunk %lld). No result was returned. Fix: make every rank run the same "
               "collectives with the same shapes, from one thread (MPI_COLLECTIVES_CHECK_COLLECTIVES=1, the "
               "default, names such a call before it starts)",
               n->world[n->rank], n->record_id, a, n->world[q], b,
               theirs->shape != mine->shape ? " in parts of other sizes" : "", (long long)mine->chunk);
  }
}

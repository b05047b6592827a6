/* The all-reduce through the window, on one node (internal.h); over several
 * nodes, across.c composes it.
 *
 * Chunk by chunk (at most MPIC_NODE_CHUNK bytes each):
 *   1. each rank copies its chunk of the input into its share; publish;
 *   2. each rank reduces its own slice of the chunk (a P-th, on element
 *      boundaries) from every other rank's share into its own, with
 *      MPI_Reduce_local (the library's own arithmetic); synchronise;
 *   3. each rank copies every slice of the result from its owner's share.
 * Each element is reduced once, by one rank, in one order, so every rank
 * gets the same bits (which may differ from the library's: another order of
 * the sum; docs/design.md, "The node's own data path"). Memory traffic per rank is about three times
 * the buffer, spread over all ranks at once; the library's own protocols on
 * MPICH and Open MPI copy through fixed cells several times over. */
#include <string.h>
#include "internal.h"

int mpic_node_allreduce(struct mpic_node *n, struct mpic_allreduce_args *a, int esize) {
  if (n->across != MPIABI_COMM_NULL) return mpic_node_composed_allreduce(n, a, esize);
  const char *in = a->send == MPIABI_IN_PLACE ? a->recv : a->send;
  char *out = a->recv;
  int64_t per_chunk = MPIC_NODE_CHUNK / esize, P = n->size;
  for (int64_t first = 0, chunk = 0; first < a->count; first += per_chunk, chunk++) {
    int64_t count = a->count - first < per_chunk ? a->count - first : per_chunk;
    size_t half = mpic_turn_begin(n, chunk);
    memcpy(n->shares[n->rank] + half, in + first * esize, (size_t)(count * esize));
    mpic_turn_publish(n, half);
    int64_t lo = mpic_node_slice_at(count, n->rank, P), hi = mpic_node_slice_at(count, n->rank + 1, P);
    char *mine = n->shares[n->rank] + half + lo * esize;
    for (int k = 1; k < P; k++)
      mpic_node_reduce_local(n->shares[(n->rank + k) % P] + half + lo * esize, mine, hi - lo, a->type, a->op);
    mpic_turn_sync(n);
    for (int64_t q = 0; q < P; q++) {
      int64_t qlo = mpic_node_slice_at(count, q, P), qhi = mpic_node_slice_at(count, q + 1, P);
      memcpy(out + (first + qlo) * esize, n->shares[q] + half + qlo * esize, (size_t)((qhi - qlo) * esize));
    }
  }
  return 0;
}

/* The reduce-scatter through the window, and the reduce loop the composed
 * all-reduce shares (internal.h). */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* Every rank's input is the concatenation of P parts (part q: counts[q]
 * elements at at[q]); rank q's result, `out`, is part q reduced over the
 * ranks. Chunk by chunk along the parts: each rank copies the next
 * `per_part` elements of every part into its share, side by side,
 * publishes, and reduces its own part's piece from every share straight into
 * its result, in one order (its own share first, then the others from the
 * next rank on: the path takes commutative operations only, policy.c). One
 * synchronisation a chunk. `out` may be this rank's own part of `in`: each
 * piece is read into the share before its place is written. */
void mpic_node_reduce_parts(struct mpic_node *n, const char *in, char *out, const int64_t *at, const int64_t *counts,
                            MPIABI_Datatype type, MPIABI_Op op, int esize) {
  int64_t P = n->size, longest = 0, per_part = MPIC_NODE_CHUNK / esize / P, mine = counts[n->rank];
  for (int q = 0; q < P; q++)
    if (counts[q] > longest) longest = counts[q];
  for (int64_t first = 0, chunk = 0; first < longest; first += per_part, chunk++) {
    size_t half = mpic_turn_begin(n, chunk);
    char *share = n->shares[n->rank] + half;
    for (int64_t q = 0; q < P; q++) {
      int64_t count = mpic_node_piece(counts[q], first, per_part);
      if (count > 0) memcpy(share + q * per_part * esize, in + (at[q] + first) * esize, (size_t)(count * esize));
    }
    mpic_turn_publish(n, half);
    int64_t count = mpic_node_piece(mine, first, per_part);
    if (count <= 0) continue; /* after the publication: every rank makes every chunk's */
    size_t from = (size_t)(n->rank * per_part * esize);
    memcpy(out + first * esize, share + from, (size_t)(count * esize));
    for (int k = 1; k < P; k++)
      mpic_node_reduce_local(n->shares[(n->rank + k) % P] + half + from, out + first * esize, count, type, op);
  }
}

int mpic_node_reduce_scatter(struct mpic_node *n, struct mpic_reduce_scatter_args *a, int esize) {
  int64_t *at = mpic_node_parts(n->size, "a reduce-scatter"), *counts = at + n->size;
  for (int64_t q = 0, sum = 0; q < n->size; sum += a->counts[q], q++) {
    at[q] = sum;
    counts[q] = a->counts[q];
  }
  mpic_node_reduce_parts(n, a->send, a->recv, at, counts, a->type, a->op, esize);
  free(at);
  return 0;
}

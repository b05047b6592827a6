/* The all-gather through the window, and the gather loop the composed
 * all-reduce shares (internal.h). */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* Rank q's counts[q] elements go to at[q] in every rank's result, chunk by
 * chunk: each rank copies its next piece (at most MPIC_NODE_CHUNK bytes)
 * into its share, publishes, and copies every rank's piece into its place in
 * the result. One synchronisation a chunk (turns.c). Memory traffic per
 * rank: its part once in, the result once out, an all-gather's floor.
 * `in_place`: this rank's part already lies at its place in `out` (then
 * `in` is that place). */
void mpic_node_gather_parts(struct mpic_node *n, const char *in, char *out, const int64_t *at, const int64_t *counts,
                            int esize, int in_place) {
  int64_t per_chunk = MPIC_NODE_CHUNK / esize, longest = 0;
  for (int q = 0; q < n->size; q++)
    if (counts[q] > longest) longest = counts[q];
  for (int64_t first = 0, chunk = 0; first < longest; first += per_chunk, chunk++) {
    size_t half = mpic_turn_begin(n, chunk);
    int64_t mine = mpic_node_piece(counts[n->rank], first, per_chunk);
    if (mine > 0) memcpy(n->shares[n->rank] + half, in + first * esize, (size_t)(mine * esize));
    mpic_turn_publish(n, half);
    for (int q = 0; q < n->size; q++) {
      int64_t count = mpic_node_piece(counts[q], first, per_chunk);
      if (count > 0 && (q != n->rank || !in_place))
        memcpy(out + (at[q] + first) * esize, n->shares[q] + half, (size_t)(count * esize));
    }
  }
}

int mpic_node_allgather(struct mpic_node *n, struct mpic_allgather_args *a, int esize) {
  int64_t *at = mpic_node_parts(n->size, "an all-gather"), *counts = at + n->size;
  for (int q = 0; q < n->size; q++) {
    at[q] = (int64_t)q * a->recvcount;
    counts[q] = a->recvcount;
  }
  int in_place = a->send == MPIABI_IN_PLACE;
  char *out = a->recv;
  mpic_node_gather_parts(n, in_place ? out + at[n->rank] * esize : a->send, out, at, counts, esize, in_place);
  free(at);
  return 0;
}

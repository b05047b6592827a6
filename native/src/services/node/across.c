/* A communicator over several nodes (MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1,
 * every node holding as many of its ranks, two or more): each node has its
 * own window, and an all-reduce is composed. The other collectives keep the
 * library's there (policy.c). */
#include <stdlib.h>
#include "call_failed.h"
#include "internal.h"
#include "log.h"

MPIABI_Comm mpic_node_across(const struct mpic_record *r, int shm_size, int shm_rank) {
  int counts[2] = {shm_size, -shm_size}, seen[2] = {0, 0}; /* the fewest and the most on a node */
  int ret = mpic_next_Allreduce(counts, seen, 2, MPIABI_INT, MPIABI_MIN, r->comm);
  if (ret != 0) mpic_call_failed("MPI_Allreduce (the node path's)", ret);
  if (seen[0] < 2 || seen[0] != -seen[1]) {
    mpic_log(2, "communicator %d: its %d ranks span nodes with %d to %d on each: the MPI library's own collectives "
                "(the node path composes only where every node holds as many, two or more)",
             r->id, r->size, seen[0], -seen[1]);
    return MPIABI_COMM_NULL;
  }
  MPIABI_Comm across = MPIABI_COMM_NULL;
  ret = mpic_next_Comm_split(r->comm, shm_rank, r->rank, &across);
  if (ret != 0) mpic_call_failed("MPI_Comm_split (the node path's)", ret);
  mpic_next_Comm_set_errhandler(across, MPIABI_ERRORS_RETURN);
  return across;
}

/* The buffer in P parts (P ranks on each node); a reduce-scatter within the
 * node puts part q, reduced over the node, in local rank q's result; the
 * library all-reduces it among the ranks holding part q on the other nodes
 * (one call: the library pipelines its own large messages, and the network
 * carries a P-th of the buffer from every rank at once); an all-gather
 * within the node gives every rank every part. Every node reduces each
 * element in the same order, and every rank of a node reads the same copy,
 * so every rank gets the same bits. */
int mpic_node_composed_allreduce(struct mpic_node *n, struct mpic_allreduce_args *a, int esize) {
  int64_t *at = mpic_node_parts(n->size, "an all-reduce"), *counts = at + n->size;
  for (int64_t q = 0; q < n->size; q++) {
    at[q] = mpic_node_slice_at(a->count, q, n->size);
    counts[q] = mpic_node_slice_at(a->count, q + 1, n->size) - at[q];
  }
  char *out = a->recv, *mine = out + at[n->rank] * esize;
  mpic_node_reduce_parts(n, a->send == MPIABI_IN_PLACE ? out : a->send, mine, at, counts, a->type, a->op, esize);
  if (counts[n->rank] > 0) {
    int ret = mpic_next_Allreduce(MPIABI_IN_PLACE, mine, (int)counts[n->rank], a->type, a->op, n->across);
    if (ret != 0) mpic_call_failed("MPI_Allreduce (the node path's, between nodes)", ret);
  }
  mpic_node_gather_parts(n, mine, out, at, counts, esize, 1);
  free(at);
  return 0;
}

/* What this process's collectives cost in counts (counts.c): how many calls
 * the wrapper made of its own beside XLA's, how much the node path read of
 * its peers. Counts, not times: they do not move with the machine's load, so
 * the scale bench (mpi_collectives/tools/bench/scale.py) states each cost's
 * growth with the ranks from them. One relaxed atomic add an event. */
#ifndef MPI_COLLECTIVES_COUNTS_H
#define MPI_COLLECTIVES_COUNTS_H

#include <stdint.h>

enum mpic_count {
  MPIC_COUNT_COLLECTIVES,       /* XLA's collectives on its communicators (the dispatcher's calls) */
  MPIC_COUNT_CHECKS,            /* agreement checks through the library: one all-reduce each */
  MPIC_COUNT_CHECK_BYTES,       /* their blocks' bytes */
  MPIC_COUNT_CARRIED,           /* collectives whose data rode in the check's block (no call of their own) */
  MPIC_COUNT_ROUNDS,            /* checks through the node path's round instead */
  MPIC_COUNT_ROUND_SLOTS,       /* peers' slots read in those rounds (P - 1 a round) */
  MPIC_COUNT_ROUNDS_DONE,       /* collectives whose data rode in the round */
  MPIC_COUNT_LIBRARY_CALLS,     /* collectives run by the library itself */
  MPIC_COUNT_NODE_RUNS,         /* collectives run by the node path's window */
  MPIC_COUNT_PEER_READS,        /* process_vm_readv calls of the reads in place */
  MPIC_COUNT_PEER_READ_BYTES,   /* their bytes */
  MPIC_COUNTS
};

void mpic_count_add(enum mpic_count which, uint64_t n);
/* The counts, in enum order, into out[0..max); the number of counts there are. */
int mpic_counts_read(long long *out, int max);
/* The name of count `which` ("" past the last). */
const char *mpic_count_name(int which);

#endif

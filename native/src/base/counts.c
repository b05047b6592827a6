/* The counts (counts.h). Relaxed adds: the counts are read once a measured
 * loop is over, by the thread that ran it or after a join, never to order
 * anything. */
#include "counts.h"

static uint64_t counts[MPIC_COUNTS];

void mpic_count_add(enum mpic_count which, uint64_t n) { __atomic_add_fetch(&counts[which], n, __ATOMIC_RELAXED); }

int mpic_counts_read(long long *out, int max) {
  for (int i = 0; i < MPIC_COUNTS && i < max; i++) out[i] = (long long)__atomic_load_n(&counts[i], __ATOMIC_RELAXED);
  return MPIC_COUNTS;
}

const char *mpic_count_names(void) {
  return "collectives,checks,check_bytes,carried,rounds,round_slots,rounds_done,library_calls,node_runs,"
         "peer_reads,peer_read_bytes";
}

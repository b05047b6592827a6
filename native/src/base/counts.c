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

/* Each count's name, by its enum value: the order lives in counts.h alone. */
static const char *const names[MPIC_COUNTS] = {
    [MPIC_COUNT_COLLECTIVES] = "collectives",       [MPIC_COUNT_CHECKS] = "checks",
    [MPIC_COUNT_CHECK_BYTES] = "check_bytes",       [MPIC_COUNT_CARRIED] = "carried",
    [MPIC_COUNT_ROUNDS] = "rounds",                 [MPIC_COUNT_ROUND_SLOTS] = "round_slots",
    [MPIC_COUNT_ROUNDS_DONE] = "rounds_done",       [MPIC_COUNT_LIBRARY_CALLS] = "library_calls",
    [MPIC_COUNT_NODE_RUNS] = "node_runs",           [MPIC_COUNT_PEER_READS] = "peer_reads",
    [MPIC_COUNT_PEER_READ_BYTES] = "peer_read_bytes",
};

const char *mpic_count_name(int which) { return which >= 0 && which < MPIC_COUNTS ? names[which] : ""; }

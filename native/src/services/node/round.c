/* The one round (node.h): a checked collective's signature, and its data
 * where they fit, through the window in one round of per-rank sequence
 * numbers, with no library call and no barrier.
 *
 * Why: with the checks on, a collective was two library calls (the check's
 * block, then the data) or one with the data in the block; a library's
 * small all-reduce on one node is itself a few rounds through its own
 * shared-memory cells. Here each rank writes a line of words (the round's
 * number, the call's signature, its phase, where its data go) and its data
 * into its own buffer, publishes the number, and reads every peer's: one
 * round, in which the check costs a comparison. Open MPI's coll/xhc keeps
 * per-member sequence flags for its small messages in the same way.
 *
 * Two buffers a rank, used in turn: round k writes buffer k % 2. A rank
 * starts round k only after it has read every peer's round k - 1, so every
 * peer has finished round k - 2, whose buffer round k writes: no second
 * synchronisation is needed.
 *
 * The memory model: a rank's words and data are stores to its own share,
 * published by a release store of the round's number; a peer's are read
 * after an acquire load of it. The window is shared memory in the unified
 * model (window.c checks), and the C11 atomics used are lock-free on every
 * Linux target, so address-free across processes (C11 7.17.5); MPICH's and
 * Open MPI's own shared-memory collectives synchronise their cells the same
 * way. turns.c's MPI_Win_sync and MPI_Barrier stay for the chunks.
 *
 * A rank waits spinning, then yielding its core (ranks may outnumber
 * cores), then sleeping in short steps, driving the library's progress as
 * it goes (progress(), as those collectives call their progress engines); the stall report, the peer watch
 * and SIGTERM find it there as they find one in the library (each is a
 * thread or a handler of its own), and a peer that reached MPI_Finalize
 * instead is named here. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "counts.h"
#include "end_job.h"
#include "flight.h"
#include "internal.h"
#include "node.h"
#include "signature.h"
#include "test_hooks.h"
#include "waits.h"

/* A rank's words for a round, in the first cache line of its buffer; data of at most INLINE bytes
 * follow them in that line (a scalar psum's: the peers' one load of the line brings them), larger
 * data begin at the next line. */
struct head {
  uint64_t number; /* the round's number on the window: stored last (release), loaded first (acquire) */
  uint64_t sig, shape;
  int64_t phase;
  uint32_t at, bytes; /* the data carried: where this rank's part lands in the result, its bytes; 0: none */
  int32_t world, unused;
};
#define INLINE 16
_Static_assert(sizeof(struct head) + INLINE == 64, "the words and a scalar's data fill one cache line");
_Static_assert(MPIC_NODE_ROUND_MOST <= UINT32_MAX, "a round's bytes fit the words");
_Static_assert(MPIC_NODE_ROUND_STOP_AT >= MPIC_NODE_PROBE_AT + 64 && MPIC_NODE_ROUND_STOP_AT + 8 <= MPIC_NODE_STAMPS,
               "the stop word has a line of its own in the page");

static char *buffer(const struct mpic_node *n, int q, uint64_t number) {
  return n->shares[q] + n->round_at + (number & 1) * MPIC_NODE_ROUND_STRIDE;
}

/* Where a buffer's data of `bytes` lie. */
static char *data(char *buffer, size_t bytes) { return buffer + (bytes <= INLINE ? sizeof(struct head) : 64); }

/* The first round a rank does not run (0: it runs them), in its page of stamps: published by a rank that
 * has left the rounds instead of that round's words, so that peers waiting for them leave too. */
static uint64_t *stop_word(const struct mpic_node *n, int q) { return (uint64_t *)(n->shares[q] + MPIC_NODE_ROUND_STOP_AT); }

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

/* The sentence for a peer that ended its program while this rank waits in a round. */
static __attribute__((noreturn)) void finalized(const struct mpic_node *n, int q, const struct head *mine,
                                                unsigned seq) {
  char call[160];
  mpic_call_words(mine->sig, seq, -1, call, sizeof call);
  mpic_fatal("rank %d: rank %d reached MPI_Finalize while this rank waits for it in %s on communicator %d: the "
             "ranks ran different numbers of collectives. No result was returned. Fix: make every rank run the "
             "same collectives (look for a rank-dependent loop or early return)",
             n->world[n->rank], n->world[q], call, n->record_id);
}

/* The library's progress, as a rank waiting in one of its own calls drives it: a rank that waits here never
 * enters the library otherwise, and its own nonblocking operations would wait with it (an MPI_Isend
 * outstanding across a collective, its receiver waiting for it: a correct program that hung, issue 71,
 * wherever the library moves large messages by the sender's progress: MPICH under Yama's ptrace_scope 1).
 * Open MPI's coll/xhc calls opal_progress() from its flag waits in the same way. An MPI_Iprobe is the
 * standard's way to ask for progress; it matches nothing (a probe receives no message). */
static void progress(const struct mpic_node *n) {
  int flag = 0;
  MPIABI_Status st;
  mpic_next_Iprobe(MPIABI_ANY_SOURCE, MPIABI_ANY_TAG, n->shm, &flag, &st);
}

/* A test build stops a rank here once, MPI_COLLECTIVES_TEST_ROUND_PAUSE_MS long, where it has waited for a
 * late peer 100 ms (none in any other build): the race of the fourth read's B6, which a debugger's pause
 * found, as a run. */
static void pause_once_here(int64_t since) {
  static int paused;
  long ms = mpic_test_hook("MPI_COLLECTIVES_TEST_ROUND_PAUSE_MS", 0);
  if (ms > 0 && since && mpic_monotonic_ns() - since > 100 * 1000 * 1000 &&
      !__atomic_exchange_n(&paused, 1, __ATOMIC_RELAXED)) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
  }
}

/* Until peer q's words for round `number` are there: 1; 0 where q has left the rounds before it. */
/* Whether this node's ranks outnumber the CPUs they may run on (mpic_node_set_crowded: from the ranks'
 * placements, initialize()'s; -1: not told, as in a program that loads the wrapper itself, where a
 * communicator larger than the CPUs online counts). */
static int crowded = -1;

void mpic_node_set_crowded(int yes) { __atomic_store_n(&crowded, yes ? 1 : 0, __ATOMIC_RELAXED); }

/* The spins a wait makes before its first yield. A peer that has a core of its own writes its words within
 * microseconds, so spinning pays. Where the ranks outnumber the CPUs, the peer waited for may need this
 * rank's core to run at all, and every spin is time taken from it: 2,048 pauses (about 45 us here) a
 * wait made the package's step of ten small psums 1.6-2.3x slower than MPICH's own at 4-32 ranks on 2
 * cores (issue 82's scale bench); a few, then the yield, keeps a round to the ranks' own work. */
static unsigned long first_spins(const struct mpic_node *n) {
  int told = __atomic_load_n(&crowded, __ATOMIC_RELAXED);
  if (told < 0) {
    static long online;
    long cpus = __atomic_load_n(&online, __ATOMIC_RELAXED);
    if (!cpus) {
      cpus = sysconf(_SC_NPROCESSORS_ONLN);
      if (cpus < 1) cpus = 1;
      __atomic_store_n(&online, cpus, __ATOMIC_RELAXED);
    }
    told = n->size > cpus;
  }
  return told ? 16 : 2048;
}

static int wait_for(const struct mpic_node *n, int q, uint64_t number, const struct head *mine, unsigned seq) {
  const struct head *theirs = (const struct head *)buffer(n, q, number);
  const int *final = (const int *)(n->shares[q] + MPIC_NODE_FINAL_AT);
  const uint64_t *stop = stop_word(n, q);
  int64_t since = 0;
  unsigned long spin = first_spins(n);
  for (unsigned long spins = 0; __atomic_load_n(&theirs->number, __ATOMIC_ACQUIRE) != number; spins++) {
    uint64_t left = __atomic_load_n(stop, __ATOMIC_ACQUIRE);
    if (left && left <= number) return 0;
    if (spins < spin) {
      relax();
      continue;
    }
    if (spins % 64 == 0) {
      pause_once_here(since); /* a test build's pause between the two loads, as a descheduled rank has it */
      if (__atomic_load_n(final, __ATOMIC_ACQUIRE)) {
        /* The peer may have written this round's words, then reached MPI_Finalize, between this loop's load
         * of its number and this load of its flag (this rank descheduled in between: more ranks than cores,
         * a VM's stolen time). Its flag was stored after its words (release), so read them again (acquire)
         * before calling the program wrong: the fourth read's B6. */
        if (__atomic_load_n(&theirs->number, __ATOMIC_ACQUIRE) == number) break;
        uint64_t gone = __atomic_load_n(stop, __ATOMIC_ACQUIRE);
        if (gone && gone <= number) return 0;
        finalized(n, q, mine, seq);
      }
      progress(n);
      int64_t now = mpic_monotonic_ns();
      if (!since) since = now;
      if (now - since > 10 * 1000 * 1000) { /* a peer that is late by more than 10 ms: give the core back */
        struct timespec step = {0, 50 * 1000};
        nanosleep(&step, NULL);
        continue;
      }
    }
    sched_yield(); /* ranks may outnumber cores */
  }
  return 1;
}

/* This rank leaves the rounds at round `number`: r's checks are the library's from this call on, and
 * every peer waiting in this round, or reaching it, leaves too (wait_for). */
static int leave(struct mpic_record *r, struct mpic_node *n, uint64_t number) {
  uint64_t none = 0;
  __atomic_compare_exchange_n(stop_word(n, n->rank), &none, number, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
  __atomic_store_n(&r->round, MPIC_ROUND_OFF, __ATOMIC_RELEASE);
  __atomic_store_n(&n->busy, 0, __ATOMIC_RELEASE);
  return MPIC_ROUND_LEFT;
}

/* Ranks that agree on a reduce-scatter's total but not on its parts (the library's check cannot see it). */
static __attribute__((noreturn)) void parts_differ(const struct mpic_node *n, const struct head *mine, unsigned seq) {
  char call[160];
  mpic_call_words(mine->sig, seq, -1, call, sizeof call);
  int q = 0;
  while (q < n->size && ((const struct head *)buffer(n, q, mine->number))->shape == mine->shape) q++;
  mpic_fatal("rank %d: the ranks called %s on communicator %d in parts of other sizes (rank %d's differ from this "
             "rank's). No result was returned. Fix: give every rank the same parts (recvcounts)",
             n->world[n->rank], call, n->record_id, q < n->size ? n->world[q] : -1);
}

/* The ranks' words agree and every rank's data came: the result from the buffers. Every rank
 * reduces the buffers in rank order, so every rank gets the same bits. */
static void result(const struct mpic_node *n, uint64_t number, const struct mpic_round_call *c) {
  if (c->mode == MPIC_ROUND_REDUCE) {
    size_t esize = c->esize;
    int64_t count = (int64_t)(c->out_bytes / esize);
    char *out = c->out;
    memcpy(out, data(buffer(n, 0, number), c->in_bytes) + c->out_from, c->out_bytes);
    for (int q = 1; q < n->size; q++)
      mpic_node_reduce_local(data(buffer(n, q, number), c->in_bytes) + c->out_from, out, count, c->type, c->op);
    return;
  }
  size_t placed = 0;
  for (int q = 0; q < n->size; q++) placed += ((const struct head *)buffer(n, q, number))->bytes;
  if (placed != c->out_bytes) memset(c->out, 0, c->out_bytes); /* parts that leave gaps: zeros, as the block's */
  for (int q = 0; q < n->size; q++) {
    const struct head *h = (const struct head *)buffer(n, q, number);
    if (h->at > c->out_bytes || h->bytes > c->out_bytes - h->at)
      mpic_fatal("rank %d: rank %d's part of an all-gather on communicator %d lies outside the result (%llu bytes "
                 "at %llu of %zu). No result was returned. Fix: report this with the program",
                 n->world[n->rank], n->world[q], n->record_id, (unsigned long long)h->bytes,
                 (unsigned long long)h->at, c->out_bytes);
    memcpy((char *)c->out + h->at, data(buffer(n, q, number), h->bytes), h->bytes);
  }
}

/* Whether this rank's data travel in the round: they fit, a rank reads at most round_most bytes of its
 * peers' (a reduction reads its result's bytes from every peer: at 16 ranks an all-reduce of 4 KiB
 * where 2 ranks take 64 KiB, as a library's reduce-scatter and all-gather would move more ranks' parts
 * apiece), and a reduction's datatype and operation are signature.c's (predefined, contiguous,
 * commutative: every rank reduces with the library's arithmetic). */
static int fits(const struct mpic_node *n, const struct mpic_round_call *c) {
  size_t most = (size_t)n->round_most;
  if (c->mode == MPIC_ROUND_NONE || !c->in_bytes || c->in_bytes > most || c->out_bytes > most)
    return 0;
  if (c->mode == MPIC_ROUND_REDUCE && c->out_bytes * (size_t)(n->size - 1) > most) return 0;
  return c->mode == MPIC_ROUND_PLACE ||
         (c->esize > 0 && c->out_bytes % (size_t)c->esize == 0 && mpic_type_name(c->type) && mpic_op_name(c->op));
}

int mpic_node_round(struct mpic_record *r, const struct mpic_round_call *c, int64_t **seen) {
  struct mpic_node *n = mpic_node_of(r);
  if (!n) { /* the window dropped at MPI_Finalize (finalize.c): the library's check, as every call after it */
    __atomic_store_n(&r->round, MPIC_ROUND_OFF, __ATOMIC_RELEASE);
    return MPIC_ROUND_LEFT;
  }
  if (__atomic_exchange_n(&n->busy, 1, __ATOMIC_ACQUIRE)) mpic_node_two_threads(n->world[n->rank], n->record_id);
  uint64_t number = ++n->rounds;
  unsigned seq = __atomic_load_n(&r->seq, __ATOMIC_RELAXED); /* the call's number on r, as the flight record's */
  /* A rank in a program's phases (phases.h) waits where the wait can be given up: the library's check.
   * Its peers find its stop word where this round's words would be, and leave at the same round. */
  if (c->phases_on) return leave(r, n, number);
  char *mine = buffer(n, n->rank, number);
  struct head *h = (struct head *)mine;
  int carried = fits(n, c);
  if (carried) memcpy(data(mine, c->in_bytes), c->in, c->in_bytes);
  h->sig = c->sig, h->shape = c->shape, h->phase = c->phase, h->world = n->world[n->rank];
  h->at = carried ? (uint32_t)c->at : 0, h->bytes = carried ? (uint32_t)c->in_bytes : 0;
  __atomic_store_n(&h->number, number, __ATOMIC_RELEASE);
  int all_carried = carried, agreed = 1, shaped = 1;
  mpic_wait_begin(); /* waiting for other ranks, as in a library call: what the stall report samples */
  for (int k = 1; k < n->size; k++) {
    int q = (n->rank + k) % n->size;
    if (!wait_for(n, q, number, h, seq)) {
      mpic_wait_end();
      return leave(r, n, number);
    }
    const struct head *theirs = (const struct head *)buffer(n, q, number);
    agreed &= theirs->sig == h->sig && theirs->phase == h->phase;
    shaped &= theirs->shape == h->shape;
    all_carried &= theirs->bytes > 0;
  }
  mpic_wait_end();
  mpic_count_add(MPIC_COUNT_ROUNDS, 1);
  mpic_count_add(MPIC_COUNT_ROUND_SLOTS, (uint64_t)(n->size - 1));
  int got = MPIC_ROUND_CHECKED;
  if (agreed && !shaped) parts_differ(n, h, seq);
  if (!agreed) {
    /* every rank read every rank's words: each makes the same sentence (the dispatcher's) */
    int64_t *all = calloc((size_t)n->size, 3 * sizeof *all);
    if (!all) mpic_fatal("rank %d: the ranks disagree about a collective on communicator %d (out of memory naming "
                         "them). No result was returned. Fix: make every rank run the same collectives",
                         n->world[n->rank], n->record_id);
    for (int q = 0; q < n->size; q++) {
      const struct head *theirs = (const struct head *)buffer(n, q, number);
      all[3 * q] = (int64_t)theirs->sig, all[3 * q + 1] = theirs->world, all[3 * q + 2] = theirs->phase;
    }
    *seen = all;
    got = MPIC_ROUND_DISAGREE;
  } else if (all_carried) {
    result(n, number, c);
    mpic_count_add(MPIC_COUNT_ROUNDS_DONE, 1);
    got = MPIC_ROUND_DONE;
  }
  __atomic_store_n(&n->busy, 0, __ATOMIC_RELEASE);
  return got;
}

/* What the node path's files share (node.h says which file holds what). */
#ifndef MPI_COLLECTIVES_NODE_INTERNAL_H
#define MPI_COLLECTIVES_NODE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "comm_record.h"
#include "library_calls.h"

/* Each rank's share of a window: a page of stamps (turns.c) and of its
 * arrival at MPI_Finalize (finalize.c), two halves of
 * MPIC_NODE_CHUNK bytes used in turn by the collectives' chunks, then a slot
 * of MPIC_NODE_CHUNK for the exchanges of an all-to-all (exchange.c), kept
 * apart because an exchange involves two ranks only, while a rank may still
 * be reading the halves of the communicator's last collective. */
#define MPIC_NODE_CHUNK (512 * 1024)
#define MPIC_NODE_STAMPS 4096
#define MPIC_NODE_SLOT (MPIC_NODE_STAMPS + 2 * MPIC_NODE_CHUNK)
/* Past the exchanges' slot, the one-round path's two buffers (round.c), used
 * in turn by its rounds: a cache line of words, then at most
 * MPIC_NODE_ROUND_MOST bytes of data. Apart from the halves, because a
 * large call's check is a round whose data then go through the halves. */
#define MPIC_NODE_ROUND_MOST 65536
#define MPIC_NODE_ROUND_AT (MPIC_NODE_STAMPS + 3 * MPIC_NODE_CHUNK)
#define MPIC_NODE_ROUND_STRIDE (64 + MPIC_NODE_ROUND_MOST)
#define MPIC_NODE_SHARE (MPIC_NODE_ROUND_AT + 2 * MPIC_NODE_ROUND_STRIDE)
/* A window that serves the one round alone (the library keeps the large collectives: Intel MPI's default,
 * or a tuning's round alone) holds the page and the round's buffers, 132 KiB a rank where the whole share
 * is 1.67 MiB: its buffers begin right after the page. */
#define MPIC_NODE_ROUND_ONLY_SHARE (MPIC_NODE_STAMPS + 2 * MPIC_NODE_ROUND_STRIDE)
#define MPIC_NODE_FINAL_AT 128 /* in the page, past the two stamps' cache lines */
#define MPIC_NODE_PROBE_AT 192 /* in the page: this rank's pid and probe address (direct.c) */
#define MPIC_NODE_ROUND_STOP_AT 256 /* in the page: the first round this rank does not run (round.c) */
#define MPIC_NODE_STAMP_STRIDE 64 /* a cache line each: the two halves' stamps never share one (turns.c) */
#define MPIC_NODE_WHERE_AT 40  /* in each stamp's cache line, past the stamp: the call's buffers (direct.c) */

/* A window: one per communicator that the path took a call on. */
struct mpic_node {
  MPIABI_Comm shm;    /* the record's members on this node, in the communicator's order */
  MPIABI_Comm across; /* across nodes, the ranks whose place on their node is this rank's (MPI_COMM_NULL
                       * where the communicator is on one node, shm then its very members) */
  MPIABI_Win win;
  int size, rank;     /* in shm */
  int *world;         /* size: each shm rank's rank in MPI_COMM_WORLD, for the sentences */
  int *pids;          /* size: each shm rank's process id (direct.c) */
  int direct;         /* the ranks read each other's buffers in place (direct.c), agreed at the first call
                       * that would: 1, 0, or MPIC_NODE_DIRECT_UNDECIDED */
  uint64_t word;      /* this process's probe word for this window (direct.c): read by peers in place */
  int ptracer;        /* this window's probe named this process's Yama ptracer (direct.c: never taken back) */
  void *tmp;          /* MPIC_NODE_CHUNK bytes where direct: a reduction's staging */
  char **shares;      /* size: each rank's share_bytes */
  size_t share_bytes; /* MPIC_NODE_SHARE, or MPIC_NODE_ROUND_ONLY_SHARE for the round alone */
  size_t round_at;    /* where the round's buffers begin in a share (round.c) */
  int record_id;      /* the communicator's id (its split's: the same on every member), for the sentences
                       * and the finalize order's tie-break */
  unsigned long turn; /* chunks so far: which half is next (turns.c) */
  /* the call running now, which every chunk's stamp names (turns.c) */
  uint64_t calls;
  uint64_t sig;          /* signature.h: kind, operation, datatype */
  int64_t count;
  uint64_t shape;        /* a reduce-scatter's parts, hashed: ranks may agree on the total alone */
  int busy;              /* a caller is inside (turns.c, round.c: one at a time) */
  uint64_t rounds;       /* the one-round path's rounds so far (round.c) */
  int round_most;        /* the most data bytes a round carries, agreed (policy.c); 0: no round */
  struct mpic_record *record; /* whose window this is; NULL once the communicator is freed */
  int64_t order;         /* agreed by the window's ranks when it was made: the order of mpic_node_finalize */
  struct mpic_node *next; /* every window, live or forgotten, for mpic_node_finalize */
};

/* library_keeps.c: whether the library keeps the large collectives whatever the path could take (Intel
 * MPI under MPI_COLLECTIVES_NODE_PATH=2): a window then serves the one round only. */
int mpic_node_library_keeps_large(void);

/* window.c: r's window made, or r left to the library for good (both
 * agreed over r's members); returns the window or NULL. Only inside a call
 * every member of r makes. */
struct mpic_node *mpic_node_attach(struct mpic_record *r);
/* r's window, once attached (NULL otherwise); safe beside mpic_node_forget. */
struct mpic_node *mpic_node_of(struct mpic_record *r);

/* touch.c: every byte of a share written once under a SIGBUS guard: 1, or 0
 * where the window's file ran out of room. */
int mpic_node_touch(char *share, size_t bytes);

/* finalize.c: every window made, from its making to its free.
 * The order a new window proposes for MPI_Finalize (agreed as the highest
 * over its ranks, window.c), then the window kept on the list. */
int64_t mpic_node_order_proposal(void);
void mpic_node_keep(struct mpic_node *n);
/* Inside a call every member of r makes, before r's window is made: the
 * windows of freed communicators whose ranks are all r's members, and all
 * of which forgot them, freed (agreed over r's members). */
void mpic_node_reclaim(struct mpic_record *r);
/* The windows this rank belongs to: of live communicators, of freed ones
 * (not reclaimed yet), and the shared memory they hold on the node. */
struct mpic_node_census {
  int live, kept;
  long long bytes;
};
struct mpic_node_census mpic_node_count(void);

/* across.c: for a communicator that spans nodes, the communicator of the
 * ranks at this rank's place on the other nodes, where every node holds as
 * many ranks, two or more; else MPI_COMM_NULL (agreed over r's members). */
MPIABI_Comm mpic_node_across(const struct mpic_record *r, int shm_size, int shm_rank);
int mpic_node_composed_allreduce(struct mpic_node *n, struct mpic_allreduce_args *a, int esize);

/* turns.c: one caller at a time; a call's chunks, each stamped with the
 * call, and published to the other ranks (fences and a barrier). */
void mpic_turns_enter(struct mpic_node *n, uint64_t sig, int64_t count, uint64_t shape, int collective);
/* The sentence for a second caller on one communicator (one for the whole path). */
__attribute__((noreturn)) void mpic_node_two_threads(int world_rank, int record_id);
void mpic_turns_leave(struct mpic_node *n);
/* The next chunk (index `chunk` of the call): the half of every share it
 * uses, this rank's stamp written into it. */
size_t mpic_turn_begin(struct mpic_node *n, int64_t chunk);
/* Every rank's writes to this chunk's half seen by every rank, and every
 * rank's stamp checked to name the same call and chunk (a difference ends
 * the job naming both). */
void mpic_turn_publish(struct mpic_node *n, size_t half);
/* Rank q's cache line of a half's turn: its stamp, then (direct.c) its call's buffers. */
char *mpic_turn_line(const struct mpic_node *n, int q, size_t half);
/* A barrier with the fences, and no stamp: the all-reduce's second in a chunk. */
void mpic_turn_sync(struct mpic_node *n);
/* Fences alone, around a synchronisation the caller makes (exchange.c's messages). */
void mpic_turn_fence(struct mpic_node *n);
/* pieces.c: MPI_Reduce_local on count elements; the library's arithmetic. */
void mpic_node_reduce_local(const void *in, void *inout, int64_t count, MPIABI_Datatype type, MPIABI_Op op);
/* Of a part of `count` elements, how many from element `first` on fit in `most`. */
static inline int64_t mpic_node_piece(int64_t count, int64_t first, int64_t most) {
  return count - first < most ? count - first : most;
}
/* Where slice q of P begins in a buffer of `count` elements (slice q is [slice_at(q), slice_at(q + 1))), on
 * element boundaries: the one place slice bounds are computed, in 64 bits (a count near 2^31 times a rank
 * overflows an int: issue 71, wrong numbers from 1.07 G elements at 2 ranks). */
static inline int64_t mpic_node_slice_at(int64_t count, int64_t q, int64_t P) { return count * q / P; }
/* Where each of P parts begins (at[q]) and how long it is (at[P + q]), calloc'd. */
int64_t *mpic_node_parts(int64_t P, const char *what);

/* gather.c and reduce_scatter.c: the loops the composed all-reduce shares. */
void mpic_node_gather_parts(struct mpic_node *n, const char *in, char *out, const int64_t *at, const int64_t *counts,
                            int esize, int in_place);
void mpic_node_reduce_parts(struct mpic_node *n, const char *in, char *out, const int64_t *at, const int64_t *counts,
                            MPIABI_Datatype type, MPIABI_Op op, int esize);

/* direct.c: whether every rank of n reads its peers' buffers in place,
 * decided (collective over n's ranks, stamped as the call's, once) at the
 * first call that would (or at the communicator's creation, where all-to-all
 * is on the path: policy.c); a ptracer it named is never taken back;
 * and the collectives that way. */
#define MPIC_NODE_DIRECT_UNDECIDED (-1)
int mpic_node_direct_decide(struct mpic_node *n);
int mpic_node_direct_allreduce(struct mpic_node *n, struct mpic_allreduce_args *a, int esize);
int mpic_node_direct_allgather(struct mpic_node *n, struct mpic_allgather_args *a, int esize);
int mpic_node_direct_reduce_scatter(struct mpic_node *n, struct mpic_reduce_scatter_args *a, int esize);
/* Peer q's bytes at `from` (its address) into `to`; a failure ends the job naming q. */
void mpic_node_read_peer(struct mpic_node *n, int q, void *to, uint64_t from, size_t bytes);

/* One per collective, for mpic_node_run. */
int mpic_node_allreduce(struct mpic_node *n, struct mpic_allreduce_args *a, int esize);
int mpic_node_allgather(struct mpic_node *n, struct mpic_allgather_args *a, int esize);
int mpic_node_reduce_scatter(struct mpic_node *n, struct mpic_reduce_scatter_args *a, int esize);
int mpic_node_exchange(struct mpic_node *n, struct mpic_sendrecv_args *a, int esize);

/* The library's words for an error code, on one line. */
void mpic_node_words(int code, char *out, int len);

#endif

/* The node's own data path (node/): for a communicator XLA created whose
 * ranks share a node, large collectives move through a shared-memory window
 * of MPI's (MPI_Comm_split_type MPI_COMM_TYPE_SHARED, MPI_Win_allocate_shared:
 * standard MPI-3, on every family the wrapper loads), at the speed of the
 * node's memory instead of the library's own shared-memory protocol (MPICH
 * and Open MPI are 3-4x off that floor on a 16-core node).
 *
 * The one caller is the dispatcher (dispatch.c), after the agreement check,
 * so the check, the flight record, the stall report and a failure's sentence
 * cover a rank waiting here as they cover one waiting in the library. The
 * folder, as Open MPI's coll/xhc is laid out:
 *   policy.c        whether the path takes a call (the one place that decides)
 *   library_keeps.c whether the library keeps the large collectives (Intel MPI)
 *   window.c        a communicator's window: made at the first collective
 *                   taken (or its creation, for all-to-all), room checked
 *   touch.c         a share's pages touched under a SIGBUS guard
 *   finalize.c      every window's list: the order of their frees, freed
 *                   communicators' windows freed where all ranks agree,
 *                   and MPI_Finalize's frees, a long wait named
 *   across.c        a communicator over several nodes: the composed all-reduce
 *   turns.c         the chunks' turns, stamps and fences: the chunks' memory
 *                   model (MPI_Win_sync and barriers)
 *   round.c         the one round: a checked call's words and small data in
 *                   per-rank buffers, published by sequence numbers
 *   pieces.c        the library's arithmetic on a piece, a call's parts
 *   allreduce.c, gather.c, reduce_scatter.c, exchange.c: one per collective */
#ifndef MPI_COLLECTIVES_NODE_H
#define MPI_COLLECTIVES_NODE_H

#include "comm_record.h"
#include <stdint.h>
#include "library_calls.h"

/* A communicator XLA has just created (every member is at its creation):
 * where all-to-all is on the path, its window is made now, since an
 * all-to-all's point-to-point calls never make one. */
void mpic_node_created(struct mpic_record *r);

/* A call the path takes, as measured once (policy.c): its window, element
 * size, signature (signature.h), count and reduce-scatter shape. */
struct mpic_node_plan {
  struct mpic_node *node;
  int esize;
  uint64_t sig;
  int64_t count;
  uint64_t shape;
};
/* Whether the path takes `call` (one of library_calls.h's) with args on r:
 * the settings, the datatype and operation (predefined, contiguous,
 * commutative), the size; yes fills plan. The first collective it takes on r
 * makes r's window, collectively over r's members (every member is at the
 * same call: the dispatcher asks after the agreement check); a point-to-point
 * call (an all-to-all's exchange) never makes one. Where the window cannot be
 * had r keeps the library's for good, with one line. */
int mpic_node_takes(struct mpic_record *r, mpic_library_call call, const void *args, struct mpic_node_plan *plan);
/* The call through its window (mpic_node_takes said yes): returns 0, or the
 * library's error code from the one library call the path may make (the
 * all-reduce between nodes); anything else ends the job. */
int mpic_node_run(const struct mpic_node_plan *plan, mpic_library_call call, void *args);

/* The one round (round.c): where r's members share a node and the checks
 * are on, each checked collective's signature, and its data up to
 * MPI_COLLECTIVES_NODE_PATH_ROUND bytes, go through r's window in one round
 * of per-rank sequence numbers, instead of the check's library call and the
 * data's. Whether r has it is agreed once, at r's first checked call, after
 * the library's check (mpic_node_round_decide, collective over r); every
 * member then runs a round at every checked call on r. */
int mpic_node_round_undecided(const struct mpic_record *r);
int mpic_node_round_on(const struct mpic_record *r);
/* Collective over r, at a call every member makes with the check agreed:
 * r's round on (its window made) or off for good, alike on every member.
 * phases_on: this rank is in a program's phases (phases.h), whose waits
 * must be the library's check, which can give a wait up. */
void mpic_node_round_decide(struct mpic_record *r, int phases_on);
/* A call's shape where ranks may agree on its total alone (a reduce-scatter's
 * parts, hashed), else 0. */
uint64_t mpic_node_shape(const struct mpic_record *r, mpic_library_call call, const void *args);

/* What a round carries: mode MPIC_ROUND_NONE (the check alone), a reduction
 * (in_bytes of `in`; out_bytes of the result from byte out_from to `out`,
 * reduced with type and op, elements of esize bytes), or a placement (this
 * rank's in_bytes land at byte `at` of the out_bytes of `out`). */
enum { MPIC_ROUND_NONE = 0, MPIC_ROUND_REDUCE, MPIC_ROUND_PLACE };
struct mpic_round_call {
  uint64_t sig, shape;
  int64_t phase;
  int phases_on;
  int mode;
  const void *in;
  size_t in_bytes, at;
  void *out;
  size_t out_from, out_bytes;
  MPIABI_Datatype type;
  MPIABI_Op op;
  int esize;
};
/* The round of a call on r (mpic_node_round_on said yes): MPIC_ROUND_DONE
 * (agreed, its data moved), MPIC_ROUND_CHECKED (agreed; the data did not
 * fit, the caller moves them), MPIC_ROUND_DISAGREE with *seen calloc'd:
 * (signature, rank in MPI_COMM_WORLD, phase) of each member, for the
 * dispatcher's sentence, or MPIC_ROUND_LEFT: this rank (phases_on: its
 * program's phases began, whose waits must be ones the library's check can
 * give up) or a peer left the rounds at this call; r's round is off from it
 * on, on every member alike, and the caller checks this call the library's
 * way. */
enum { MPIC_ROUND_DONE = 1, MPIC_ROUND_CHECKED, MPIC_ROUND_DISAGREE, MPIC_ROUND_LEFT };
int mpic_node_round(struct mpic_record *r, const struct mpic_round_call *c, int64_t **seen);

/* r's communicator is about to be freed: r forgets its window, which stays
 * until a later window's making frees it where all its ranks agree, or
 * mpic_node_finalize. No MPI call here: MPI_Win_free synchronises the
 * window's ranks (MPI-3.1 11.2.5), MPI_Comm_free does not, and XLA frees its
 * communicators in an order of its own on each rank (jax 0.4's hash-map
 * order), so a free that waited could hang. */
void mpic_node_forget(struct mpic_record *r);
/* Before MPI_Finalize: every window freed, in the one order every rank
 * agreed when they were made, so that none is left to the library. */
void mpic_node_finalize(void);

/* The seconds after which a rank waiting at MPI_Finalize for a window's
 * ranks names those not there (repeated at doubling intervals), and after
 * which it ends the job (0: never): initialize()'s stall report and limit;
 * 60 and 0 until it gives them. Returns 1 for a negative value. */
int mpic_node_set_finalize_waits(double report_s, double limit_s);
/* The windows this rank belongs to: of live communicators, of freed ones
 * not freed yet, the node's shared memory they hold, and how many return
 * their errors to the wrapper (MPI_ERRORS_RETURN): for the harness
 * (tests/programs/node_path_harness.c) and diagnostics. */
void mpic_node_windows_held(int *live, int *kept, long long *bytes, int *returning);

/* Whether this node's ranks outnumber the CPUs they may run on (initialize(), from the ranks' placements):
 * the round's waits then yield almost at once (round.c). */
void mpic_node_set_crowded(int yes);

#endif

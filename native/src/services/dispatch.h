/* The one way a collective runs on a communicator XLA created (dispatch.c):
 * it begins in the flight record, the ranks agree about it (carrying its
 * data when they fit the check's block), the node path or the library's
 * call moves the data (chosen here, once),
 * a failure ends the job with one sentence, and it finishes in the record.
 * Used by xla_collectives.c (one device per process) and devices/ (a
 * process's devices together), so that every path has the same check,
 * record and failure. */
#ifndef MPI_COLLECTIVES_DISPATCH_H
#define MPI_COLLECTIVES_DISPATCH_H

#include <stddef.h>
#include "comm_record.h"
#include "library_calls.h"
#include "signature.h"

/* How a collective's data may travel with its check: mode MPIC_CARRY_NONE,
 * or in_bytes from `in` placed at in_at in the payload and, after the
 * check, out_bytes from out_from copied to `out`. `block`: the check's block
 * (check_block.h) can carry them (they fit its payload, and its reduction
 * computes them exactly); the node path's round (node.h) judges for itself. */
struct mpic_carry {
  int mode;
  const void *in;
  size_t in_at, in_bytes;
  void *out;
  size_t out_from, out_bytes;
  int block;
};

/* A reduction's carry (all-reduce, reduce-scatter): `count` elements from
 * `in`, and out_count elements of the result from element out_first to
 * `out`; none for a datatype outside signature_codes.h's. */
struct mpic_carry mpic_carry_reduce(const struct mpic_call *c, const void *in, int64_t count, void *out,
                                    int64_t out_first, int64_t out_count);
/* An all-gather's carry: this rank's `count` elements at element `at` of a
 * result of `total` elements. */
struct mpic_carry mpic_carry_place(const struct mpic_call *c, const void *mine, int64_t at, int64_t count, void *out,
                                   int64_t total);

/* Runs collective c on r (NULL: a communicator without a record, the call
 * alone): the ranks agree about it when the checks are on (not for an
 * all-to-all's exchanges, which are pairwise: arrivals.c checks what
 * arrives), in the node path's round where r has one (node/node.h), else
 * in the check's block; `carry` (NULL for none) used when it fits; else the
 * route is chosen here, once: the node path where it takes the call, else
 * the library's `call`, both with args. `function` names the call in
 * the failure's sentence. Returns 0 (a failure ends the job), or the
 * phase's error code when a phase's wait in the check was given up (phases.h). */
int mpic_dispatch(struct mpic_record *r, const struct mpic_call *c, const struct mpic_carry *carry,
                  const char *function, mpic_library_call call, void *args);

#endif

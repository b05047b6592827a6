/* The one way a collective runs on a communicator XLA created (dispatch.c):
 * it begins in the flight record, the ranks agree about it (carrying its
 * data when they fit the check's block), the library's call moves the data,
 * a failure ends the job with one sentence, and it finishes in the record.
 * Used by xla_collectives.c (one device per process) and devices/ (a
 * process's devices together), so that every path has the same check,
 * record and failure. */
#ifndef MPI_COLLECTIVES_DISPATCH_H
#define MPI_COLLECTIVES_DISPATCH_H

#include <stddef.h>
#include "comm_record.h"
#include "signature.h"

/* How a collective's data may travel in the check's block (check_block.h):
 * mode MPIC_CARRY_NONE, or in_bytes from `in` placed at in_at in the payload
 * and, after the check's all-reduce, out_bytes from out_from copied to `out`. */
struct mpic_carry {
  int mode;
  const void *in;
  size_t in_at, in_bytes;
  void *out;
  size_t out_from, out_bytes;
};

/* A reduction's carry (all-reduce, reduce-scatter): `count` elements from
 * `in`, and out_count elements of the result from element out_first to
 * `out`; none when they do not fit or the block cannot reduce them exactly. */
struct mpic_carry mpic_carry_reduce(const struct mpic_call *c, const void *in, int64_t count, void *out,
                                    int64_t out_first, int64_t out_count);
/* An all-gather's carry: this rank's `count` elements at element `at` of a
 * result of `total` elements; none when the result does not fit. */
struct mpic_carry mpic_carry_place(const struct mpic_call *c, const void *mine, int64_t at, int64_t count, void *out,
                                   int64_t total);

/* The library's call that moves the data, with its arguments. */
typedef int (*mpic_library_call)(void *args);
/* The calls XLA's collectives make, for mpic_dispatch's `call`: args is the struct before each. */
struct mpic_allreduce_args {
  const void *send;
  void *recv;
  int count;
  MPIABI_Datatype type;
  MPIABI_Op op;
  MPIABI_Comm comm;
};
int mpic_call_allreduce(void *args);
struct mpic_allgather_args {
  const void *send;
  int sendcount;
  MPIABI_Datatype sendtype;
  void *recv;
  int recvcount;
  MPIABI_Datatype recvtype;
  MPIABI_Comm comm;
};
int mpic_call_allgather(void *args);
struct mpic_allgatherv_args {
  const void *send;
  int sendcount;
  MPIABI_Datatype sendtype;
  void *recv;
  const int *recvcounts, *displs;
  MPIABI_Datatype recvtype;
  MPIABI_Comm comm;
};
int mpic_call_allgatherv(void *args);
struct mpic_reduce_scatter_args {
  const void *send;
  void *recv;
  const int *counts;
  MPIABI_Datatype type;
  MPIABI_Op op;
  MPIABI_Comm comm;
};
int mpic_call_reduce_scatter(void *args);

/* Runs collective c on r (NULL: a communicator without a record, the call
 * alone): `carry` (NULL for none) used when the checks are on and it fits,
 * else call(args); `function` names the call in the failure's sentence.
 * Returns 0 (a failure ends the job). */
int mpic_dispatch(struct mpic_record *r, const struct mpic_call *c, const struct mpic_carry *carry,
                  const char *function, mpic_library_call call, void *args);

#endif

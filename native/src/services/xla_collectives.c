/* XLA's all-reduce, all-gather and reduce-scatter on its communicators
 * (xla_collectives.h): the signature, the carry, and the library's call, for
 * the dispatcher to run. */
#include "check_block.h"
#include "dispatch.h"
#include "xla_collectives.h"

int mpic_xla_allreduce(struct mpic_record *r, const void *sendbuf, void *recvbuf, int count, MPIABI_Datatype datatype,
                       MPIABI_Op op) {
  struct mpic_call c = {MPIC_ALL_REDUCE, count, datatype, op};
  struct mpic_carry carry =
      mpic_carry_reduce(&c, sendbuf == MPIABI_IN_PLACE ? recvbuf : sendbuf, count, recvbuf, 0, count);
  struct mpic_allreduce_args a = {sendbuf, recvbuf, count, datatype, op, r->comm};
  return mpic_dispatch(r, &c, &carry, "MPI_Allreduce", mpic_call_allreduce, &a);
}

int mpic_xla_allgather(struct mpic_record *r, const void *sendbuf, int sendcount, MPIABI_Datatype sendtype,
                       void *recvbuf, int recvcount, MPIABI_Datatype recvtype) {
  struct mpic_call c = {MPIC_ALL_GATHER, sendcount, sendtype, MPIABI_OP_NULL};
  struct mpic_allgather_args a = {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, r->comm};
  struct mpic_carry carry = {0};
  if (recvtype == sendtype && recvcount == sendcount && r->size > 0) {
    /* Each rank's part in its own place, zeros elsewhere: the block's reduction joins them. */
    int64_t at = (int64_t)sendcount * r->rank;
    size_t elem = mpic_block_element_size(mpic_signature(&c));
    /* MPI_IN_PLACE: its part is already in its place in recvbuf */
    const void *mine = sendbuf == MPIABI_IN_PLACE ? (const char *)recvbuf + elem * (size_t)at : sendbuf;
    carry = mpic_carry_place(&c, mine, at, sendcount, recvbuf, (int64_t)sendcount * r->size);
  }
  return mpic_dispatch(r, &c, &carry, "MPI_Allgather", mpic_call_allgather, &a);
}

int mpic_xla_reduce_scatter(struct mpic_record *r, const void *sendbuf, void *recvbuf, const int recvcounts[],
                            MPIABI_Datatype datatype, MPIABI_Op op) {
  int64_t total = 0, before = 0;
  for (int i = 0; i < r->size; i++) {
    if (i == r->rank) before = total;
    total += recvcounts[i];
  }
  struct mpic_call c = {MPIC_REDUCE_SCATTER, total, datatype, op};
  struct mpic_carry carry = mpic_carry_reduce(&c, sendbuf == MPIABI_IN_PLACE ? recvbuf : sendbuf, total, recvbuf,
                                              before, recvcounts[r->rank]);
  struct mpic_reduce_scatter_args a = {sendbuf, recvbuf, recvcounts, datatype, op, r->comm};
  return mpic_dispatch(r, &c, &carry, "MPI_Reduce_scatter", mpic_call_reduce_scatter, &a);
}

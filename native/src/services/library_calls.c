/* The library's calls (library_calls.h). */
#include "library_calls.h"

int mpic_call_allreduce(void *args) {
  struct mpic_allreduce_args *a = args;
  return mpic_next_Allreduce(a->send, a->recv, a->count, a->type, a->op, a->comm);
}

int mpic_call_allgather(void *args) {
  struct mpic_allgather_args *a = args;
  return mpic_next_Allgather(a->send, a->sendcount, a->sendtype, a->recv, a->recvcount, a->recvtype, a->comm);
}

int mpic_call_allgatherv(void *args) {
  struct mpic_allgatherv_args *a = args;
  return mpic_next_Allgatherv(a->send, a->sendcount, a->sendtype, a->recv, a->recvcounts, a->displs, a->recvtype,
                              a->comm);
}

int mpic_call_reduce_scatter(void *args) {
  struct mpic_reduce_scatter_args *a = args;
  return mpic_next_Reduce_scatter(a->send, a->recv, a->counts, a->type, a->op, a->comm);
}

int mpic_call_sendrecv(void *args) {
  struct mpic_sendrecv_args *a = args;
  return mpic_next_Sendrecv(a->send, a->sendcount, a->sendtype, a->dest, a->sendtag, a->recv, a->recvcount,
                            a->recvtype, a->source, a->recvtag, a->comm, a->status);
}

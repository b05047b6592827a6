/* The MPI library's own calls for the collectives XLA makes, each with the
 * struct of its arguments (library_calls.c). What dispatch.c runs when the
 * library moves the data, and what the node path (node/) reads to decide
 * whether it takes a call, and falls back to. Below both: it calls only the
 * library. */
#ifndef MPI_COLLECTIVES_LIBRARY_CALLS_H
#define MPI_COLLECTIVES_LIBRARY_CALLS_H

#include "common.h"

/* The library's call that moves the data, with its arguments. */
typedef int (*mpic_library_call)(void *args);

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

/* One exchange of XLA's all-to-all (it makes one MPI_Sendrecv with each peer
 * in turn); status is never MPI_STATUS_IGNORE here (arrivals.c reads it). */
struct mpic_sendrecv_args {
  const void *send;
  int sendcount;
  MPIABI_Datatype sendtype;
  int dest, sendtag;
  void *recv;
  int recvcount;
  MPIABI_Datatype recvtype;
  int source, recvtag;
  MPIABI_Comm comm;
  MPIABI_Status *status;
};
int mpic_call_sendrecv(void *args);

#endif

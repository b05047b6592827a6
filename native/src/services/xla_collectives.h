/* XLA's collectives on a communicator it created with one device per
 * process (xla_collectives.c): each given to the dispatcher (dispatch.h)
 * with the carry its data allow. Called by entry/xla_calls.c. */
#ifndef MPI_COLLECTIVES_XLA_COLLECTIVES_H
#define MPI_COLLECTIVES_XLA_COLLECTIVES_H

#include "comm_record.h"
#include "common.h"

int mpic_xla_allreduce(struct mpic_record *r, const void *sendbuf, void *recvbuf, int count, MPIABI_Datatype datatype,
                       MPIABI_Op op);
int mpic_xla_allgather(struct mpic_record *r, const void *sendbuf, int sendcount, MPIABI_Datatype sendtype,
                       void *recvbuf, int recvcount, MPIABI_Datatype recvtype);
int mpic_xla_reduce_scatter(struct mpic_record *r, const void *sendbuf, void *recvbuf, const int recvcounts[],
                            MPIABI_Datatype datatype, MPIABI_Op op);

#endif

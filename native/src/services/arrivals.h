/* Arrivals checked (arrivals.c): XLA's point-to-point transfers on the
 * communicators it created (comm_record.h). Called by entry/xla_calls.c and
 * devices/transfers.c; any other communicator's transfer is the library's
 * call alone. */
#ifndef MPI_COLLECTIVES_ARRIVALS_H
#define MPI_COLLECTIVES_ARRIVALS_H

#include "comm_record.h"
#include "common.h"

/* XLA's all-to-all: one exchange with each peer on r, the count received checked. */
int mpic_arrival_sendrecv(struct mpic_record *r, const void *sendbuf, int sendcount, MPIABI_Datatype sendtype,
                          int dest, int sendtag, void *recvbuf, int recvcount, MPIABI_Datatype recvtype, int source,
                          int recvtag, MPIABI_Status *status);

/* XLA's collective permute: on a recorded communicator the receive is
 * remembered and its arrival checked when it completes. */
int mpic_arrival_irecv(void *buf, int count, MPIABI_Datatype datatype, int source, int tag, MPIABI_Comm comm,
                       MPIABI_Request *request);
int mpic_arrival_wait(MPIABI_Request *request, MPIABI_Status *status);
int mpic_arrival_waitall(int count, MPIABI_Request array_of_requests[], MPIABI_Status *array_of_statuses);

#endif

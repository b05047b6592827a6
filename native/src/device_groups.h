/* Several CPU devices per process over MPI (device_groups.c). */
#ifndef MPI_COLLECTIVES_DEVICE_GROUPS_H
#define MPI_COLLECTIVES_DEVICE_GROUPS_H

#include "common.h"

#define MPIC_MAX_LOCAL_DEVICES 8

/* CPU devices per process, as the Python layer was told by JAX's settings
 * (1 until then): above 1, XLA's splits of MPI_COMM_WORLD go to
 * mpic_device_split. */
extern int mpic_local_devices;

/* One local device's MPI_Comm_split(MPI_COMM_WORLD, color, key) for XLA. */
int mpic_device_split(int color, int key, MPIABI_Comm *newcomm);

/* Is this handle one of the communicators or requests device_groups.c made? */
int mpic_is_device_comm(MPIABI_Comm comm);
int mpic_is_device_request(MPIABI_Request request);

/* XLA's calls on such a communicator (agreement.c sends them here). */
int mpic_device_allreduce(const void *sendbuf, void *recvbuf, int count, MPIABI_Datatype type, MPIABI_Op op,
                          MPIABI_Comm comm);
int mpic_device_allgather(const void *sendbuf, int count, MPIABI_Datatype type, void *recvbuf, MPIABI_Comm comm);
int mpic_device_reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPIABI_Datatype type,
                               MPIABI_Op op, MPIABI_Comm comm);
int mpic_device_irecv(void *buf, int count, MPIABI_Datatype type, int source, int tag, MPIABI_Comm comm,
                      MPIABI_Request *request);
int mpic_device_sendrecv(const void *sendbuf, int sendcount, MPIABI_Datatype sendtype, int dest, int sendtag,
                         void *recvbuf, int recvcount, MPIABI_Datatype recvtype, int source, int recvtag,
                         MPIABI_Comm comm, MPIABI_Status *status);
int mpic_device_wait(MPIABI_Request *request, MPIABI_Status *status);
int mpic_device_comm_free(MPIABI_Comm *comm);

#endif

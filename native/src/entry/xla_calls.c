/* The entry for XLA's calls (treatment.txt: own entry/xla_calls.c): each is
 * routed to the one service that owns its communicator, and nothing here
 * does the work itself.
 *
 * - a device communicator (several CPU devices per process): devices/;
 * - a communicator XLA created with one device per process, which has a
 *   record (comm_record.h): xla_collectives.c, whose calls the dispatcher
 *   runs (check, call, failure, finish: dispatch.h), and for its
 *   point-to-point transfers arrivals.c, which checks what arrived;
 * - anything else (mpi4py's, the user's, MPI_COMM_WORLD): the library.
 * MPI_Comm_split and MPI_Is_thread_main follow XLA's policy (xla_policy.c).
 * Each call that waits first moves its thread onto the rank's slice when
 * MPI_COLLECTIVES_BIND_CPUS=2 (caller_cpus.c). */
#include "arrivals.h"
#include "caller_cpus.h"
#include "comm_record.h"
#include "common.h"
#include "devices.h"
#include "family.h"
#include "loader.h"
#include "node.h"
#include "xla_collectives.h"
#include "xla_policy.h"

/* ---- communicators ---- */
MPIABI_EXPORT int MPIABI_Comm_split(MPIABI_Comm comm, int color, int key, MPIABI_Comm *newcomm) {
  if (!mpic_family) mpic_not_loaded("MPI_Comm_split");
  /* Several CPU devices per process: each device's split is one part of a
   * collective's communicators. */
  if (mpic_local_devices > 1 && comm == MPIABI_COMM_WORLD) return mpic_device_split(color, key, newcomm);
  return mpic_xla_split(comm, color, key, newcomm);
}

MPIABI_EXPORT int MPIABI_Is_thread_main(int *flag) {
  if (!mpic_family) mpic_not_loaded("MPI_Is_thread_main");
  return mpic_xla_is_thread_main(flag);
}

MPIABI_EXPORT int MPIABI_Comm_rank(MPIABI_Comm comm, int *rank) {
  if (mpic_is_device_comm(comm)) return mpic_device_comm_rank(comm, rank);
  return mpic_next_Comm_rank(comm, rank);
}

MPIABI_EXPORT int MPIABI_Comm_size(MPIABI_Comm comm, int *size) {
  if (mpic_is_device_comm(comm)) return mpic_device_comm_size(comm, size);
  return mpic_next_Comm_size(comm, size);
}

MPIABI_EXPORT int MPIABI_Comm_free(MPIABI_Comm *comm) {
  if (comm && mpic_is_device_comm(*comm)) return mpic_device_comm_free(comm);
  if (comm) mpic_node_forget(mpic_record_of(*comm));
  return mpic_record_free(comm);
}

/* ---- collectives ---- */
MPIABI_EXPORT int MPIABI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPIABI_Datatype datatype,
                                   MPIABI_Op op, MPIABI_Comm comm) {
  mpic_caller_cpus_enter();
  if (mpic_is_device_comm(comm)) return mpic_device_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  struct mpic_record *r = mpic_record_of(comm);
  if (r) return mpic_xla_allreduce(r, sendbuf, recvbuf, count, datatype, op);
  return mpic_next_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

MPIABI_EXPORT int MPIABI_Allgather(const void *sendbuf, int sendcount, MPIABI_Datatype sendtype, void *recvbuf,
                                   int recvcount, MPIABI_Datatype recvtype, MPIABI_Comm comm) {
  mpic_caller_cpus_enter();
  if (mpic_is_device_comm(comm)) return mpic_device_allgather(sendbuf, sendcount, sendtype, recvbuf, comm);
  struct mpic_record *r = mpic_record_of(comm);
  if (r) return mpic_xla_allgather(r, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
  return mpic_next_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

MPIABI_EXPORT int MPIABI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                        MPIABI_Datatype datatype, MPIABI_Op op, MPIABI_Comm comm) {
  mpic_caller_cpus_enter();
  if (mpic_is_device_comm(comm)) return mpic_device_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
  struct mpic_record *r = mpic_record_of(comm);
  if (r) return mpic_xla_reduce_scatter(r, sendbuf, recvbuf, recvcounts, datatype, op);
  return mpic_next_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

/* XLA's all-to-all: one exchange with each peer. */
MPIABI_EXPORT int MPIABI_Sendrecv(const void *sendbuf, int sendcount, MPIABI_Datatype sendtype, int dest,
                                  int sendtag, void *recvbuf, int recvcount, MPIABI_Datatype recvtype, int source,
                                  int recvtag, MPIABI_Comm comm, MPIABI_Status *status) {
  mpic_caller_cpus_enter();
  if (mpic_is_device_comm(comm))
    return mpic_device_sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                                recvtag, comm, status);
  struct mpic_record *r = mpic_record_of(comm);
  if (r)
    return mpic_arrival_sendrecv(r, sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                                 recvtag, status);
  return mpic_next_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                            recvtag, comm, status);
}

/* ---- XLA's collective permute: MPI_Irecv, MPI_Isend, then MPI_Wait on each ---- */
MPIABI_EXPORT int MPIABI_Isend(const void *buf, int count, MPIABI_Datatype datatype, int dest, int tag,
                               MPIABI_Comm comm, MPIABI_Request *request) {
  mpic_caller_cpus_enter();
  if (mpic_is_device_comm(comm)) return mpic_device_isend(buf, count, datatype, dest, tag, comm, request);
  return mpic_next_Isend(buf, count, datatype, dest, tag, comm, request);
}

/* Receives on any other communicator go to arrivals.c too: it remembers
 * those on recorded ones, whose arrivals it checks in MPI_Wait. */
MPIABI_EXPORT int MPIABI_Irecv(void *buf, int count, MPIABI_Datatype datatype, int source, int tag,
                               MPIABI_Comm comm, MPIABI_Request *request) {
  mpic_caller_cpus_enter();
  if (mpic_is_device_comm(comm)) return mpic_device_irecv(buf, count, datatype, source, tag, comm, request);
  return mpic_arrival_irecv(buf, count, datatype, source, tag, comm, request);
}

MPIABI_EXPORT int MPIABI_Wait(MPIABI_Request *request, MPIABI_Status *status) {
  mpic_caller_cpus_enter();
  if (request && mpic_is_device_request(*request)) return mpic_device_wait(request, status);
  return mpic_arrival_wait(request, status);
}

MPIABI_EXPORT int MPIABI_Waitall(int count, MPIABI_Request array_of_requests[], MPIABI_Status *array_of_statuses) {
  mpic_caller_cpus_enter();
  for (int i = 0; i < count; i++) /* device requests first, one by one; then the library's */
    if (mpic_is_device_request(array_of_requests[i])) {
      MPIABI_Status *s = array_of_statuses == MPIABI_STATUSES_IGNORE || !array_of_statuses ? MPIABI_STATUS_IGNORE
                                                                                            : &array_of_statuses[i];
      mpic_device_wait(&array_of_requests[i], s);
    }
  return mpic_arrival_waitall(count, array_of_requests, array_of_statuses);
}

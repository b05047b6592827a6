/* The ranks agree about each collective XLA runs (agreement.c): the
 * communicators XLA created are tracked, and XLA's calls on them are checked.
 * Called by entry/xla_calls.c, which routes XLA's calls here, and by
 * devices/, whose process communicators are tracked too. */
#ifndef MPI_COLLECTIVES_AGREEMENT_H
#define MPI_COLLECTIVES_AGREEMENT_H

#include "common.h"
#include "signature.h"

/* A communicator XLA has just created, by the split of the world whose
 * ordinal is `id` (flight.h: mpic_flight_new_split): its collectives are
 * checked, numbered and recorded from now on. */
void mpic_agreement_track(MPIABI_Comm comm, int id);
/* The world ranks of the members of tracked communicator `id` (at most max
 * into out); returns how many it has, -1 for none tracked with that id. */
int mpic_agreement_members(int comm_id, int *out, int max);
/* Is it one (and are checks on)? */
int mpic_agreement_tracks(MPIABI_Comm comm);
/* MPI_Comm_free: forgets a tracked communicator (the library may reuse its handle). */
int mpic_agreement_comm_free(MPIABI_Comm *comm);

/* The signature check alone, for a call made on XLA's behalf on a tracked
 * communicator (devices/: one call for a process's devices); nothing on
 * another communicator. Returns the flight record's slot (-1: none), for
 * mpic_agreement_finished once the call's data has moved. */
int mpic_agreement_check(MPIABI_Comm comm, int kind, int64_t count, MPIABI_Datatype type, MPIABI_Op op);
void mpic_agreement_finished(int slot);

/* XLA's collectives on a tracked communicator: the check, then the library's call. */
int mpic_checked_allreduce(const void *sendbuf, void *recvbuf, int count, MPIABI_Datatype datatype, MPIABI_Op op,
                           MPIABI_Comm comm);
int mpic_checked_allgather(const void *sendbuf, int sendcount, MPIABI_Datatype sendtype, void *recvbuf,
                           int recvcount, MPIABI_Datatype recvtype, MPIABI_Comm comm);
int mpic_checked_reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPIABI_Datatype datatype,
                                MPIABI_Op op, MPIABI_Comm comm);
/* A transfer begins in the flight record, on tracked communicator `comm`:
 * its slot, or -1 when the communicator is not tracked (arrivals.c). */
int mpic_agreement_begin(MPIABI_Comm comm, uint64_t sig);
/* This process's rank in MPI_COMM_WORLD, once a communicator was tracked. */
int mpic_agreement_world_rank(void);

/* A failed MPI call made for XLA: ends the job with the library's words (or
 * names the rank of this node that died first). */
__attribute__((noreturn)) void mpic_agreement_failed(const char *function, int code);

#endif

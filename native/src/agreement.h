/* The ranks agree about each collective XLA runs (agreement.c). */
#ifndef MPI_COLLECTIVES_AGREEMENT_H
#define MPI_COLLECTIVES_AGREEMENT_H

#include "common.h"

/* A communicator XLA has just created: its collectives are checked from now on. */
void mpic_agreement_track(MPIABI_Comm comm);

/* The signature check of one collective on a tracked communicator, for a
 * call made there on XLA's behalf (device_groups.c); kind: 1 all-reduce,
 * 2 all-gather, 3 reduce-scatter. */
void mpic_agreement_check(MPIABI_Comm comm, int kind, int64_t count, MPIABI_Datatype type, MPIABI_Op op);

/* A failed MPI call made for XLA: ends the job with the library's words. */
__attribute__((noreturn)) void mpic_agreement_failed(const char *function, int code);

#endif

/* The ranks agree about each collective XLA runs (agreement.c). */
#ifndef MPI_COLLECTIVES_AGREEMENT_H
#define MPI_COLLECTIVES_AGREEMENT_H

#include "common.h"

/* A communicator XLA has just created: its collectives are checked from now on. */
void mpic_agreement_track(MPIABI_Comm comm);

#endif

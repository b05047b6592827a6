/* Calling the loaded MPI library (library.c): mpic_next_<Name> for every MPI
 * function (generated/forwarders.h, through common.h), dispatching to the
 * loaded family's forwarder; and the state of MPI itself. The wrapper's own
 * code calls these, never the exported MPIABI_* entry points. */
#ifndef MPI_COLLECTIVES_LIBRARY_H
#define MPI_COLLECTIVES_LIBRARY_H

#include "common.h"

/* The wrapper initialized MPI (and so finalizes it); set by entry/lifecycle.c. */
extern int mpic_initialized_by_us;
/* The first caller gets 1 and must finalize; every later caller gets 0. */
int mpic_claim_finalize(void);
/* MPI_Finalize has run (ours, or the library says so). */
int mpic_mpi_is_finalized(void);
/* MPI is initialized and not finalized: MPI calls, MPI_Abort among them, are allowed. */
int mpic_mpi_is_up(void);

#endif

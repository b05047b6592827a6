/* Initialization and finalization: never twice, and never what the wrapper
 * did not start (lifecycle.c). */
#ifndef MPI_COLLECTIVES_LIFECYCLE_H
#define MPI_COLLECTIVES_LIFECYCLE_H

extern int mpic_initialized_by_us;
/* MPI_Finalize has run (ours, or the library says so). */
int mpic_mpi_is_finalized(void);
/* MPI is initialized and not finalized: MPI calls, MPI_Abort among them, are allowed. */
int mpic_mpi_is_up(void);

#endif

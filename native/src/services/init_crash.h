/* One sentence when the MPI library crashes inside MPI_Init (init_crash.c).
 *
 * Ranks cannot compare their settings before MPI_Init, and some mismatches
 * crash inside it: MPICH 5.0.2 with MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring on
 * one rank and MPIR_CVAR_DEVICE_COLLECTIVES=none on the other took a
 * segmentation fault in PMPI_Init_thread (2 ranks, every launch), where the
 * launcher said only "Segmentation fault (signal 11)". While MPI_Init runs, a
 * handler for SIGSEGV and SIGBUS writes the note Python left (the rank, the
 * settings it started MPI with and where they came from, the fix) and hands
 * the signal on to whatever handled it before (Python's faulthandler, or the
 * default: the process ends by the same signal). */
#ifndef MPI_COLLECTIVES_INIT_CRASH_H
#define MPI_COLLECTIVES_INIT_CRASH_H

/* Before MPI_Init: install the handlers, keeping the ones they replace. */
void mpic_init_crash_begin(void);
/* After MPI_Init: the handlers from before, where ours is still installed. */
void mpic_init_crash_end(void);
/* The note, from Python (mpi.note_for_init_crash); a general one without it. */
MPIABI_EXPORT int mpic_set_init_crash_note(const char *text);

#endif

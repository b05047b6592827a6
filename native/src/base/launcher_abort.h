/* A rank that stops before its MPI library has spoken to the launcher asks
 * the launcher to end the job (launcher_abort.c). */
#ifndef MPI_COLLECTIVES_LAUNCHER_ABORT_H
#define MPI_COLLECTIVES_LAUNCHER_ABORT_H

/* Called as MPI_Init begins: from then on the library owns the launcher's
 * connection, and only MPI_Abort may end the job. */
void mpic_launcher_init_begins(void);

/* When MPI_Init has not begun in this process and it was started, one of
 * several, by a launcher that speaks PMI on an inherited descriptor (PMI_FD:
 * Hydra, the mpiexec of MPICH and Intel MPI; srun --mpi=pmi2), send that
 * launcher PMI-1's abort with `code`, after 3 seconds for it to forward what
 * this process printed and for the other ranks to say theirs. Returns 1 when
 * the abort was sent (the launcher then ends every process of the job and
 * exits with `code`), 0 when there was nothing to send it to. */
int mpic_launcher_abort(int code);

#endif

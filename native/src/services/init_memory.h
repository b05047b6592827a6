/* Zero-filled allocations while MPI_Init runs under Slurm's PMI (init_memory.c).
 *
 * MPICH 5.0.2 exchanges each node root's business card over PMI as 4096
 * bytes from the start of UCX's worker address (MPID_MAX_BC_SIZE; the address
 * itself is about 1 KB): whatever follows the address in memory goes too,
 * hex-encoded in pieces of up to the server's value length, 1024, with runs of
 * zero bytes shortened ("[12]"). Slurm's PMI-1 server reads a request of at
 * most 1024 bytes, command and key included, so a piece of bytes that are not
 * zeros arrives cut in two ("mpi/pmi2: value not properly terminated in client
 * request") and MPI_Init fails on every rank (MPICH issue 6924 for the
 * length). Memory freed earlier holds Python's text and bytecode; memory
 * handed out zero-filled during MPI_Init, and the whole free pages given back
 * first, make what follows the address mostly zeros. Measured on the
 * simulated cluster: the Orbax example under srun --mpi=pmi2 on two nodes
 * failed 6 launches in 6 without, passed 8 in 8 with; other command lines
 * still failed now and then (MPICH's own buffers can follow the address). */
#ifndef MPI_COLLECTIVES_INIT_MEMORY_H
#define MPI_COLLECTIVES_INIT_MEMORY_H

/* Before MPI_Init: where Slurm's PMI serves this process (PMI_FD and
 * SLURM_MPI_TYPE set by srun --mpi=pmi2), glibc's malloc fills every block it
 * hands out with zeros (mallopt M_PERTURB) until mpic_init_memory_end().
 * Returns whether it did. */
int mpic_init_memory_begin(void);
/* After MPI_Init: malloc as before (the user's MALLOC_PERTURB_, else none). */
void mpic_init_memory_end(int begun);

#endif

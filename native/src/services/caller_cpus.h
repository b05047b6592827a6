/* Binding of the threads that call MPI, and only those (caller_cpus.c):
 * MPI_COLLECTIVES_BIND_CPUS=2. Python decides each rank's slice of its node
 * (mpi_collectives/services/tuning.py); a thread of XLA's that calls MPI moves
 * onto the slice at its first call and stays there, while XLA's other threads
 * (its compute pool) keep the whole CPU set the launcher gave. */
#ifndef MPI_COLLECTIVES_CALLER_CPUS_H
#define MPI_COLLECTIVES_CALLER_CPUS_H

/* The slice: n CPU numbers (0 <= cpu < CPU_SETSIZE); n == 0 turns it off.
 * The calling thread is never moved (the threads it starts inherit its set).
 * 0, or EINVAL for a number out of range. */
int mpic_caller_cpus_set(const int *cpus, int n);

/* How many threads have moved onto the slice so far. */
int mpic_caller_cpus_moved(void);

/* Called at every entry of XLA's collectives and transfers: the calling
 * thread's first call moves it; later calls cost one thread-local read. */
void mpic_caller_cpus_enter_slow(void);
extern int mpic_caller_cpus_on;
extern __thread int mpic_caller_cpus_done;
static inline void mpic_caller_cpus_enter(void) {
  if (__builtin_expect(mpic_caller_cpus_on && !mpic_caller_cpus_done, 0)) mpic_caller_cpus_enter_slow();
}

#endif

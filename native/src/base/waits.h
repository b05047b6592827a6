/* Calls in progress that wait for other ranks, and how many have begun
 * (treatment.txt's `waits`), for mpi_collectives.services.peers: relaxed atomics, a
 * few nanoseconds a call, no clock read. */
#ifndef MPI_COLLECTIVES_WAITS_H
#define MPI_COLLECTIVES_WAITS_H

extern long mpic_waiting_now;
extern unsigned long mpic_waits_begun;
static inline void mpic_wait_begin(void) {
  __atomic_fetch_add(&mpic_waits_begun, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&mpic_waiting_now, 1, __ATOMIC_RELAXED);
}
static inline void mpic_wait_end(void) { __atomic_fetch_sub(&mpic_waiting_now, 1, __ATOMIC_RELAXED); }

#endif

/* MPI_COLLECTIVES_BIND_CPUS=2 (caller_cpus.h). Why only the callers: a rank
 * bound whole to its slice gives XLA's compute pool that slice alone, and a
 * step whose compute would use the node's idle cores (ranks fewer than cores)
 * got slower; unbound, a thread spinning in MPI's shared-memory wait is moved
 * about and small collectives got slower. Moving the threads that call MPI,
 * and only those, keeps MPI's waits on their own cores while the compute
 * threads float. The move happens on the calling thread itself, at its first
 * call: no other thread's affinity is ever written. */
#define _GNU_SOURCE
#include "caller_cpus.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>

int mpic_caller_cpus_on;
__thread int mpic_caller_cpus_done;
static cpu_set_t slice;
static atomic_int moved;

int mpic_caller_cpus_set(const int *cpus, int n) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i = 0; i < n; i++) {
    if (cpus[i] < 0 || cpus[i] >= CPU_SETSIZE) return EINVAL;
    CPU_SET(cpus[i], &set);
  }
  /* Set before XLA runs anything (initialize() calls this before JAX's
   * backend exists), so no thread reads the slice while it is written. */
  slice = set;
  /* The thread that sets the slice (Python's, in initialize()) stays where it
   * is, though it calls MPI later: JAX's backend is created on it, and the
   * pool threads it starts take its CPU set. */
  mpic_caller_cpus_done = 1;
  __atomic_store_n(&mpic_caller_cpus_on, n > 0, __ATOMIC_RELEASE);
  return 0;
}

int mpic_caller_cpus_moved(void) { return atomic_load(&moved); }

void mpic_caller_cpus_enter_slow(void) {
  mpic_caller_cpus_done = 1;
  /* A failure (CPUs taken away by a cgroup meanwhile) leaves the thread where
   * the launcher put it: the call itself goes on either way. */
  /* Linux's sched_setaffinity with pid 0 moves the calling thread alone (in
   * libc since glibc 2.3, where pthread_setaffinity_np is libpthread's). */
  if (sched_setaffinity(0, sizeof slice, &slice) == 0) atomic_fetch_add(&moved, 1);
}

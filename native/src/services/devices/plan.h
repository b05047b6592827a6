/* Steps 2 and 3 of an event (devices.h), as pure functions: no MPI, no
 * state, so that they can be tested alone (tests/programs/plan_harness.c).
 * Every process computes the same plan from the same exchanged entries. */
#ifndef MPI_COLLECTIVES_DEVICES_PLAN_H
#define MPI_COLLECTIVES_DEVICES_PLAN_H

#include <stddef.h>

/* One group of the event, as every process sees it. */
struct mpic_planned {
  int color, n; /* XLA's color, and the number of devices */
  int first;    /* its first entry in the sorted entries */
  int q;        /* processes in it */
  int round;    /* the split (step 3) that makes its process communicator; -1: none (q < 2) */
  int mine;     /* members in the process the plan was made for */
};

struct mpic_device_plan {
  struct mpic_planned *groups;
  int ng;     /* groups */
  int rounds; /* splits of MPI_COMM_WORLD the event makes */
};

/* Sort the event's entries (ne records of color, key, process) by color and
 * key. */
void mpic_device_entries_sort(int *entries, int ne);

/* The groups of sorted entries and the rounds of splits, for process `me`
 * of `size` processes with L devices each: in a round no process takes part
 * twice. Returns 0; 1 with why the processes cannot be making one
 * collective's groups; 2 when out of memory (the plan is then empty). */
int mpic_device_plan_make(const int *entries, int ne, int size, int L, int me, struct mpic_device_plan *plan,
                          char *why, size_t whylen);
void mpic_device_plan_free(struct mpic_device_plan *plan);

#endif

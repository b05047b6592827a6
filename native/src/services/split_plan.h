/* Does a set of (color, key) pairs look like the groups of one XLA
 * collective (split_plan.c)? Pure: no MPI, no state; used for XLA's splits
 * (xla_policy.c) and the devices' events (devices/plan.c). */
#ifndef MPI_COLLECTIVES_SPLIT_PLAN_H
#define MPI_COLLECTIVES_SPLIT_PLAN_H

#include <stddef.h>

/* `pairs` holds n records of `stride` ints, each starting with color, key;
 * records whose color is `undefined` take part in no group. One collective
 * splits into groups of one size, each keyed 0..size-1. If the pairs break
 * that, says why in `why` (naming the `members`, "ranks" or "devices", of one
 * `what`, "split" or "collective") and returns 1. */
int mpic_split_plan_is_wrong(const int *pairs, int n, int stride, int undefined, const char *members,
                             const char *what, char *why, size_t whylen);

#endif

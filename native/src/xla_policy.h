/* What XLA's use of MPI needs from the wrapper (xla_policy.c). */
#ifndef MPI_COLLECTIVES_XLA_POLICY_H
#define MPI_COLLECTIVES_XLA_POLICY_H

#include <stddef.h>

/* The thread level to ask the library for when the caller asks `required`. */
int mpic_xla_thread_level(int required);

/* Does the set of (color, key) pairs of one split look like one XLA
 * collective's groups? If not, says why in `why`. (Exposed for tests.) */
int mpic_split_plan_is_wrong(const int *pairs, int n, int undefined, char *why, size_t whylen);

#endif

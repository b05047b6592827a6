/* What XLA's use of MPI needs from the wrapper (xla_policy.c). */
#ifndef MPI_COLLECTIVES_XLA_POLICY_H
#define MPI_COLLECTIVES_XLA_POLICY_H

#include "common.h"

/* The thread level to ask the library for when the caller asks `required`. */
int mpic_xla_thread_level(int required);

/* A thread level's name, for the log ("MPI_THREAD_MULTIPLE"). */
const char *mpic_thread_level_name(int level);

/* MPI_Is_thread_main: yes from any thread under MPI_THREAD_MULTIPLE. */
int mpic_xla_is_thread_main(int *flag);

/* XLA's MPI_Comm_split with one device per process: checked (two at once in
 * a process, keys that are not one collective's groups, a new rank that is
 * not the key) unless MPI_COLLECTIVES_CHECK_SPLITS=0; the new communicator is
 * tracked by agreement.c. */
int mpic_xla_split(MPIABI_Comm comm, int color, int key, MPIABI_Comm *newcomm);

#endif

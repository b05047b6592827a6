/* A thread of the wrapper's own that nobody joins (threads.c): the SIGTERM
 * grace and the liveness answer each start one. */
#ifndef MPI_COLLECTIVES_THREADS_H
#define MPI_COLLECTIVES_THREADS_H

/* Starts fn(arg) on a detached thread; 0, or pthread_create's error. */
int mpic_start_detached(void *(*fn)(void *), void *arg);

#endif

/* Watching the processes of the other ranks on this node, and this rank's
 * own end (peer_watch.c; the why is in mpi_collectives/peers.py). */
#ifndef MPI_COLLECTIVES_PEER_WATCH_H
#define MPI_COLLECTIVES_PEER_WATCH_H

#include <stddef.h>

/* This rank ends the job with its own line: its watcher process must not add
 * another, nor name the ranks the launcher kills next. */
int mpic_watch_self_quiet(void);

/* An MPI call failed: names ("rank R (pid P on HOST)") a rank of this node
 * that has ended, waiting up to wait_ms for one; 0 if none has. */
int mpic_watch_dead_peer(int wait_ms, char *out, size_t len);

#endif

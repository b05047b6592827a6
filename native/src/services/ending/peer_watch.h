/* Watching the processes of the other ranks on this node (peer_watch.c; the
 * why is in mpi_collectives/services/peers.py). Above end_job.c, which it calls. */
#ifndef MPI_COLLECTIVES_PEER_WATCH_H
#define MPI_COLLECTIVES_PEER_WATCH_H

#include <stddef.h>

/* An MPI call failed: names ("rank R (pid P on HOST)") a rank of this node
 * that has ended, waiting up to wait_ms for one; 0 if none has. */
int mpic_watch_dead_peer(int wait_ms, char *out, size_t len);

#endif

/* Watching the processes of the other ranks on this node, and this rank's
 * own end (peer_watch.c; the why is in mpi_collectives/peers.py). */
#ifndef MPI_COLLECTIVES_PEER_WATCH_H
#define MPI_COLLECTIVES_PEER_WATCH_H

/* This rank ends the job with its own line: its watcher process must not add
 * another, nor name the ranks the launcher kills next. */
int mpic_watch_self_quiet(void);

#endif

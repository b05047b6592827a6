/* A job asked to stop (SIGTERM from the launcher, scancel, timeout) stops:
 * one line per rank, then the rank ends (stop_signals.c). */
#ifndef MPI_COLLECTIVES_STOP_SIGNALS_H
#define MPI_COLLECTIVES_STOP_SIGNALS_H

/* Set once this rank has been asked to stop: a peer that ends a moment
 * earlier was asked too, and is not to blame (peer_watch.c). */
extern int mpic_stopping;

#endif

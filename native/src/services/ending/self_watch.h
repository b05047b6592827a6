/* This rank's own end, watched by a process of its own (self_watch.c), so
 * that the first rank of a node to die is named even when the launcher kills
 * the others at once. Below end_job.c, which quiets it. */
#ifndef MPI_COLLECTIVES_SELF_WATCH_H
#define MPI_COLLECTIVES_SELF_WATCH_H

/* This rank ends the job with its own line (or was asked to stop): its
 * watcher process must not add another, nor name the ranks the launcher
 * kills next. Async-signal-safe. */
int mpic_watch_self_quiet(void);

#endif

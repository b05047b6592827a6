/* The phases' watchdog (phases_watchdog.c): a native thread that ends a job
 * whose rank waits where Python cannot look.
 *
 * mpi_collectives/services/phases.py decides when a rank is stuck, from a
 * Python thread that beats here every half second. A main thread that holds
 * Python's lock inside a call into C (mpi4py's first lowercase collective on
 * a communicator duplicates it with the lock held; any long C call that does
 * not release it) stops that thread too: then this one decides, with the
 * same rules, from what MPI alone shows (phases.py's invariant: every rank
 * votes every phase or says once that it left). */
#ifndef MPI_COLLECTIVES_PHASES_WATCHDOG_H
#define MPI_COLLECTIVES_PHASES_WATCHDOG_H

/* The phases' tags besides the votes' (mpic_phase_tag): as phases.py's. */
enum { MPIC_PHASE_TEXT_TAG = 30001, MPIC_PHASE_STUCK_TAG = 30002, MPIC_PHASE_LEFT_TAG = 30003,
       MPIC_PHASE_LINE_MAX = 512 };

/* Starts the watchdog once (after mpic_phases_start): this rank, the job's
 * size, and the hold: how long every other rank's vote may have arrived while
 * this rank's main thread holds Python's lock before it is stuck. A later
 * call sets the hold alone. 0 or an error. */
int mpic_phases_watchdog_start(int rank, int size, double hold_s);
/* The Python watcher's beat; `voting`: the main thread is in a vote. */
void mpic_phases_watchdog_beat(int voting);
/* Rank 0: the tests run so far, in words, for the line when its report
 * cannot be written (its main thread unreachable). */
void mpic_phases_watchdog_progress(const char *words);

#endif

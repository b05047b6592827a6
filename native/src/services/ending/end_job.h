/* Ending the job: the one way this package stops a job it cannot let go on
 * (a wrong split, a dead peer, and through mpi_collectives.base.mpi.end_job every
 * stop decided in Python). */
#ifndef MPI_COLLECTIVES_END_JOB_H
#define MPI_COLLECTIVES_END_JOB_H

/* Print `line`, then end the whole job. */
__attribute__((noreturn)) void mpic_end_job_line(const char *line);
/* The same, for "mpi-collectives: error: " and the formatted text. */
__attribute__((noreturn)) void mpic_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Where another thread is ending the job, this one waits for the end instead of going on: a
 * collective that completed beside a failure (two threads on one communicator, one of them
 * stopped) hands back no result. */
void mpic_hold_if_ending(void);

#endif

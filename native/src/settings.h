/* The settings the native layer reads from the environment when it is
 * loaded (the rows of mpi_collectives/settings.py marked as read natively). */
#ifndef MPI_COLLECTIVES_SETTINGS_H
#define MPI_COLLECTIVES_SETTINGS_H

struct mpic_settings {
  int verbose;        /* MPI_COLLECTIVES_VERBOSE */
  int forced_family;  /* MPI_COLLECTIVES_ABI: an MPIC_FAMILY_*, 0 when unset, -1 when not understood */
  int thread_level;   /* MPI_COLLECTIVES_THREAD_LEVEL: 0..3 (single..multiple), -1: what the caller asks */
  int any_thread;     /* MPI_COLLECTIVES_ANY_THREAD */
  int check_splits;   /* MPI_COLLECTIVES_CHECK_SPLITS */
  int check_collectives; /* MPI_COLLECTIVES_CHECK_COLLECTIVES */
  int devices_timeout; /* MPI_COLLECTIVES_DEVICES_TIMEOUT, seconds */
  const char *libmpi; /* MPI_COLLECTIVES_LIBMPI, or NULL */
};
extern struct mpic_settings mpic_settings;
/* The first setting that was not understood, or "". */
extern char mpic_settings_error[512];

void mpic_read_settings(void);

#endif

/* What the launcher that started this process told it, from its environment
 * variables (the table in mpi_collectives/base/launchers.py, generated into
 * launchers.inc): read before MPI is up, for log lines and for the checks of
 * services/launchers.c. */
#ifndef MPI_COLLECTIVES_LAUNCHER_ENV_H
#define MPI_COLLECTIVES_LAUNCHER_ENV_H

#include <stddef.h>

struct mpic_launcher {
  const char *size_var, *rank_var, *name, *kind;
  const char *family; /* the ABI family of the library it wants, "" when it does not say */
};

/* A program that starts a job's processes, and its installation's family. */
struct mpic_launcher_program {
  const char *program, *family;
};

/* "rank R/N" as the launcher set them, "?" for what it did not set. */
const char *mpic_launcher_where(char *buf, size_t len);

/* The launcher that started more than one process, and how many (in
 * *started); NULL when none did. */
const struct mpic_launcher *mpic_started_by(int *started);

/* The ABI family the launcher's variables ask for, NULL when none says. */
const char *mpic_launcher_family(void);

/* The launcher program among this process's parent and grandparent
 * (/proc/PID/exe, resolved): writes its path into exe and returns its entry,
 * or NULL. */
const struct mpic_launcher_program *mpic_launcher_program(char *exe, size_t len);

#endif

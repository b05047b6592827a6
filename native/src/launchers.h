/* The launcher that started this process, from its environment variables
 * (the table in mpi_collectives/launchers.py, generated into launchers.inc),
 * and whether it belongs to the same MPI as the library. */
#ifndef MPI_COLLECTIVES_LAUNCHERS_H
#define MPI_COLLECTIVES_LAUNCHERS_H

#include <stddef.h>

struct mpic_launcher {
  const char *size_var, *rank_var, *name, *kind;
};

/* "rank R/N" as the launcher set them, "?" for what it did not set (for log
 * lines before MPI is up). */
const char *mpic_launcher_where(char *buf, size_t len);

/* Before MPI_Init: a launcher of another MPI makes the library fail with
 * cryptic errors; say what is wrong first. Ends the process on a mismatch. */
void mpic_check_launcher_before_init(void);
/* After MPI_Init: a world of 1 under a launcher that started more. */
void mpic_check_launcher(int world_size, int world_rank);

#endif

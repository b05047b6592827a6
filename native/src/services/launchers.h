/* Whether the launcher that started this process (base/launcher_env.h)
 * belongs to the same MPI as the library. */
#ifndef MPI_COLLECTIVES_LAUNCHERS_H
#define MPI_COLLECTIVES_LAUNCHERS_H

/* Before MPI_Init: a launcher of another MPI makes the library fail with
 * cryptic errors; say what is wrong first. Ends the process on a mismatch. */
void mpic_check_launcher_before_init(void);
/* After MPI_Init: a world of 1 under a launcher that started more. */
void mpic_check_launcher(int world_size, int world_rank);

#endif

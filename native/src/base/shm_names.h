/* The names in /dev/shm of the files this process maps, dropped where no
 * process opens them again (issue 81): the mappings stay, the names go, so
 * that a job the package ends with MPI_Abort leaves nothing in /dev/shm. */
#ifndef MPI_COLLECTIVES_SHM_NAMES_H
#define MPI_COLLECTIVES_SHM_NAMES_H

/* Remember the /dev/shm files mapped now (before MPI_Init: none of them the library's). */
void mpic_shm_names_before(void);
/* Unlink the /dev/shm files mapped now that were not mapped at mpic_shm_names_before (the library's,
 * made by MPI_Init); the number unlinked. */
int mpic_shm_names_drop_new(void);
/* The paths of those files (at most `most`, each under MPIC_SHM_NAME_MAX bytes): for a process that
 * must unlink them later without reading /proc (a forked watcher); how many. */
#define MPIC_SHM_NAME_MAX 256
int mpic_shm_names_list_new(char (*paths)[MPIC_SHM_NAME_MAX], int most);
/* Unlink the /dev/shm files that hold any of the n addresses; the number unlinked. */
int mpic_shm_names_drop_at(char *const *addresses, int n);

#endif

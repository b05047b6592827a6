/* The names in /dev/shm of the files this process maps (shm_names.h).
 *
 * MPICH keeps its files' names until MPI_Finalize (its intra-node segment,
 * made by MPI_Init) and MPI_Win_free (a shared window's), and so does Intel
 * MPI: a job ended by MPI_Abort leaves each in /dev/shm, about 2 MiB a job
 * for MPICH's segment. The package ends every failed job that way, and one
 * machine held 105 such files (220 MB) after a day of test runs; a
 * container's 64 MiB /dev/shm is full after about 30 failed jobs. A name is
 * needed until every process that maps the file has opened it, so:
 *   - a shared window's files, which every member maps inside
 *     MPI_Win_allocate_shared, go after the all-reduce that follows it
 *     (window.c), for the window's life;
 *   - the files MPI_Init made go only when the package ends the job
 *     (end_job.c): a library may open a peer's by name long after MPI_Init
 *     (Open MPI connects its ranks lazily past 32 of them,
 *     mpi_add_procs_cutoff), so no earlier point is safe.
 * A library that unlinks its own name at its end finds it gone (ENOENT),
 * which MPICH, Open MPI and Intel MPI pass over.
 * Files the process mapped before MPI_Init (Python's multiprocessing, the
 * program's own) are never touched. */
#define _GNU_SOURCE
#include "shm_names.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define KEPT 64
static char before[KEPT][MPIC_SHM_NAME_MAX];
static int kept = 0, overflow = 0;

/* Each /dev/shm mapping of this process: its range and path (the path's buffer reused). Returns 0 at the
 * end. */
static int next_mapping(FILE *f, unsigned long long *lo, unsigned long long *hi, char **path) {
  static char line[4096 + 128];
  while (fgets(line, sizeof line, f)) {
    int at = 0;
    if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %n", lo, hi, &at) < 2 || !at) continue;
    char *p = line + at;
    if (strncmp(p, "/dev/shm/", 9) != 0) continue;
    p[strcspn(p, "\n")] = 0;
    if (strstr(p, " (deleted)")) continue; /* its name is gone already */
    *path = p;
    return 1;
  }
  return 0;
}

static int known(const char *path) {
  for (int i = 0; i < kept; i++)
    if (!strcmp(before[i], path)) return 1;
  return 0;
}

void mpic_shm_names_before(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return;
  unsigned long long lo, hi;
  char *path;
  while (next_mapping(f, &lo, &hi, &path)) {
    if (known(path)) continue;
    if (kept == KEPT || strlen(path) >= sizeof before[0]) {
      overflow = 1; /* too many to tell apart: drop_new keeps every name */
      break;
    }
    snprintf(before[kept++], sizeof before[0], "%s", path);
  }
  fclose(f);
}

int mpic_shm_names_drop_new(void) {
  if (overflow) return 0;
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  unsigned long long lo, hi;
  char *path;
  int dropped = 0;
  while (next_mapping(f, &lo, &hi, &path))
    if (!known(path) && unlink(path) == 0) dropped++;
  fclose(f);
  return dropped;
}

int mpic_shm_names_list_new(char (*paths)[MPIC_SHM_NAME_MAX], int most) {
  if (overflow) return 0;
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  unsigned long long lo, hi;
  char *path;
  int listed = 0;
  while (listed < most && next_mapping(f, &lo, &hi, &path)) {
    if (known(path) || strlen(path) >= MPIC_SHM_NAME_MAX) continue;
    int again = 0; /* one file may be mapped several times */
    for (int i = 0; i < listed && !again; i++) again = !strcmp(paths[i], path);
    if (!again) snprintf(paths[listed++], MPIC_SHM_NAME_MAX, "%s", path);
  }
  fclose(f);
  return listed;
}

int mpic_shm_names_drop_at(char *const *addresses, int n) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  unsigned long long lo, hi;
  char *path;
  int dropped = 0;
  while (next_mapping(f, &lo, &hi, &path))
    for (int q = 0; q < n; q++) {
      uintptr_t a = (uintptr_t)addresses[q];
      if (a >= lo && a < hi) {
        if (unlink(path) == 0) dropped++;
        break;
      }
    }
  fclose(f);
  return dropped;
}

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
static int kept = 0, overflow = 0, taken = 0; /* taken: the list before MPI_Init was made */

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

/* Calls act(path, lo, hi, ctx) for each /dev/shm mapping of this process until it returns 0; the number of
 * calls that returned 2 (a name dropped or listed). */
static int each_mapping(int (*act)(const char *path, unsigned long long lo, unsigned long long hi, void *ctx),
                        void *ctx) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  unsigned long long lo, hi;
  char *path;
  int counted = 0, more = 1;
  while (more && next_mapping(f, &lo, &hi, &path)) {
    int got = act(path, lo, hi, ctx);
    counted += got == 2;
    more = got != 0;
  }
  fclose(f);
  return counted;
}

static int remember(const char *path, unsigned long long lo, unsigned long long hi, void *ctx) {
  (void)lo, (void)hi, (void)ctx;
  if (known(path)) return 1;
  if (kept == KEPT || strlen(path) >= sizeof before[0]) {
    overflow = 1; /* too many to tell apart: drop_new keeps every name */
    return 0;
  }
  snprintf(before[kept++], sizeof before[0], "%s", path);
  return 1;
}

void mpic_shm_names_before(void) {
  each_mapping(remember, NULL);
  taken = 1;
}

static int drop_if_new(const char *path, unsigned long long lo, unsigned long long hi, void *ctx) {
  (void)lo, (void)hi, (void)ctx;
  return !known(path) && unlink(path) == 0 ? 2 : 1;
}

/* Without the list made before MPI_Init (MPI started by the program, mpi4py), nothing is known to be the
 * library's: every name is kept (a program's own files, Python's shared memory, must never go). */
int mpic_shm_names_drop_new(void) { return overflow || !taken ? 0 : each_mapping(drop_if_new, NULL); }

struct listing {
  char (*paths)[MPIC_SHM_NAME_MAX];
  int most, listed;
};

static int list_if_new(const char *path, unsigned long long lo, unsigned long long hi, void *ctx) {
  (void)lo, (void)hi;
  struct listing *l = ctx;
  if (l->listed == l->most) return 0;
  if (known(path) || strlen(path) >= MPIC_SHM_NAME_MAX) return 1;
  for (int i = 0; i < l->listed; i++) /* one file may be mapped several times */
    if (!strcmp(l->paths[i], path)) return 1;
  snprintf(l->paths[l->listed++], MPIC_SHM_NAME_MAX, "%s", path);
  return 2;
}

int mpic_shm_names_list_new(char (*paths)[MPIC_SHM_NAME_MAX], int most) {
  struct listing l = {paths, most, 0};
  return overflow || !taken ? 0 : each_mapping(list_if_new, &l);
}

struct addresses {
  char *const *at;
  int n;
};

static int drop_if_holding(const char *path, unsigned long long lo, unsigned long long hi, void *ctx) {
  const struct addresses *a = ctx;
  for (int q = 0; q < a->n; q++) {
    uintptr_t p = (uintptr_t)a->at[q];
    if (p >= lo && p < hi) return unlink(path) == 0 ? 2 : 1;
  }
  return 1;
}

int mpic_shm_names_drop_at(char *const *addresses, int n) {
  struct addresses a = {addresses, n};
  return each_mapping(drop_if_holding, &a);
}

/* What XLA's use of MPI needs (treatment.txt: own xla_policy.c).
 *
 * XLA asks for MPI_THREAD_FUNNELED, then runs collectives on its pool
 * threads while the user's own MPI calls (mpi4py, h5py) run on the main
 * thread, and refuses to create a communicator unless MPI_Is_thread_main
 * says yes. So the wrapper asks the library for MPI_THREAD_MULTIPLE, and
 * with it granted, says yes from any thread. What stays unsafe is the order
 * of XLA's MPI_Comm_split calls, which must match on every rank: the checks
 * in MPIABI_Comm_split turn a mismatch into a stop with one sentence instead
 * of a silently wrong communicator. */
#include <stdio.h>
#include <stdlib.h>
#include "agreement.h"
#include "common.h"
#include "device_groups.h"
#include "end_job.h"
#include "family.h"
#include "log.h"
#include "settings.h"
#include "xla_policy.h"

/* ---- the thread level ---- */
int mpic_xla_thread_level(int required) {
  const int levels[4] = {MPIABI_THREAD_SINGLE, MPIABI_THREAD_FUNNELED, MPIABI_THREAD_SERIALIZED,
                         MPIABI_THREAD_MULTIPLE};
  if (mpic_settings.thread_level < 0) return required; /* MPI_COLLECTIVES_THREAD_LEVEL=requested */
  int asked = 0;
  for (int i = 0; i < 4; i++)
    if (levels[i] == required) asked = i;
  return levels[asked > mpic_settings.thread_level ? asked : mpic_settings.thread_level];
}

/* ---- communicators from any thread ---- */
MPIABI_EXPORT int MPIABI_Is_thread_main(int *flag) {
  int level = 0;
  if (!mpic_family) mpic_not_loaded("MPI_Is_thread_main");
  if (mpic_settings.any_thread && MPIABI_Query_thread(&level) == 0 && level == MPIABI_THREAD_MULTIPLE) {
    *flag = 1;
    return 0;
  }
  return mpic_next_Is_thread_main(flag);
}

/* ---- XLA's splits ----
 * Every process calls MPI_Comm_split(MPI_COMM_WORLD, color, key) once per
 * new device group, on first use: color is the global id of the group's
 * first device, key the device's position in the group. */
static int splits_running = 0;

static int int_cmp(const void *a, const void *b) {
  return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* One XLA collective splits into groups of one size, each keyed 0..n-1. */
int mpic_split_plan_is_wrong(const int *pairs, int n, int undefined, char *why, size_t whylen) {
  int *keys = malloc(sizeof(int) * (size_t)(n ? n : 1));
  char *seen = calloc((size_t)(n ? n : 1), 1);
  int group_size = -1, wrong = 0;
  if (!keys || !seen) {
    free(keys);
    free(seen);
    return 0;
  }
  for (int i = 0; i < n && !wrong; i++) {
    int color = pairs[2 * i];
    if (seen[i] || color == undefined) continue;
    int m = 0;
    for (int j = i; j < n; j++)
      if (!seen[j] && pairs[2 * j] == color) {
        seen[j] = 1;
        keys[m++] = pairs[2 * j + 1];
      }
    qsort(keys, (size_t)m, sizeof(int), int_cmp);
    for (int k = 0; k < m && !wrong; k++)
      if (keys[k] != k) {
        snprintf(why, whylen, "the %d ranks with color %d have keys that are not 0..%d", m, color, m - 1);
        wrong = 1;
      }
    if (!wrong && group_size >= 0 && m != group_size) {
      snprintf(why, whylen, "groups of %d and of %d ranks in one split", group_size, m);
      wrong = 1;
    }
    group_size = m;
  }
  free(keys);
  free(seen);
  return wrong;
}

MPIABI_EXPORT int MPIABI_Comm_split(MPIABI_Comm comm, int color, int key, MPIABI_Comm *newcomm) {
  int check = mpic_settings.check_splits;
  int rank = -1, size = 0;
  if (!mpic_family) mpic_not_loaded("MPI_Comm_split");
  /* Several CPU devices per process: each device's split is one part of a
   * collective's communicators (device_groups.c). */
  if (mpic_local_devices > 1 && comm == MPIABI_COMM_WORLD) return mpic_device_split(color, key, newcomm);
  if (check) {
    MPIABI_Comm_rank(comm, &rank);
    MPIABI_Comm_size(comm, &size);
    if (__atomic_fetch_add(&splits_running, 1, __ATOMIC_SEQ_CST) != 0) {
      mpic_fatal("rank %d: two MPI_Comm_split calls ran at the same time in one process (XLA creating "
                 "communicators for two device groups at once: collectives dispatched from two Python "
                 "threads, or several CPU devices per process that initialize() was not told of), so the "
                 "ranks may pair them up wrongly. Fix: dispatch collectives from one thread; with several CPU "
                 "devices per process, set their number before mpi_collectives.initialize() "
                 "(JAX_NUM_CPU_DEVICES=N or jax.config.update('jax_num_cpu_devices', N))",
                 rank);
    }
    /* Every rank sees every rank's (color, key) and judges the same way:
     * anything but one XLA collective's groups means the ranks are creating
     * different groups. */
    int mine[2] = {color, key};
    int *all = malloc(sizeof(int) * 2 * (size_t)size);
    char why[1024];
    int gathered = all && MPIABI_Allgather(mine, 2, MPIABI_INT, all, 2, MPIABI_INT, comm) == 0;
    /* A key is a device's place in its group: one at or past the number of
     * processes means groups of more devices than there are processes. Which
     * sentence a job gets must not depend on whether its devices' splits
     * happened to overlap in time (the check above). */
    int max_key = -1;
    for (int i = 0; gathered && i < size; i++)
      if (all[2 * i] != MPIABI_UNDEFINED && all[2 * i + 1] > max_key) max_key = all[2 * i + 1];
    if (comm == MPIABI_COMM_WORLD && max_key >= size)
      mpic_fatal("rank %d: XLA splits MPI_COMM_WORLD into a device group of at least %d devices on %d processes: "
                 "there are several CPU devices per process that initialize() was not told of, so the ranks "
                 "would pair them up wrongly. Fix: set their number before mpi_collectives.initialize() "
                 "(JAX_NUM_CPU_DEVICES=N or jax.config.update('jax_num_cpu_devices', N)); "
                 "MPI_COLLECTIVES_CHECK_SPLITS=0 if this split does not come from XLA",
                 rank, max_key + 1, size);
    if (gathered && mpic_split_plan_is_wrong(all, size, MPIABI_UNDEFINED, why, sizeof why)) {
      mpic_fatal("rank %d: XLA's MPI_Comm_split calls do not match across ranks (%s): the ranks are "
                 "creating the communicators of different device groups at the same time, so collectives "
                 "would pair up wrongly. Fix: run the same jitted programs in the same order on every "
                 "process (every process must take part in every collective), or call "
                 "mpi_collectives.prepare(mesh) first; MPI_COLLECTIVES_CHECK_SPLITS=0 if this split "
                 "does not come from XLA",
                 rank, why);
    }
    free(all);
  }
  int ret = mpic_next_Comm_split(comm, color, key, newcomm);
  if (check) __atomic_fetch_sub(&splits_running, 1, __ATOMIC_SEQ_CST);
  if (ret != 0 || !check || *newcomm == MPIABI_COMM_NULL) return ret;
  mpic_agreement_track(*newcomm);
  int newrank = -1, newsize = 0;
  MPIABI_Comm_rank(*newcomm, &newrank);
  MPIABI_Comm_size(*newcomm, &newsize);
  mpic_log(2, "MPI_Comm_split(color=%d, key=%d) -> rank %d of %d", color, key, newrank, newsize);
  /* In the communicator XLA meant to get, the new rank is the key. */
  if (key >= 0 && newrank != key) {
    mpic_fatal("rank %d: MPI_Comm_split(color=%d, key=%d) gave rank %d of %d, so the ranks created "
               "XLA's device-group communicators in different orders and this one would be wrong. "
               "Fix: run the same jitted programs in the same order on every process (every process "
               "must take part in every collective), or set MPI_COLLECTIVES_CHECK_SPLITS=0 if this "
               "split does not come from XLA",
               rank, color, key, newrank, newsize);
  }
  return ret;
}

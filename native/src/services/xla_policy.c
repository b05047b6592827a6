/* What XLA's use of MPI needs (xla_policy.h; entry/ calls it).
 *
 * XLA asks for MPI_THREAD_FUNNELED, then runs collectives on its pool
 * threads while the user's own MPI calls (mpi4py, h5py) run on the main
 * thread, and refuses to create a communicator unless MPI_Is_thread_main
 * says yes. So the wrapper asks the library for MPI_THREAD_MULTIPLE, and
 * with it granted, says yes from any thread. What stays unsafe is the order
 * of XLA's MPI_Comm_split calls, which must match on every rank: the checks
 * in mpic_xla_split turn a mismatch into a stop with one sentence instead
 * of a silently wrong communicator. */
#include <stdio.h>
#include <stdlib.h>
#include "comm_record.h"
#include "common.h"
#include "end_job.h"
#include "flight.h"
#include "log.h"
#include "node.h"
#include "settings.h"
#include "signature.h"
#include "split_plan.h"
#include "xla_policy.h"

/* ---- the thread level ---- */
int mpic_xla_thread_level(int required) {
  const int levels[4] = {MPIABI_THREAD_SINGLE, MPIABI_THREAD_FUNNELED, MPIABI_THREAD_SERIALIZED,
                         MPIABI_THREAD_MULTIPLE};
  if (mpic_settings.thread_level == MPIC_THREAD_LEVEL_REQUESTED) return required;
  int asked = 0;
  for (int i = 0; i < 4; i++)
    if (levels[i] == required) asked = i;
  return levels[asked > mpic_settings.thread_level ? asked : mpic_settings.thread_level];
}

const char *mpic_thread_level_name(int level) {
  if (level == MPIABI_THREAD_SINGLE) return "MPI_THREAD_SINGLE";
  if (level == MPIABI_THREAD_FUNNELED) return "MPI_THREAD_FUNNELED";
  if (level == MPIABI_THREAD_SERIALIZED) return "MPI_THREAD_SERIALIZED";
  if (level == MPIABI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
  return "an unknown thread level";
}

/* ---- communicators from any thread ---- */
int mpic_xla_is_thread_main(int *flag) {
  int level = 0;
  if (mpic_settings.any_thread && mpic_next_Query_thread(&level) == 0 && level == MPIABI_THREAD_MULTIPLE) {
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

/* In the communicator XLA meant to get, the new rank is the key. */
static void check_new(MPIABI_Comm newcomm, int rank, int color, int key) {
  int newrank = -1, newsize = 0;
  mpic_next_Comm_rank(newcomm, &newrank);
  mpic_next_Comm_size(newcomm, &newsize);
  mpic_log(2, "MPI_Comm_split(color=%d, key=%d) -> rank %d of %d", color, key, newrank, newsize);
  if (key >= 0 && newrank != key) {
    mpic_fatal("rank %d: MPI_Comm_split(color=%d, key=%d) gave rank %d of %d, so the ranks created "
               "XLA's device-group communicators in different orders and this one would be wrong. "
               "Fix: run the same jitted programs in the same order on every process (every process "
               "must take part in every collective), or set MPI_COLLECTIVES_CHECK_SPLITS=0 if this "
               "split does not come from XLA",
               rank, color, key, newrank, newsize);
  }
}

int mpic_xla_split(MPIABI_Comm comm, int color, int key, MPIABI_Comm *newcomm) {
  /* A split of an intercommunicator is an intercommunicator: never one of XLA's device groups (XLA splits
   * MPI_COMM_WORLD), and its collectives mean something else (an all-reduce returns the other group's
   * sum), so neither the checks nor the node path may take it. MPICH's own test suite found it: its
   * intercommunicator tests hung through the path (scripts/mpich_test_suite.py, issue 71). */
  int inter = 0;
  if (comm != MPIABI_COMM_WORLD && mpic_next_Comm_test_inter(comm, &inter) == 0 && inter)
    return mpic_next_Comm_split(comm, color, key, newcomm);
  int check = mpic_settings.check_splits;
  int rank = -1, size = 0;
  /* Every process splits the world in the same order; other splits (a program's own, of other
   * communicators) have no id that means the same on every member. */
  int id = comm == MPIABI_COMM_WORLD ? mpic_flight_new_split() : -1;
  struct mpic_call call = {MPIC_SPLIT, 0, MPIABI_DATATYPE_NULL, MPIABI_OP_NULL};
  mpic_ticket ticket = mpic_flight_begin(mpic_signature(&call), id, 0);
  if (check) {
    mpic_next_Comm_rank(comm, &rank);
    mpic_next_Comm_size(comm, &size);
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
    int gathered = all && mpic_next_Allgather(mine, 2, MPIABI_INT, all, 2, MPIABI_INT, comm) == 0;
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
    if (gathered && mpic_split_plan_is_wrong(all, size, 2, MPIABI_UNDEFINED, "ranks", "split", why, sizeof why)) {
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
  mpic_flight_end(ticket);
  if (check) __atomic_fetch_sub(&splits_running, 1, __ATOMIC_SEQ_CST);
  if (ret != 0 || *newcomm == MPIABI_COMM_NULL) return ret;
  /* whatever the checks: the flight record and the failure's sentence need it */
  struct mpic_record *r = mpic_record_add(*newcomm, id);
  if (check) check_new(*newcomm, rank, color, key);
  if (r) mpic_node_created(r); /* every member is here, the split checked */
  return ret;
}


/* What MPICH's test suite needs beside the generated mpi.h (make_mpi_h.py): its MPI_COMM_WORLD, a split
 * of the world as XLA splits it (key = rank: the wrapper records it, and its node path may take the
 * suite's collectives on it), made in MPI_Init and MPI_Init_thread. Compiled into each test's library. */
#include "mpiabi.h"

MPIABI_Comm mpit_world;

/* Before MPI_Init the world is the library's own: a test that copies MPI_COMM_WORLD into a variable
 * before initializing (pt2pt/bsend1, pt2pt/rqfreeb) gets a valid communicator, as it would natively. */
__attribute__((constructor)) static void world_before_init(void) { mpit_world = MPIABI_COMM_WORLD; }

static int split(int ret) {
  int rank = 0;
  MPIABI_Comm world;
  if (ret == 0) ret = MPIABI_Comm_rank(MPIABI_COMM_WORLD, &rank);
  if (ret == 0) ret = MPIABI_Comm_split(MPIABI_COMM_WORLD, 0, rank, &world);
  /* named as the world is (comm/commname reads it) */
  if (ret == 0) ret = MPIABI_Comm_set_name(world, "MPI_COMM_WORLD");
  if (ret == 0) mpit_world = world;
  return ret;
}

int mpit_Init(int *argc, char ***argv) { return split(MPIABI_Init(argc, argv)); }

int mpit_Init_thread(int *argc, char ***argv, int required, int *provided) {
  return split(MPIABI_Init_thread(argc, argv, required, provided));
}

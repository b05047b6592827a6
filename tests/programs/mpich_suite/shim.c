/* What MPICH's test suite needs beside the generated mpi.h (make_mpi_h.py): its MPI_COMM_WORLD, a split
 * of the world as XLA splits it (key = rank: the wrapper records it, and its node path may take the
 * suite's collectives on it), made in MPI_Init and MPI_Init_thread. Compiled into each test's library. */
#include "mpiabi.h"

MPIABI_Comm mpit_world;

static int split(int ret) {
  int rank = 0;
  if (ret == 0) ret = MPIABI_Comm_rank(MPIABI_COMM_WORLD, &rank);
  if (ret == 0) ret = MPIABI_Comm_split(MPIABI_COMM_WORLD, 0, rank, &mpit_world);
  return ret;
}

int mpit_Init(int *argc, char ***argv) { return split(MPIABI_Init(argc, argv)); }

int mpit_Init_thread(int *argc, char ***argv, int required, int *provided) {
  return split(MPIABI_Init_thread(argc, argv, required, provided));
}

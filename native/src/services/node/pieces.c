/* What the collectives' loops share besides the turns (internal.h): the
 * library's arithmetic on a piece, and the table of a call's parts. */
#include <stdlib.h>
#include "call_failed.h"
#include "end_job.h"
#include "internal.h"

void mpic_node_reduce_local(const void *in, void *inout, int64_t count, MPIABI_Datatype type, MPIABI_Op op) {
  if (count <= 0) return;
  int ret = mpic_next_Reduce_local(in, inout, (int)count, type, op);
  if (ret != 0) mpic_call_failed("MPI_Reduce_local (the node path's)", ret);
}

/* Not the library's call on failure: the other ranks are already in the window's. */
int64_t *mpic_node_parts(int64_t P, const char *what) {
  int64_t *t = calloc((size_t)(2 * P), sizeof *t);
  if (!t)
    mpic_fatal("rank %d: out of memory in %s through the node path. Fix: give the job more memory, or "
               "MPI_COLLECTIVES_NODE_PATH=0",
               mpic_record_world_rank(), what);
  return t;
}

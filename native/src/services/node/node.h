/* The node's own data path (node/): for a communicator XLA created whose
 * ranks share a node, large collectives move through a shared-memory window
 * of MPI's (MPI_Comm_split_type MPI_COMM_TYPE_SHARED, MPI_Win_allocate_shared:
 * standard MPI-3, on every family the wrapper loads), at the speed of the
 * node's memory instead of the library's own shared-memory protocol (MPICH
 * and Open MPI are 3-4x off that floor on a 16-core node).
 *
 * The one caller is the dispatcher (dispatch.c), after the agreement check,
 * so the check, the flight record, the stall report and a failure's sentence
 * cover a rank waiting here as they cover one waiting in the library. The
 * folder, as Open MPI's coll/xhc is laid out:
 *   policy.c        whether the path takes a call (the one place that decides)
 *   window.c        a communicator's window: made at the first call taken,
 *                   room checked, freed at MPI_Finalize in one order
 *   across.c        a communicator over several nodes: the composed all-reduce
 *   turns.c         the chunks' turns, stamps and fences: the only file that
 *                   knows the memory model
 *   allreduce.c, gather.c, reduce_scatter.c, exchange.c: one per collective */
#ifndef MPI_COLLECTIVES_NODE_H
#define MPI_COLLECTIVES_NODE_H

#include "comm_record.h"
#include "library_calls.h"

/* Whether the path takes `call` (one of library_calls.h's) with args on r:
 * the settings, the datatype and operation (predefined, contiguous,
 * commutative), the size. The first call it takes on r makes r's window,
 * collectively over r's members (every member is at the same call: the
 * dispatcher asks after the agreement check); where the window cannot be had
 * r keeps the library's for good, with one line. */
int mpic_node_takes(struct mpic_record *r, mpic_library_call call, const void *args);
/* The call through r's window (mpic_node_takes said yes): returns 0, or the
 * library's error code from the one library call the path may make (the
 * all-reduce between nodes); anything else ends the job. */
int mpic_node_run(struct mpic_record *r, mpic_library_call call, void *args);

/* r's communicator is about to be freed: r forgets its window, which stays
 * until mpic_node_finalize. No MPI call: MPI_Win_free synchronises the
 * window's ranks (MPI-3.1 11.2.5), MPI_Comm_free does not, and XLA frees its
 * communicators in an order of its own on each rank (jax 0.4's hash-map
 * order), so a free that waited could hang. */
void mpic_node_forget(struct mpic_record *r);
/* Before MPI_Finalize: every window freed, in the one order every rank
 * agreed when they were made, so that none is left to the library. */
void mpic_node_finalize(void);

#endif

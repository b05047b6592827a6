/* The node's own data path (node.c): for a communicator XLA created whose
 * ranks all share one node, a shared-memory window of MPI's (MPI_Comm_split_type
 * MPI_COMM_TYPE_SHARED, MPI_Win_allocate_shared: standard MPI-3, on every
 * family the wrapper loads) through which large all-reduces, all-gathers,
 * reduce-scatters and all-to-alls move, at the speed of the node's memory
 * instead of the library's own shared-memory protocol (MPICH and Open MPI are 3-4x off that floor on a 16-core node).
 *
 * Attached by the services that record a communicator (xla_policy.c,
 * devices/groups.c) right after its creation, which every member makes at
 * the same point; detached before it is freed (entry/xla_calls.c,
 * devices/handles.c) and at MPI_Finalize (entry/lifecycle.c). Its collectives
 * are calls the dispatcher makes (dispatch.h) after the agreement check, so
 * the check, the flight record, the stall report and a failure's sentence
 * cover a rank waiting in it as they cover one waiting in the library. */
#ifndef MPI_COLLECTIVES_NODE_H
#define MPI_COLLECTIVES_NODE_H

#include <stddef.h>
#include "comm_record.h"
#include "common.h"
#include "settings.h" /* MPIC_NODE_PATH_COLLECTIVES_*: which collective mpic_node_takes asks about */

/* Each rank's share of a communicator's window: two halves of CHUNK bytes,
 * used in turn by the collectives, and a slot of CHUNK bytes for the
 * exchanges of an all-to-all (node.c). */
#define MPIC_NODE_CHUNK (512 * 1024)
#define MPIC_NODE_SHARE (3 * MPIC_NODE_CHUNK)

/* A new communicator's window, when MPI_COLLECTIVES_NODE_PATH=1, it has two
 * ranks or more and they all share one node (or, with
 * MPI_COLLECTIVES_NODE_PATH_ACROSS_NODES=1, each node holds as many of them,
 * two or more: a window per node, for its all-reduces); collective over r's
 * members. */
void mpic_node_attach(struct mpic_record *r);
/* Before r's communicator is freed: its window freed (collective). */
void mpic_node_detach(struct mpic_record *r);
/* Before MPI_Finalize: every window freed, in the order the communicators
 * were created (the same on every rank), so that none is left to the library. */
void mpic_node_finalize(void);

/* Whether the node path takes a collective of `count` elements of `type` on
 * r: `collective` is its MPIC_NODE_PATH_COLLECTIVES_* bit
 * (MPI_COLLECTIVES_NODE_PATH_COLLECTIVES names those it takes), count the
 * all-reduce's buffer, the all-gather's result, the reduce-scatter's or
 * all-to-all's input. */
int mpic_node_takes(const struct mpic_record *r, int collective, MPIABI_Datatype type, int64_t count);
/* The collectives through the window, for mpic_dispatch's `call`: args is
 * the struct of dispatch.h for each, on a communicator with a window. Each
 * falls back to the library's own call where the window cannot take it
 * (MPI_IN_PLACE in a reduce-scatter, an all-gather of mixed types, an
 * element larger than a rank's piece of a chunk). */
int mpic_node_call_allreduce(void *args);
int mpic_node_call_allgather(void *args);
int mpic_node_call_reduce_scatter(void *args);

/* XLA's all-to-all, one MPI_Sendrecv with each peer (arrivals.c): whether
 * the window takes this exchange (the same count and type both ways, two
 * other ranks of r, the all-to-all's bytes within the path's limits), and
 * the exchange through it, with `status` filled as the library's would be. */
int mpic_node_takes_sendrecv(const struct mpic_record *r, int sendcount, MPIABI_Datatype sendtype, int dest,
                             int recvcount, MPIABI_Datatype recvtype, int source);
int mpic_node_sendrecv(struct mpic_record *r, const void *sendbuf, int count, MPIABI_Datatype type, int dest,
                       void *recvbuf, int source, int recvtag, MPIABI_Status *status);

#endif

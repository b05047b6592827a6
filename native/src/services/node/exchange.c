/* One exchange of XLA's all-to-all through the window (internal.h). XLA
 * makes one MPI_Sendrecv with each peer in turn: this rank sends to `dest`
 * and receives from `source`, which differ beyond 2 ranks. MPIC_NODE_CHUNK
 * bytes at a time: copy the piece into this rank's exchange slot; tell dest
 * it is there, and learn from source that its piece is (one message each
 * way, carrying the sizes, so that ranks that disagree about the transfer
 * are named instead of reading the wrong bytes); copy source's piece out of
 * its slot; tell source it has been read, and learn from dest that this
 * rank's slot may be written again. The messages go on the window's own
 * communicator (the same ranks), so they never meet XLA's own; fences around
 * each (turns.c); a rank waits in MPI_Sendrecv, where the stall report and
 * the peer watch find it. */
#include <string.h>
#include "call_failed.h"
#include "end_job.h"
#include "internal.h"

enum { READY_TAG = 1, READ_TAG = 2 };

static int finish(struct mpic_sendrecv_args *a);

static __attribute__((noreturn)) void disagree(struct mpic_node *n, struct mpic_sendrecv_args *a, int64_t total,
                                               long long coming) {
  mpic_fatal("rank %d: an all-to-all expected %lld bytes from rank %d but that rank sends %lld: the ranks "
             "disagree about the transfer's size. No result was returned. Fix: make every rank run the same "
             "collectives with the same shapes",
             n->world[n->rank], (long long)total, n->world[a->source], coming);
}

static void message(struct mpic_node *n, const void *out, void *in, int count, int to, int from, int tag) {
  mpic_turn_fence(n);
  int ret = mpic_next_Sendrecv(out, count, MPIABI_LONG_LONG, to, tag, in, count, MPIABI_LONG_LONG, from, tag, n->shm,
                               MPIABI_STATUS_IGNORE);
  if (ret != 0) mpic_call_failed("MPI_Sendrecv (the node path's)", ret);
  mpic_turn_fence(n);
}

/* Where the ranks read each other's buffers in place (direct.c): this rank tells dest where its send
 * buffer is and learns source's (one message each way, with the sizes), reads source's bytes straight
 * into its result, then tells source it has read them and learns from dest that its own buffer is free. */
static void direct(struct mpic_node *n, struct mpic_sendrecv_args *a, int64_t total) {
  long long sending[2] = {total, (long long)(uintptr_t)a->send}, coming[2] = {-1, 0};
  message(n, sending, coming, 2, a->dest, a->source, READY_TAG);
  if (coming[0] != total) disagree(n, a, total, coming[0]);
  mpic_node_read_peer(n, a->source, a->recv, (uint64_t)coming[1], (size_t)total);
  message(n, NULL, NULL, 0, a->source, a->dest, READ_TAG);
}

int mpic_node_exchange(struct mpic_node *n, struct mpic_sendrecv_args *a, int esize) {
  /* bytes relayed as they are: a piece need not end on an element */
  int64_t total = (int64_t)esize * a->sendcount, per_chunk = MPIC_NODE_CHUNK;
  if (n->direct == 1) { /* decided when the window was made (mpic_node_created) */
    direct(n, a, total);
    return finish(a);
  }
  char *mine = n->shares[n->rank] + MPIC_NODE_SLOT;
  const char *theirs = n->shares[a->source] + MPIC_NODE_SLOT;
  for (int64_t first = 0; first < total; first += per_chunk) {
    size_t bytes = (size_t)(total - first < per_chunk ? total - first : per_chunk);
    memcpy(mine, (const char *)a->send + first, bytes);
    long long sending = total, coming = -1;
    message(n, &sending, &coming, 1, a->dest, a->source, READY_TAG);
    if (coming != total) disagree(n, a, total, coming);
    memcpy((char *)a->recv + first, theirs, bytes);
    message(n, NULL, NULL, 0, a->source, a->dest, READ_TAG);
  }
  return finish(a);
}

/* as the library's would read: all of it, from source */
static int finish(struct mpic_sendrecv_args *a) {
  a->status->MPI_SOURCE = a->source;
  a->status->MPI_TAG = a->recvtag;
  a->status->MPI_ERROR = 0;
  mpic_next_Status_set_elements(a->status, a->recvtype, a->recvcount);
  return 0;
}

/* The conversions that are not inline (convert.h): lengths of handle arrays
 * that depend on a communicator, and arrays a nonblocking call may read
 * until its request completes. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "convert.h"

/* Through the loaded family's own forwarders (family.h: struct mpic_sizing). */
int mpic_alltoallw_count(MPIABI_Comm comm) {
  const struct mpic_sizing *f = mpic_family->sizing;
  int inter = 0, n = 0;
  if (f->comm_test_inter(comm, &inter) != 0) return 0;
  if (inter ? f->comm_remote_size(comm, &n) : f->comm_size(comm, &n)) return 0;
  return n;
}

int mpic_neighbor_count(MPIABI_Comm comm, int outgoing) {
  const struct mpic_sizing *f = mpic_family->sizing;
  int topo = MPIABI_UNDEFINED, in = 0, out = 0, weighted = 0, rank = 0;
  if (f->topo_test(comm, &topo) != 0) return 0;
  if (topo == MPIABI_DIST_GRAPH) {
    if (f->dist_graph_neighbors_count(comm, &in, &out, &weighted) != 0) return 0;
    return outgoing ? out : in;
  }
  if (topo == MPIABI_CART) {
    if (f->cartdim_get(comm, &in) != 0) return 0;
    return 2 * in;
  }
  if (topo == MPIABI_GRAPH) {
    if (f->comm_rank(comm, &rank) || f->graph_neighbors_count(comm, rank, &in)) return 0;
    return in;
  }
  return 0;
}

struct pending {
  uintptr_t request;
  void *a, *b;
};
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pending *pending = NULL;
static int npending = 0, cappending = 0;
static int pending_count = 0; /* read without the lock on the hot path */

void mpic_keep_until_complete(uintptr_t request, void *a, void *b) {
  if (!a && !b) return;
  pthread_mutex_lock(&pending_lock);
  if (npending == cappending) {
    int cap = cappending ? 2 * cappending : 16;
    struct pending *p = realloc(pending, sizeof *p * (size_t)cap);
    if (!p) { /* keep the arrays alive forever rather than risk a use after free */
      pthread_mutex_unlock(&pending_lock);
      return;
    }
    pending = p;
    cappending = cap;
  }
  pending[npending++] = (struct pending){request, a, b};
  __atomic_store_n(&pending_count, npending, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&pending_lock);
}

/* Before a call that may complete requests: a copy of them, or NULL when
 * nothing is kept (the usual case: one atomic load). */
uintptr_t *mpic_pending_snapshot(const uintptr_t *reqs, int n) {
  if (!__atomic_load_n(&pending_count, __ATOMIC_ACQUIRE) || !reqs || n <= 0) return NULL;
  uintptr_t *copy = malloc(sizeof *copy * (size_t)n);
  if (copy) memcpy(copy, reqs, sizeof *copy * (size_t)n);
  return copy;
}

/* After it: the requests it nulled are complete; free what was kept for them. */
void mpic_pending_release(uintptr_t *before, const uintptr_t *after, int n) {
  pthread_mutex_lock(&pending_lock);
  for (int i = 0; i < n; i++) {
    if (after[i] != MPIABI_REQUEST_NULL || before[i] == MPIABI_REQUEST_NULL) continue;
    for (int j = 0; j < npending; j++)
      if (pending[j].request == before[i]) {
        free(pending[j].a);
        free(pending[j].b);
        pending[j] = pending[--npending];
        break;
      }
  }
  __atomic_store_n(&pending_count, npending, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&pending_lock);
  free(before);
}

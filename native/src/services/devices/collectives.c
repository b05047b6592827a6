/* Step 5 (devices.h): a collective on a device communicator is a rendezvous
 * of the group's local devices; the last to arrive makes one MPI call for
 * the process, over the group's process communicator, through the
 * dispatcher (dispatch.h: the check, carrying small data as one device per
 * process does, the flight record, the failure's sentence). */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "call_failed.h"
#include "dispatch.h"
#include "end_job.h"
#include "internal.h"
#include "waits.h"

static void local_posts_agree(struct group *g) {
  struct post *a = &g->posts[0];
  for (int s = 1; s < g->m; s++) {
    struct post *b = &g->posts[s];
    if (b->kind != a->kind || b->count != a->count || b->type != a->type || b->op != a->op)
      mpic_fatal("rank %d: the CPU devices of this process disagree about a collective on device group %d: "
                 "device %d called %s of %d elements, device %d called %s of %d (or another datatype or "
                 "reduction). No result was returned. Fix: make every device run the same collectives with "
                 "the same shapes",
                 mpic_device_world_rank(), g->color, g->keys[0], mpic_kind_names[a->kind], a->count, g->keys[s], mpic_kind_names[b->kind],
                 b->count);
  }
}

/* A count the library's int arguments can hold: the devices' counts multiplied (a process's
 * several devices' parts, a group's whole buffer) can pass INT_MAX where each device's does not,
 * and a count that wrapped would reduce or move only part of the data, silently. */
static int int_count(const struct group *g, int64_t count, const char *what) {
  if (count > INT_MAX)
    mpic_fatal("rank %d: %s over device group %d needs %lld elements in one MPI call, more than MPI's int "
               "counts hold (%d). No result was returned. Fix: split the array into parts of fewer elements, "
               "or use fewer CPU devices per process",
               mpic_device_world_rank(), what, g->color, (long long)count, INT_MAX);
  return (int)count;
}

static void run_allreduce(struct group *g) {
  struct post *p = g->posts;
  size_t bytes = (size_t)p[0].count * mpic_device_type_size(p[0].type);
  void *acc = p[0].recv;
  if (acc != p[0].send) memcpy(acc, p[0].send, bytes);
  for (int s = 1; s < g->m; s++) {
    int ret = mpic_next_Reduce_local(p[s].send, acc, p[0].count, p[0].type, p[0].op);
    if (ret != 0) mpic_call_failed("MPI_Reduce_local", ret);
  }
  if (g->q > 1) {
    struct mpic_call c = {MPIC_ALL_REDUCE, p[0].count, p[0].type, p[0].op};
    struct mpic_carry carry = mpic_carry_reduce(&c, acc, p[0].count, acc, 0, p[0].count);
    struct mpic_allreduce_args a = {MPIABI_IN_PLACE, acc, p[0].count, p[0].type, p[0].op, g->pc};
    mpic_dispatch(g->record, &c, &carry, "MPI_Allreduce", mpic_call_allreduce, &a);
  }
  for (int s = 1; s < g->m; s++)
    if (p[s].recv != acc) memcpy(p[s].recv, acc, bytes);
}

static void run_allgather(struct group *g) {
  struct post *p = g->posts;
  size_t block = (size_t)p[0].count * mpic_device_type_size(p[0].type);
  char *out = p[0].recv;
  if (g->q == 1 || g->blocked) {
    for (int s = 0; s < g->m; s++) memcpy(out + (size_t)g->keys[s] * block, p[s].send, block);
    if (g->q > 1) {
      struct mpic_call c = {MPIC_ALL_GATHER, p[0].count, p[0].type, MPIABI_OP_NULL};
      int64_t at = (int64_t)g->first_of_proc[g->pos] * p[0].count;
      struct mpic_carry carry = mpic_carry_place(&c, out + (size_t)g->first_of_proc[g->pos] * block, at,
                                                 (int64_t)g->m * p[0].count, out, (int64_t)g->n * p[0].count);
      struct mpic_allgather_args a = {MPIABI_IN_PLACE, 0, p[0].type, out,
                                      int_count(g, (int64_t)p[0].count * g->m, "an all-gather"), p[0].type, g->pc};
      mpic_dispatch(g->record, &c, &carry, "MPI_Allgather", mpic_call_allgather, &a);
    }
  } else {
    char *tmp = mpic_device_scratch(g, block * (size_t)g->n);
    int *counts = malloc(sizeof(int) * (size_t)g->q), *displs = malloc(sizeof(int) * (size_t)g->q);
    if (!counts || !displs) mpic_fatal("rank %d: out of memory in an all-gather over device group %d",
                                       mpic_device_world_rank(), g->color);
    for (int x = 0; x < g->q; x++) {
      counts[x] = int_count(g, (int64_t)g->count_of_proc[x] * p[0].count, "an all-gather");
      displs[x] = int_count(g, (int64_t)g->first_of_proc[x] * p[0].count, "an all-gather");
    }
    for (int s = 0; s < g->m; s++) memcpy(tmp + (size_t)(g->first_of_proc[g->pos] + s) * block, p[s].send, block);
    struct mpic_call c = {MPIC_ALL_GATHER, p[0].count, p[0].type, MPIABI_OP_NULL};
    struct mpic_carry carry = mpic_carry_place(&c, tmp + (size_t)g->first_of_proc[g->pos] * block,
                                               (int64_t)displs[g->pos], counts[g->pos], tmp,
                                               (int64_t)g->n * p[0].count);
    struct mpic_allgatherv_args a = {MPIABI_IN_PLACE, 0, p[0].type, tmp, counts, displs, p[0].type, g->pc};
    mpic_dispatch(g->record, &c, &carry, "MPI_Allgatherv", mpic_call_allgatherv, &a);
    for (int key = 0; key < g->n; key++)
      memcpy(out + (size_t)key * block, tmp + (size_t)(g->first_of_proc[g->proc_of_key[key]] + g->slot_of_key[key]) * block,
             block);
    free(counts);
    free(displs);
  }
  for (int s = 1; s < g->m; s++) memcpy(p[s].recv, out, block * (size_t)g->n);
}

static void run_reduce_scatter(struct group *g) {
  struct post *p = g->posts;
  size_t esize = mpic_device_type_size(p[0].type), block = (size_t)p[0].count * esize, total = block * (size_t)g->n;
  int n_elems = int_count(g, (int64_t)p[0].count * g->n, "a reduce-scatter");
  char *acc = mpic_device_scratch(g, 2 * total);
  memcpy(acc, p[0].send, total);
  for (int s = 1; s < g->m; s++) {
    int ret = mpic_next_Reduce_local(p[s].send, acc, n_elems, p[0].type, p[0].op);
    if (ret != 0) mpic_call_failed("MPI_Reduce_local", ret);
  }
  if (g->q == 1) {
    for (int s = 0; s < g->m; s++) memcpy(p[s].recv, acc + (size_t)g->keys[s] * block, block);
    return;
  }
  char *in = acc, *out = acc + total;
  if (!g->blocked) { /* each process's blocks together, in process order */
    in = acc + total;
    for (int key = 0; key < g->n; key++)
      memcpy(in + (size_t)(g->first_of_proc[g->proc_of_key[key]] + g->slot_of_key[key]) * block,
             acc + (size_t)key * block, block);
    out = acc;
  }
  int *counts = malloc(sizeof(int) * (size_t)g->q);
  if (!counts) mpic_fatal("rank %d: out of memory in a reduce-scatter over device group %d", mpic_device_world_rank(),
                          g->color);
  for (int x = 0; x < g->q; x++)
    counts[x] = int_count(g, (int64_t)g->count_of_proc[x] * p[0].count, "a reduce-scatter");
  struct mpic_call c = {MPIC_REDUCE_SCATTER, n_elems, p[0].type, p[0].op};
  struct mpic_carry carry = mpic_carry_reduce(&c, in, n_elems, out, (int64_t)g->first_of_proc[g->pos] * p[0].count,
                                              counts[g->pos]);
  struct mpic_reduce_scatter_args a = {in, out, counts, p[0].type, p[0].op, g->pc};
  mpic_dispatch(g->record, &c, &carry, "MPI_Reduce_scatter", mpic_call_reduce_scatter, &a);
  free(counts);
  for (int s = 0; s < g->m; s++) memcpy(p[s].recv, out + (size_t)s * block, block);
}

static int rendezvous(MPIABI_Comm comm, struct post *mine) {
  struct handle *h = mpic_device_handle(comm);
  struct group *g = h->g;
  pthread_mutex_lock(&g->mu);
  if (g->posts[h->slot].posted)
    mpic_fatal("rank %d: device %d of group %d started a collective while its previous one on the same group "
               "was still running (collectives dispatched from two threads at once). Fix: dispatch "
               "collectives from one thread",
               mpic_device_world_rank(), h->key, g->color);
  unsigned long round = g->round;
  g->posts[h->slot] = *mine;
  g->posts[h->slot].posted = 1;
  if (++g->arrived < g->m) {
    mpic_wait_begin();
    while (g->round == round) pthread_cond_wait(&g->cv, &g->mu);
    mpic_wait_end();
    pthread_mutex_unlock(&g->mu);
    return 0;
  }
  pthread_mutex_unlock(&g->mu);
  /* The last device of this process: the others wait until the round ends. */
  local_posts_agree(g);
  mpic_wait_begin();
  switch (g->posts[0].kind) {
    case MPIC_ALL_REDUCE: run_allreduce(g); break;
    case MPIC_ALL_GATHER: run_allgather(g); break;
    default: run_reduce_scatter(g); break;
  }
  mpic_wait_end();
  pthread_mutex_lock(&g->mu);
  for (int s = 0; s < g->m; s++) g->posts[s].posted = 0;
  g->arrived = 0;
  g->round++;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  return 0;
}

int mpic_device_allreduce(const void *sendbuf, void *recvbuf, int count, MPIABI_Datatype type, MPIABI_Op op,
                          MPIABI_Comm comm) {
  struct post p = {MPIC_ALL_REDUCE, count, type, op, sendbuf, recvbuf, 0};
  return rendezvous(comm, &p);
}

int mpic_device_allgather(const void *sendbuf, int count, MPIABI_Datatype type, void *recvbuf, MPIABI_Comm comm) {
  struct post p = {MPIC_ALL_GATHER, count, type, MPIABI_OP_NULL, sendbuf, recvbuf, 0};
  return rendezvous(comm, &p);
}

int mpic_device_reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPIABI_Datatype type,
                               MPIABI_Op op, MPIABI_Comm comm) {
  struct handle *h = mpic_device_handle(comm);
  for (int i = 1; i < h->g->n; i++)
    if (recvcounts[i] != recvcounts[0])
      mpic_fatal("rank %d: a reduce-scatter over several CPU devices per process with unequal parts (%d and %d). "
                 "Fix: use parts of one size",
                 mpic_device_world_rank(), recvcounts[0], recvcounts[i]);
  struct post p = {MPIC_REDUCE_SCATTER, recvcounts[0], type, op, sendbuf, recvbuf, 0};
  return rendezvous(comm, &p);
}


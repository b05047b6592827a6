/* Step 4 (devices.h): what each of this process's devices gets back from its
 * split: a process communicator itself (one device per process in the
 * group), or a device communicator standing for (group, key). */
#include <pthread.h>
#include <stdlib.h>
#include "comm_record.h"
#include "end_job.h"
#include "groups.h"
#include "internal.h"
#include "log.h"

/* Where each key lives: proc_of_key, slot_of_key, count_of_proc,
 * first_of_proc, this process's keys and place, and the block layout. */
static void place_members(struct group *g, const struct mpic_planned *p, const int *entries, int me) {
  g->proc_of_key = calloc((size_t)p->n, sizeof(int));
  g->slot_of_key = calloc((size_t)p->n, sizeof(int));
  g->count_of_proc = calloc((size_t)p->q, sizeof(int));
  g->first_of_proc = calloc((size_t)p->q, sizeof(int));
  int *world_of_proc = calloc((size_t)p->q, sizeof(int));
  if (!g->proc_of_key || !g->slot_of_key || !g->count_of_proc || !g->first_of_proc || !world_of_proc)
    mpic_fatal("rank %d: out of memory creating device groups", me);
  int nq = 0;
  for (int key = 0; key < p->n; key++) {
    int w = entries[3 * (p->first + key) + 2], at = -1;
    for (int x = 0; x < nq; x++)
      if (world_of_proc[x] == w) at = x;
    if (at < 0) world_of_proc[at = nq++] = w;
    g->proc_of_key[key] = at;
    g->slot_of_key[key] = g->count_of_proc[at]++;
    if (w == me) {
      g->pos = at;
      g->keys[g->m++] = key;
    }
  }
  free(world_of_proc);
  g->blocked = 1;
  for (int x = 0; x < nq; x++) {
    g->first_of_proc[x] = x ? g->first_of_proc[x - 1] + g->count_of_proc[x - 1] : 0;
    if (g->count_of_proc[x] != g->count_of_proc[0]) g->blocked = 0;
  }
  for (int key = 0; key < p->n; key++)
    if (g->first_of_proc[g->proc_of_key[key]] + g->slot_of_key[key] != key) g->blocked = 0;
}

/* A group with one device on each of its processes: the process
 * communicator is the device one, its rank the key. */
static void give_process_comm(const struct mpic_planned *p, MPIABI_Comm pc, int id,
                              struct mpic_device_arrival **batch, int nb, int me) {
  int rank = -1;
  mpic_next_Comm_rank(pc, &rank);
  mpic_record_add(pc, id);
  for (int b = 0; b < nb; b++)
    if (batch[b]->color == p->color) {
      if (rank != batch[b]->key)
        mpic_fatal("rank %d: the communicator for device group %d gave rank %d to the device with key %d", me,
                   p->color, rank, batch[b]->key);
      batch[b]->result = pc;
    }
  mpic_log(2, "device group %d: %d devices on %d processes, one each: MPI communicator", p->color, p->n, p->q);
}

void mpic_device_group_give(const struct mpic_planned *p, const int *entries, MPIABI_Comm pc, int id,
                            struct mpic_device_arrival **batch, int nb, int me) {
  if (p->q == p->n && p->q > 1) {
    give_process_comm(p, pc, id, batch, nb, me);
    return;
  }
  struct group *g = calloc(1, sizeof *g);
  if (!g) mpic_fatal("rank %d: out of memory creating device groups", me);
  g->color = p->color;
  g->n = p->n;
  g->q = p->q;
  g->pc = pc;
  place_members(g, p, entries, me);
  if (g->pc != MPIABI_COMM_NULL) {
    int rank = -1;
    mpic_next_Comm_rank(g->pc, &rank);
    if (rank != g->pos)
      mpic_fatal("rank %d: the process communicator for device group %d gave rank %d where %d was expected", me,
                 g->color, rank, g->pos);
    g->record = mpic_record_add(g->pc, id);
  }
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  MPIABI_Comm comms[MPIC_MAX_LOCAL_DEVICES];
  mpic_device_handles_new(g, comms);
  for (int s = 0; s < g->m; s++)
    for (int b = 0; b < nb; b++)
      if (batch[b]->color == g->color && batch[b]->key == g->keys[s]) batch[b]->result = comms[s];
  mpic_log(2, "device group %d: %d devices on %d processes, %d here (keys %d..), %s layout", g->color, g->n, g->q,
           g->m, g->keys[0], g->blocked ? "block" : "general");
}

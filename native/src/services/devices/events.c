/* Steps 1 to 3 (devices.h): a process's L splits of one collective gather
 * into an event; the thread that brings the L-th runs it: one exchange of
 * every process's (color, key) pairs, the plan every process makes alike
 * (plan.c), the splits of MPI_COMM_WORLD into process communicators, and
 * step 4 (groups.c) for each group with a member here. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "end_job.h"
#include "flight.h"
#include "signature.h"
#include "groups.h"
#include "internal.h"
#include "log.h"
#include "plan.h"
#include "settings.h"
#include "waits.h"

int mpic_local_devices = 1;

int mpic_devices_set_local(int n) {
  if (n < 1 || n > MPIC_MAX_LOCAL_DEVICES) return -1;
  mpic_local_devices = n;
  return 0;
}

/* A whole number >= 0 that is all of `text` (up to `end`, or its end), or -1. */
static long whole(const char *text, const char *end) {
  if (!text || text == end || !*text) return -1;
  long n = 0;
  for (const char *p = text; p != end && *p; p++) {
    if (*p < '0' || *p > '9' || n > 1000000) return -1;
    n = n * 10 + (*p - '0');
  }
  return n;
}

/* Where JAX itself reads it, as jax_compat.configured_cpu_devices does:
 * JAX_NUM_CPU_DEVICES (the jax_num_cpu_devices option's variable; 0 means 1),
 * else the last --xla_force_host_platform_device_count=N of XLA_FLAGS. */
int mpic_devices_from_environment(void) {
  long n = whole(getenv("JAX_NUM_CPU_DEVICES"), NULL);
  if (n < 0) {
    static const char flag[] = "--xla_force_host_platform_device_count=";
    const char *flags = getenv("XLA_FLAGS");
    for (const char *at = flags ? strstr(flags, flag) : NULL; at; at = strstr(at + 1, flag)) {
      const char *value = at + sizeof flag - 1;
      long v = whole(value, value + strcspn(value, " \t"));
      if (v >= 0) n = v;
    }
  }
  if (n < 0) return 1;
  return n < 1 ? 1 : n > MPIC_MAX_LOCAL_DEVICES ? (int)MPIC_MAX_LOCAL_DEVICES + 1 : (int)n;
}

/* ---- 1. events ---- */
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cv = PTHREAD_COND_INITIALIZER;
static struct mpic_device_arrival *pending[MPIC_MAX_LOCAL_DEVICES];
static int npending = 0;
static unsigned long events_filled = 0, events_run = 0;

static void run_event(struct mpic_device_arrival **batch, int nb);

int mpic_device_split(int color, int key, MPIABI_Comm *newcomm) {
  int L = mpic_local_devices;
  struct mpic_device_arrival me = {color, key, 0, 0, MPIABI_COMM_NULL};
  pthread_mutex_lock(&ev_mu);
  mpic_log(3, "device split: color %d, key %d (%d of %d here)", color, key, npending + 1, L);
  pending[npending++] = &me;
  if (npending < L) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += mpic_settings.devices_timeout;
    mpic_wait_begin();
    while (!me.done) {
      int r = pthread_cond_timedwait(&ev_cv, &ev_mu, &deadline);
      if (r == ETIMEDOUT && !me.taken)
        mpic_fatal("rank %d: only %d of this process's %d CPU devices started a collective within %d s (XLA "
                   "creating the communicator of device group %d): a program that runs on some of a "
                   "process's devices only cannot run over MPI with several devices per process. Fix: run "
                   "every program with collectives over all devices (a mesh of jax.devices()), or raise "
                   "MPI_COLLECTIVES_DEVICES_TIMEOUT if a device is just slow to get there",
                   mpic_device_world_rank(), npending, L, mpic_settings.devices_timeout, color);
    }
    mpic_wait_end();
    pthread_mutex_unlock(&ev_mu);
    *newcomm = me.result;
    return 0;
  }
  struct mpic_device_arrival *batch[MPIC_MAX_LOCAL_DEVICES];
  memcpy(batch, pending, sizeof(*batch) * (size_t)npending);
  for (int i = 0; i < npending; i++) batch[i]->taken = 1;
  int nb = npending;
  npending = 0;
  unsigned long mine = events_filled++;
  while (events_run != mine) pthread_cond_wait(&ev_cv, &ev_mu);
  pthread_mutex_unlock(&ev_mu);
  run_event(batch, nb);
  pthread_mutex_lock(&ev_mu);
  for (int i = 0; i < nb; i++) batch[i]->done = 1;
  events_run++;
  pthread_cond_broadcast(&ev_cv);
  pthread_mutex_unlock(&ev_mu);
  *newcomm = me.result;
  return 0;
}

/* ---- 2. the exchange ---- */
static __attribute__((noreturn)) void plan_is_wrong(const char *why) {
  mpic_fatal("rank %d: the processes are creating different device groups at once (%s), so XLA's "
             "collectives would pair up wrongly: programs run in different orders or from two threads, or "
             "meshes that arrange the same devices differently, so that a collective repeats some but not all "
             "of an earlier one's device groups (XLA then creates communicators on some devices only). Fix: run "
             "the same jitted programs in the same order on every process, from one thread, each over all "
             "devices, with one arrangement of the devices per set of mesh axes",
             mpic_device_world_rank(), why);
}

/* Every process's record (L, its number of splits, their colors and keys),
 * gathered over MPI_COMM_WORLD; returns the entries (color, key, process) of
 * the whole event, sorted, and their number in *ne. */
static int *exchange(struct mpic_device_arrival **batch, int nb, int size, int me, int *ne) {
  int L = mpic_local_devices;
  enum { R = 2 + 2 * MPIC_MAX_LOCAL_DEVICES };
  int rec[R];
  memset(rec, 0, sizeof rec);
  rec[0] = L;
  rec[1] = nb;
  for (int i = 0; i < nb; i++) rec[2 + 2 * i] = batch[i]->color, rec[3 + 2 * i] = batch[i]->key;
  int *all = malloc(sizeof(int) * (size_t)R * (size_t)size);
  int *entries = malloc(sizeof(int) * 3 * (size_t)size * (size_t)MPIC_MAX_LOCAL_DEVICES); /* color, key, process */
  if (!all || !entries) mpic_fatal("rank %d: out of memory creating device groups", me);
  struct mpic_call call = {MPIC_DEVICE_EXCHANGE, 0, MPIABI_DATATYPE_NULL, MPIABI_OP_NULL};
  mpic_ticket ticket = mpic_flight_begin(mpic_signature(&call), mpic_flight_new_split(), 0);
  if (mpic_next_Allgather(rec, R, MPIABI_INT, all, R, MPIABI_INT, MPIABI_COMM_WORLD) != 0)
    mpic_fatal("rank %d: MPI_Allgather over MPI_COMM_WORLD failed while creating device groups", me);
  mpic_flight_end(ticket);
  int n = 0;
  for (int p = 0; p < size; p++) {
    int *r = all + (size_t)p * R;
    if (r[0] != L) {
      char why[256];
      snprintf(why, sizeof why, "rank %d has %d CPU devices, rank %d has %d", me, L, p, r[0]);
      mpic_fatal("rank %d: the processes have different numbers of CPU devices (%s). Fix: give every process "
                 "the same number (JAX_NUM_CPU_DEVICES or jax_num_cpu_devices, set before initialize())",
                 me, why);
    }
    for (int i = 0; i < r[1] && i < MPIC_MAX_LOCAL_DEVICES; i++) {
      entries[3 * n] = r[2 + 2 * i];
      entries[3 * n + 1] = r[3 + 2 * i];
      entries[3 * n + 2] = p;
      n++;
    }
  }
  free(all);
  mpic_device_entries_sort(entries, n);
  *ne = n;
  return entries;
}

/* ---- 3. the splits: one per round; a process in none of the round's
 * groups passes MPI_UNDEFINED. Returns each group's process communicator,
 * and in ids the ordinal of the split that made it (flight.h). */
static MPIABI_Comm *split_rounds(const struct mpic_device_plan *plan, const int *entries, int me, int *ids) {
  MPIABI_Comm *pcs = calloc((size_t)(plan->ng ? plan->ng : 1), sizeof *pcs);
  if (!pcs) mpic_fatal("rank %d: out of memory creating device groups", me);
  for (int k = 0; k < plan->ng; k++) pcs[k] = MPIABI_COMM_NULL;
  for (int r = 0; r < plan->rounds; r++) {
    int color = MPIABI_UNDEFINED, key = 0, which = -1;
    for (int k = 0; k < plan->ng; k++)
      if (plan->groups[k].round == r && plan->groups[k].mine) {
        const struct mpic_planned *g = &plan->groups[k];
        which = color = k;
        for (int e = g->first; e < g->first + g->n; e++)
          if (entries[3 * e + 2] == me) {
            key = entries[3 * e + 1];
            break;
          }
      }
    MPIABI_Comm pc = MPIABI_COMM_NULL;
    int id = mpic_flight_new_split();
    if (mpic_next_Comm_split(MPIABI_COMM_WORLD, color, key, &pc) != 0)
      mpic_fatal("rank %d: MPI_Comm_split failed while creating device groups", me);
    if (which >= 0) pcs[which] = pc, ids[which] = id;
  }
  return pcs;
}

static void run_event(struct mpic_device_arrival **batch, int nb) {
  int size = 0, me = mpic_device_world_rank(), ne = 0;
  mpic_next_Comm_size(MPIABI_COMM_WORLD, &size);
  int *entries = exchange(batch, nb, size, me, &ne);
  struct mpic_device_plan plan;
  char why[512];
  int wrong = mpic_device_plan_make(entries, ne, size, mpic_local_devices, me, &plan, why, sizeof why);
  if (wrong == 2) mpic_fatal("rank %d: out of memory creating device groups", me);
  if (wrong) plan_is_wrong(why);
  int *ids = calloc((size_t)(plan.ng ? plan.ng : 1), sizeof *ids);
  if (!ids) mpic_fatal("rank %d: out of memory creating device groups", me);
  MPIABI_Comm *pcs = split_rounds(&plan, entries, me, ids);
  for (int k = 0; k < plan.ng; k++) /* 4. */
    if (plan.groups[k].mine) mpic_device_group_give(&plan.groups[k], entries, pcs[k], ids[k], batch, nb, me);
  free(pcs);
  free(ids);
  mpic_device_plan_free(&plan);
  free(entries);
}

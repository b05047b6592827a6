/* Several CPU devices per process over MPI (treatment.txt: own device_groups.c).
 *
 * What XLA does. With L CPU devices per process, every device runs the
 * program on a thread of its own. A collective's first use on a device
 * group makes each local device in it call MPI_Comm_split(MPI_COMM_WORLD,
 * color, key) from its own thread, at about the same time: color is the
 * global id of the group's first device (process * 2048 + local index), key
 * the device's place in the group. XLA then treats the communicator it gets
 * as one rank per device: MPI_Comm_rank must be the key and MPI_Comm_size
 * the group's size, and it calls MPI_Allreduce, MPI_Allgather,
 * MPI_Reduce_scatter, MPI_Irecv + MPI_Isend + MPI_Wait (collective permute)
 * and MPI_Sendrecv (all-to-all) on it with device ranks, from each device's
 * thread. MPI cannot express this: a process is one rank, and L concurrent
 * splits of one communicator pair up wrongly.
 *
 * What the wrapper does instead (MPI_COLLECTIVES_DEVICES, told by the Python
 * layer from JAX's settings, is L):
 *
 * 1. Splits are gathered into events. The L splits of one collective's first
 *    use in a process (one per local device) form an event; the thread that
 *    brings the L-th runs it, events strictly one after another, in the
 *    order they filled up. Every process therefore runs its k-th event at
 *    the same point as every other process, as XLA's splits would have to.
 *    A device that does not come within MPI_COLLECTIVES_DEVICES_TIMEOUT
 *    seconds (a program over some of a process's devices only) ends the job
 *    with one sentence: XLA would wait forever for the other processes'
 *    devices in the same situation.
 * 2. An event is one MPI_Allgather over MPI_COMM_WORLD of every process's L
 *    (color, key) pairs. Every process then sees all groups of the
 *    collective and judges them the same way: each color's keys must be
 *    exactly 0..n-1, every group of the same size n, every process with L
 *    pairs. Anything else means the processes are creating different
 *    groups (programs in different orders, two dispatching threads): the
 *    job ends with one sentence, never a wrong communicator.
 * 3. One communicator of processes per group that spans processes, made by
 *    MPI_Comm_split over the world: groups are put in rounds in which no
 *    process takes part twice, and each round is one split (a process in
 *    none of that round's groups passes MPI_UNDEFINED), so an event costs at
 *    most L splits. A process's rank in it follows its smallest key.
 * 4. What XLA gets back:
 *    - a group with one device on each of its processes: that process
 *      communicator itself, whose rank is then the key. No cost at all, and
 *      the usual checks of agreement.c apply.
 *    - any other group (several local devices, or only local ones): a
 *      device communicator, a handle the wrapper reserved (an address in a
 *      PROT_NONE mapping of its own, which no library handle can equal)
 *      standing for (group, key).
 * 5. A collective on a device communicator is a rendezvous of the group's
 *    local devices: each posts its call; the last to arrive checks that all
 *    posted the same collective (kind, count, datatype, reduction), combines
 *    the local parts in key order (MPI_Reduce_local for reductions), makes
 *    one MPI call over the process communicator (after agreement.c's
 *    signature check there), and copies each device's part out; then the
 *    others return. All-reduce and reduce-scatter reduce the local parts
 *    first; all-gather places them; when each process's keys are one
 *    block in process order (the usual layout) the MPI call works in place
 *    in a device's own output, otherwise through a reordering buffer.
 * 6. Point-to-point (permute, all-to-all): a transfer between two devices of
 *    one process is a copy through the group's mailbox (first send to a
 *    device matched with its first receive from that device, as MPI orders
 *    messages); between processes it is MPI_Isend/MPI_Irecv on the process
 *    communicator with a tag naming both devices (their places among their
 *    process's members, and XLA's tag). A transfer that cannot complete at
 *    once returns a request the wrapper reserved; MPI_Wait on it waits for
 *    the copy.
 *
 * Order safety stays as with one device per process: the splits of an event
 * must match across processes (checked in 2), each collective's signature
 * must match across processes (agreement.c) and across the local devices
 * (checked in 5), and one device may not run two collectives on one group
 * at once (two dispatching threads: checked in 5).
 *
 * What this cannot see: XLA keeps each device's communicator per group, so a
 * collective whose groups repeat some of an earlier collective's (two meshes
 * that arrange the same devices differently) makes only the devices of its
 * new groups split. A process's event then takes splits of two collectives,
 * and the check in 2 stops the job; a process none of whose devices is in a
 * new group makes no split at all, and the others wait for it in the
 * exchange (as XLA's own splits of MPI_COMM_WORLD wait with one device per
 * process) until it finishes its program and mpi_collectives.peers names
 * it. The split's color and key do not say which devices a group holds or
 * how many, so no process can tell a repeated group from a missing one. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "agreement.h"
#include "common.h"
#include "device_groups.h"
#include "end_job.h"
#include "family.h"
#include "log.h"
#include "settings.h"
#include "waits.h"

int mpic_local_devices = 1;

/* For Python (mpi_collectives.mpi.set_local_devices), before the first collective. */
MPIABI_EXPORT int mpic_set_local_devices(int n) {
  if (n < 1 || n > MPIC_MAX_LOCAL_DEVICES) return -1;
  mpic_local_devices = n;
  return 0;
}

/* ---- reserved handles ----
 * Communicator handles are REGION + i (i < MAX_HANDLES), request handles
 * REGION + MAX_HANDLES + j: addresses of a mapping no one can use, so no
 * MPI library's handle (a small integer, or a pointer to a live object) can
 * be equal to one. */
#define MAX_HANDLES 65536
#define MAX_REQUESTS 65536
static uintptr_t region = 0;
static pthread_once_t region_once = PTHREAD_ONCE_INIT;

static void map_region(void) {
  void *p = mmap(NULL, MAX_HANDLES + MAX_REQUESTS, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    mpic_fatal("could not reserve address space for device communicators (%s). Fix: use one CPU device per "
               "process",
               strerror(errno));
  region = (uintptr_t)p;
}

struct group;
struct handle {
  struct group *g;
  int key;  /* the device's rank in the group */
  int slot; /* its place among this process's members of the group */
  int freed;
};
static struct handle *handles[MAX_HANDLES];
static int nhandles = 0;
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

int mpic_is_device_comm(MPIABI_Comm comm) {
  uintptr_t r = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
  return r && comm - r < MAX_HANDLES;
}
int mpic_is_device_request(MPIABI_Request request) {
  uintptr_t r = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
  return r && request - r - MAX_HANDLES < MAX_REQUESTS;
}

static struct handle *handle_of(MPIABI_Comm comm) { return handles[comm - region]; }

/* ---- groups ---- */
enum { K_ALLREDUCE = 1, K_ALLGATHER = 2, K_REDUCE_SCATTER = 3 };
static const char *const kind_text[] = {"?", "all-reduce", "all-gather", "reduce-scatter"};

struct post { /* one local device's collective call */
  int kind, count;
  MPIABI_Datatype type;
  MPIABI_Op op;
  const void *send;
  void *recv;
  int posted;
};

struct message; /* the mailbox, below */

struct group {
  int color, n;          /* XLA's color (its first device's id) and the number of devices */
  int m;                 /* of them in this process */
  int keys[MPIC_MAX_LOCAL_DEVICES]; /* this process's members, ascending */
  int q, pos;            /* processes in the group, and this one's place among them */
  MPIABI_Comm pc;        /* the processes' communicator; MPIABI_COMM_NULL when q == 1 */
  int *proc_of_key;      /* n: the place of the process holding each key */
  int *slot_of_key;      /* n: the key's place among that process's members */
  int *count_of_proc;    /* q: members per process */
  int *first_of_proc;    /* q: the sum of the counts before it */
  int blocked;           /* every process holds m keys, in one block, in process order */
  int live;              /* handles XLA has not freed */
  /* the rendezvous */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned long round;
  int arrived;
  struct post posts[MPIC_MAX_LOCAL_DEVICES];
  void *scratch;
  size_t scratch_size;
  /* point to point among this process's members */
  struct message *sends, *receives;
};

static void *scratch(struct group *g, size_t bytes) {
  if (bytes > g->scratch_size) {
    free(g->scratch);
    g->scratch = malloc(bytes);
    g->scratch_size = g->scratch ? bytes : 0;
    if (!g->scratch)
      mpic_fatal("out of memory for a %zu-byte buffer of a collective over several CPU devices per process. Fix: "
                 "use smaller arrays or fewer devices per process",
                 bytes);
  }
  return g->scratch;
}

static int world_rank(void) {
  static int rank = -1;
  if (rank < 0) MPIABI_Comm_rank(MPIABI_COMM_WORLD, &rank);
  return rank;
}

/* ---- 1. events ---- */
struct arrival {
  int color, key;
  int taken, done;
  MPIABI_Comm result;
};
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cv = PTHREAD_COND_INITIALIZER;
static struct arrival *pending[MPIC_MAX_LOCAL_DEVICES];
static int npending = 0;
static unsigned long events_filled = 0, events_run = 0;

static void run_event(struct arrival **batch, int nb);

static int by_color_key(const void *a, const void *b) {
  const int *x = a, *y = b;
  if (x[0] != y[0]) return (x[0] > y[0]) - (x[0] < y[0]);
  return (x[1] > y[1]) - (x[1] < y[1]);
}

int mpic_device_split(int color, int key, MPIABI_Comm *newcomm) {
  pthread_once(&region_once, map_region);
  int L = mpic_local_devices;
  struct arrival me = {color, key, 0, 0, MPIABI_COMM_NULL};
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
                   world_rank(), npending, L, mpic_settings.devices_timeout, color);
    }
    mpic_wait_end();
    pthread_mutex_unlock(&ev_mu);
    *newcomm = me.result;
    return 0;
  }
  struct arrival *batch[MPIC_MAX_LOCAL_DEVICES];
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

/* ---- 2.-4. running an event ---- */
struct planned { /* one group of the event, as every process sees it */
  int color, n, first; /* first: its entries in the sorted list */
  int q;
  int round;
  int mine; /* members in this process */
};

static __attribute__((noreturn)) void plan_is_wrong(const char *why) {
  mpic_fatal("rank %d: the processes are creating different device groups at once (%s), so XLA's "
             "collectives would pair up wrongly: programs run in different orders or from two threads, or "
             "meshes that arrange the same devices differently, so that a collective repeats some but not all "
             "of an earlier one's device groups (XLA then creates communicators on some devices only). Fix: run "
             "the same jitted programs in the same order on every process, from one thread, each over all "
             "devices, with one arrangement of the devices per set of mesh axes",
             world_rank(), why);
}

static void run_event(struct arrival **batch, int nb) {
  int L = mpic_local_devices, size = 0, me = world_rank();
  MPIABI_Comm_size(MPIABI_COMM_WORLD, &size);
  const int R = 2 + 2 * MPIC_MAX_LOCAL_DEVICES;
  int rec[2 + 2 * MPIC_MAX_LOCAL_DEVICES];
  memset(rec, 0, sizeof rec);
  rec[0] = L;
  rec[1] = nb;
  for (int i = 0; i < nb; i++) rec[2 + 2 * i] = batch[i]->color, rec[3 + 2 * i] = batch[i]->key;
  int *all = malloc(sizeof(int) * (size_t)R * (size_t)size);
  int *entries = malloc(sizeof(int) * 3 * (size_t)size * (size_t)L); /* color, key, process */
  if (!all || !entries) mpic_fatal("rank %d: out of memory creating device groups", me);
  int ret = MPIABI_Allgather(rec, R, MPIABI_INT, all, R, MPIABI_INT, MPIABI_COMM_WORLD);
  if (ret != 0) mpic_fatal("rank %d: MPI_Allgather over MPI_COMM_WORLD failed while creating device groups", me);
  int ne = 0;
  for (int p = 0; p < size; p++) {
    int *r = all + (size_t)p * R;
    if (r[0] != L) {
      char why[256];
      snprintf(why, sizeof why, "rank %d has %d CPU devices, rank %d has %d", me, L, p, r[0]);
      mpic_fatal("rank %d: the processes have different numbers of CPU devices (%s). Fix: give every process "
                 "the same number (JAX_NUM_CPU_DEVICES or jax_num_cpu_devices, set before initialize())",
                 me, why);
    }
    for (int i = 0; i < r[1]; i++) {
      entries[3 * ne] = r[2 + 2 * i];
      entries[3 * ne + 1] = r[3 + 2 * i];
      entries[3 * ne + 2] = p;
      ne++;
    }
  }
  free(all);
  qsort(entries, (size_t)ne, 3 * sizeof(int), by_color_key);

  /* The groups, checked. */
  struct planned *groups = calloc((size_t)ne, sizeof *groups);
  int ng = 0;
  char why[512];
  for (int i = 0; i < ne;) {
    int j = i;
    while (j < ne && entries[3 * j] == entries[3 * i]) j++;
    for (int k = i; k < j; k++)
      if (entries[3 * k + 1] != k - i) {
        snprintf(why, sizeof why, "the %d devices with color %d have keys that are not 0..%d", j - i,
                 entries[3 * i], j - i - 1);
        plan_is_wrong(why);
      }
    if (ng && groups[0].n != j - i) {
      snprintf(why, sizeof why, "groups of %d and of %d devices in one collective", groups[0].n, j - i);
      plan_is_wrong(why);
    }
    struct planned *g = &groups[ng++];
    g->color = entries[3 * i];
    g->n = j - i;
    g->first = i;
    g->round = -1;
    int seen_procs = 0;
    for (int k = i; k < j; k++) {
      int p = entries[3 * k + 2], earlier = 0;
      for (int l = i; l < k; l++) earlier |= entries[3 * l + 2] == p;
      if (!earlier) seen_procs++;
      if (p == me) g->mine++;
    }
    g->q = seen_procs;
    i = j;
  }
  if (ne != size * L) {
    snprintf(why, sizeof why, "%d device splits where %d processes with %d devices each make %d", ne, size, L,
             size * L);
    plan_is_wrong(why);
  }

  /* 3. Rounds of splits: no process twice in a round. */
  char *busy = calloc((size_t)size * (size_t)(L * size + 1), 1);
  int rounds = 0;
  for (int k = 0; k < ng; k++) {
    struct planned *g = &groups[k];
    if (g->q < 2) continue;
    for (int r = 0;; r++) {
      int clash = 0;
      for (int e = g->first; e < g->first + g->n; e++) clash |= busy[(size_t)r * size + entries[3 * e + 2]];
      if (clash) continue;
      for (int e = g->first; e < g->first + g->n; e++) busy[(size_t)r * size + entries[3 * e + 2]] = 1;
      g->round = r;
      if (r + 1 > rounds) rounds = r + 1;
      break;
    }
  }
  free(busy);
  MPIABI_Comm *pcs = calloc((size_t)(ng ? ng : 1), sizeof *pcs);
  for (int k = 0; k < ng; k++) pcs[k] = MPIABI_COMM_NULL;
  for (int r = 0; r < rounds; r++) {
    int color = MPIABI_UNDEFINED, key = 0, which = -1;
    for (int k = 0; k < ng; k++)
      if (groups[k].round == r && groups[k].mine) {
        which = k;
        color = k;
        for (int e = groups[k].first; e < groups[k].first + groups[k].n; e++)
          if (entries[3 * e + 2] == me) {
            key = entries[3 * e + 1];
            break;
          }
      }
    MPIABI_Comm pc = MPIABI_COMM_NULL;
    ret = mpic_next_Comm_split(MPIABI_COMM_WORLD, color, key, &pc);
    if (ret != 0) mpic_fatal("rank %d: MPI_Comm_split failed while creating device groups", me);
    if (which >= 0) pcs[which] = pc;
  }

  /* 4. What each local device gets. */
  for (int k = 0; k < ng; k++) {
    struct planned *p = &groups[k];
    if (!p->mine) continue;
    if (p->q == p->n && p->q > 1) { /* one device per process: the process communicator is the device one */
      int rank = -1;
      MPIABI_Comm_rank(pcs[k], &rank);
      mpic_agreement_track(pcs[k]);
      for (int b = 0; b < nb; b++)
        if (batch[b]->color == p->color) {
          if (rank != batch[b]->key)
            mpic_fatal("rank %d: the communicator for device group %d gave rank %d to the device with key %d",
                       me, p->color, rank, batch[b]->key);
          batch[b]->result = pcs[k];
        }
      mpic_log(2, "device group %d: %d devices on %d processes, one each: MPI communicator", p->color, p->n,
               p->q);
      continue;
    }
    struct group *g = calloc(1, sizeof *g);
    g->color = p->color;
    g->n = p->n;
    g->q = p->q;
    g->pc = pcs[k];
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
    if (g->pc != MPIABI_COMM_NULL) {
      int rank = -1;
      MPIABI_Comm_rank(g->pc, &rank);
      if (rank != g->pos)
        mpic_fatal("rank %d: the process communicator for device group %d gave rank %d where %d was expected", me,
                   g->color, rank, g->pos);
      mpic_agreement_track(g->pc);
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    pthread_mutex_lock(&handles_lock);
    if (nhandles + g->m > MAX_HANDLES)
      mpic_fatal("rank %d: more than %d device communicators. Fix: use fewer distinct device groups", me,
                 MAX_HANDLES);
    for (int s = 0; s < g->m; s++) {
      struct handle *h = calloc(1, sizeof *h);
      h->g = g;
      h->key = g->keys[s];
      h->slot = s;
      handles[nhandles] = h;
      for (int b = 0; b < nb; b++)
        if (batch[b]->color == g->color && batch[b]->key == h->key) batch[b]->result = region + (uintptr_t)nhandles;
      nhandles++;
      g->live++;
    }
    pthread_mutex_unlock(&handles_lock);
    mpic_log(2, "device group %d: %d devices on %d processes, %d here (keys %d..), %s layout", g->color, g->n,
             g->q, g->m, g->keys[0], g->blocked ? "block" : "general");
  }
  free(pcs);
  free(groups);
  free(entries);
}

/* ---- 5. collectives: a rendezvous of the local devices ---- */
static size_t type_size(MPIABI_Datatype type) {
  int s = 0;
  if (MPIABI_Type_size(type, &s) != 0 || s <= 0) mpic_fatal("rank %d: a collective with a datatype of no size", world_rank());
  return (size_t)s;
}

static void failed(const char *function, int code) { mpic_agreement_failed(function, code); }

static void local_posts_agree(struct group *g) {
  struct post *a = &g->posts[0];
  for (int s = 1; s < g->m; s++) {
    struct post *b = &g->posts[s];
    if (b->kind != a->kind || b->count != a->count || b->type != a->type || b->op != a->op)
      mpic_fatal("rank %d: the CPU devices of this process disagree about a collective on device group %d: "
                 "device %d called %s of %d elements, device %d called %s of %d (or another datatype or "
                 "reduction). No result was returned. Fix: make every device run the same collectives with "
                 "the same shapes",
                 world_rank(), g->color, g->keys[0], kind_text[a->kind], a->count, g->keys[s], kind_text[b->kind],
                 b->count);
  }
}

static void run_allreduce(struct group *g) {
  struct post *p = g->posts;
  size_t bytes = (size_t)p[0].count * type_size(p[0].type);
  void *acc = p[0].recv;
  if (acc != p[0].send) memcpy(acc, p[0].send, bytes);
  for (int s = 1; s < g->m; s++) {
    int ret = MPIABI_Reduce_local(p[s].send, acc, p[0].count, p[0].type, p[0].op);
    if (ret != 0) failed("MPI_Reduce_local", ret);
  }
  if (g->q > 1) {
    mpic_agreement_check(g->pc, K_ALLREDUCE, p[0].count, p[0].type, p[0].op);
    int ret = mpic_next_Allreduce(MPIABI_IN_PLACE, acc, p[0].count, p[0].type, p[0].op, g->pc);
    if (ret != 0) failed("MPI_Allreduce", ret);
  }
  for (int s = 1; s < g->m; s++)
    if (p[s].recv != acc) memcpy(p[s].recv, acc, bytes);
}

static void run_allgather(struct group *g) {
  struct post *p = g->posts;
  size_t block = (size_t)p[0].count * type_size(p[0].type);
  char *out = p[0].recv;
  if (g->q == 1 || g->blocked) {
    for (int s = 0; s < g->m; s++) memcpy(out + (size_t)g->keys[s] * block, p[s].send, block);
    if (g->q > 1) {
      mpic_agreement_check(g->pc, K_ALLGATHER, p[0].count, p[0].type, MPIABI_OP_NULL);
      int ret = mpic_next_Allgather(MPIABI_IN_PLACE, 0, p[0].type, out, p[0].count * g->m, p[0].type, g->pc);
      if (ret != 0) failed("MPI_Allgather", ret);
    }
  } else {
    char *tmp = scratch(g, block * (size_t)g->n);
    int *counts = malloc(sizeof(int) * (size_t)g->q), *displs = malloc(sizeof(int) * (size_t)g->q);
    for (int x = 0; x < g->q; x++) counts[x] = g->count_of_proc[x] * p[0].count, displs[x] = g->first_of_proc[x] * p[0].count;
    for (int s = 0; s < g->m; s++) memcpy(tmp + (size_t)(g->first_of_proc[g->pos] + s) * block, p[s].send, block);
    mpic_agreement_check(g->pc, K_ALLGATHER, p[0].count, p[0].type, MPIABI_OP_NULL);
    int ret = MPIABI_Allgatherv(MPIABI_IN_PLACE, 0, p[0].type, tmp, counts, displs, p[0].type, g->pc);
    if (ret != 0) failed("MPI_Allgatherv", ret);
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
  size_t esize = type_size(p[0].type), block = (size_t)p[0].count * esize, total = block * (size_t)g->n;
  int n_elems = p[0].count * g->n;
  char *acc = scratch(g, 2 * total);
  memcpy(acc, p[0].send, total);
  for (int s = 1; s < g->m; s++) {
    int ret = MPIABI_Reduce_local(p[s].send, acc, n_elems, p[0].type, p[0].op);
    if (ret != 0) failed("MPI_Reduce_local", ret);
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
  for (int x = 0; x < g->q; x++) counts[x] = g->count_of_proc[x] * p[0].count;
  mpic_agreement_check(g->pc, K_REDUCE_SCATTER, n_elems, p[0].type, p[0].op);
  int ret = mpic_next_Reduce_scatter(in, out, counts, p[0].type, p[0].op, g->pc);
  free(counts);
  if (ret != 0) failed("MPI_Reduce_scatter", ret);
  for (int s = 0; s < g->m; s++) memcpy(p[s].recv, out + (size_t)s * block, block);
}

static int rendezvous(MPIABI_Comm comm, struct post *mine) {
  struct handle *h = handle_of(comm);
  struct group *g = h->g;
  pthread_mutex_lock(&g->mu);
  if (g->posts[h->slot].posted)
    mpic_fatal("rank %d: device %d of group %d started a collective while its previous one on the same group "
               "was still running (collectives dispatched from two threads at once). Fix: dispatch "
               "collectives from one thread",
               world_rank(), h->key, g->color);
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
    case K_ALLREDUCE: run_allreduce(g); break;
    case K_ALLGATHER: run_allgather(g); break;
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
  struct post p = {K_ALLREDUCE, count, type, op, sendbuf, recvbuf, 0};
  return rendezvous(comm, &p);
}

int mpic_device_allgather(const void *sendbuf, int count, MPIABI_Datatype type, void *recvbuf, MPIABI_Comm comm) {
  struct post p = {K_ALLGATHER, count, type, MPIABI_OP_NULL, sendbuf, recvbuf, 0};
  return rendezvous(comm, &p);
}

int mpic_device_reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPIABI_Datatype type,
                               MPIABI_Op op, MPIABI_Comm comm) {
  struct handle *h = handle_of(comm);
  for (int i = 1; i < h->g->n; i++)
    if (recvcounts[i] != recvcounts[0])
      mpic_fatal("rank %d: a reduce-scatter over several CPU devices per process with unequal parts (%d and %d). "
                 "Fix: use parts of one size",
                 world_rank(), recvcounts[0], recvcounts[i]);
  struct post p = {K_REDUCE_SCATTER, recvcounts[0], type, op, sendbuf, recvbuf, 0};
  return rendezvous(comm, &p);
}

/* ---- 6. point to point ---- */
struct message {
  int from, to; /* keys */
  void *buf;
  size_t bytes;
  int tag, done, is_receive;
  struct message *next;
  struct group *g;
};
static struct message *requests[MAX_REQUESTS];
static int free_requests[MAX_REQUESTS], nfree = -1;
static pthread_mutex_t requests_lock = PTHREAD_MUTEX_INITIALIZER;

static MPIABI_Request new_request(struct message *msg) {
  pthread_mutex_lock(&requests_lock);
  if (nfree < 0) {
    for (int i = 0; i < MAX_REQUESTS; i++) free_requests[i] = MAX_REQUESTS - 1 - i;
    nfree = MAX_REQUESTS;
  }
  if (!nfree) mpic_fatal("rank %d: more than %d transfers between local CPU devices pending", world_rank(), MAX_REQUESTS);
  int i = free_requests[--nfree];
  requests[i] = msg;
  pthread_mutex_unlock(&requests_lock);
  return region + MAX_HANDLES + (uintptr_t)i;
}

static __attribute__((noreturn)) void sizes_differ(struct group *g, int from, int to, size_t sent, size_t expected) {
  mpic_fatal("rank %d: device %d of group %d expected %zu bytes from device %d but %zu were sent: the devices "
             "disagree about the transfer's size. No result was returned. Fix: make every device run the same "
             "collectives with the same shapes",
             world_rank(), to, g->color, expected, from, sent);
}

/* The first waiting message from `from` to `to` in a list, taken out of it. */
static struct message *take(struct message **list, int from, int to, int tag) {
  for (struct message **at = list; *at; at = &(*at)->next)
    if ((*at)->from == from && (*at)->to == to && (*at)->tag == tag) {
      struct message *found = *at;
      *at = found->next;
      return found;
    }
  return NULL;
}

static void append(struct message **list, struct message *msg) {
  while (*list) list = &(*list)->next;
  msg->next = NULL;
  *list = msg;
}

static int tag_for(struct group *g, int from, int to, int tag) {
  return tag * MPIC_MAX_LOCAL_DEVICES * MPIC_MAX_LOCAL_DEVICES + g->slot_of_key[from] * MPIC_MAX_LOCAL_DEVICES +
         g->slot_of_key[to];
}

static int local_transfer(struct group *g, int is_receive, void *buf, size_t bytes, int from, int to, int tag,
                          MPIABI_Request *request) {
  pthread_mutex_lock(&g->mu);
  struct message *other = take(is_receive ? &g->sends : &g->receives, from, to, tag);
  if (other) {
    struct message *send = is_receive ? other : NULL, *recv = is_receive ? NULL : other;
    void *dst = is_receive ? buf : recv->buf;
    const void *src = is_receive ? send->buf : buf;
    size_t sent = is_receive ? send->bytes : bytes, expected = is_receive ? bytes : recv->bytes;
    if (sent != expected) sizes_differ(g, from, to, sent, expected);
    memcpy(dst, src, sent);
    other->done = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    *request = MPIABI_REQUEST_NULL;
    return 0;
  }
  struct message *msg = calloc(1, sizeof *msg);
  *msg = (struct message){from, to, buf, bytes, tag, 0, is_receive, NULL, g};
  append(is_receive ? &g->receives : &g->sends, msg);
  pthread_mutex_unlock(&g->mu);
  *request = new_request(msg);
  return 0;
}

static int transfer(MPIABI_Comm comm, int is_receive, void *buf, int count, MPIABI_Datatype type, int peer, int tag,
                    MPIABI_Request *request) {
  struct handle *h = handle_of(comm);
  struct group *g = h->g;
  if (peer == MPIABI_PROC_NULL) {
    *request = MPIABI_REQUEST_NULL;
    return 0;
  }
  if (peer < 0 || peer >= g->n)
    mpic_fatal("rank %d: a transfer with device %d of a group of %d devices", world_rank(), peer, g->n);
  int from = is_receive ? peer : h->key, to = is_receive ? h->key : peer;
  if (g->proc_of_key[peer] == g->pos)
    return local_transfer(g, is_receive, buf, (size_t)count * type_size(type), from, to, tag, request);
  int t = tag_for(g, from, to, tag);
  return is_receive ? MPIABI_Irecv(buf, count, type, g->proc_of_key[peer], t, g->pc, request)
                    : mpic_next_Isend(buf, count, type, g->proc_of_key[peer], t, g->pc, request);
}

int mpic_device_irecv(void *buf, int count, MPIABI_Datatype type, int source, int tag, MPIABI_Comm comm,
                      MPIABI_Request *request) {
  return transfer(comm, 1, buf, count, type, source, tag, request);
}

MPIABI_EXPORT int MPIABI_Isend(const void *buf, int count, MPIABI_Datatype datatype, int dest, int tag,
                               MPIABI_Comm comm, MPIABI_Request *request) {
  if (!mpic_is_device_comm(comm)) return mpic_next_Isend(buf, count, datatype, dest, tag, comm, request);
  int ret = transfer(comm, 0, (void *)buf, count, datatype, dest, tag, request);
  if (ret != 0) failed("MPI_Isend", ret);
  return ret;
}

int mpic_device_wait(MPIABI_Request *request, MPIABI_Status *status) {
  int i = (int)(*request - region - MAX_HANDLES);
  struct message *msg = requests[i];
  struct group *g = msg->g;
  pthread_mutex_lock(&g->mu);
  mpic_wait_begin();
  while (!msg->done) pthread_cond_wait(&g->cv, &g->mu);
  mpic_wait_end();
  pthread_mutex_unlock(&g->mu);
  if (status && status != MPIABI_STATUS_IGNORE) {
    status->MPI_SOURCE = msg->from;
    status->MPI_TAG = msg->tag;
    status->MPI_ERROR = 0;
  }
  free(msg);
  pthread_mutex_lock(&requests_lock);
  requests[i] = NULL;
  free_requests[nfree++] = i;
  pthread_mutex_unlock(&requests_lock);
  *request = MPIABI_REQUEST_NULL;
  return 0;
}

/* XLA's all-to-all: one exchange with each device, in turn. */
int mpic_device_sendrecv(const void *sendbuf, int sendcount, MPIABI_Datatype sendtype, int dest, int sendtag,
                         void *recvbuf, int recvcount, MPIABI_Datatype recvtype, int source, int recvtag,
                         MPIABI_Comm comm, MPIABI_Status *status) {
  MPIABI_Request r[2];
  int ret = transfer(comm, 1, recvbuf, recvcount, recvtype, source, recvtag, &r[0]);
  if (ret == 0) ret = transfer(comm, 0, (void *)sendbuf, sendcount, sendtype, dest, sendtag, &r[1]);
  if (ret != 0) failed("MPI_Sendrecv", ret);
  for (int i = 0; i < 2; i++) {
    MPIABI_Status *s = i == 0 ? status : MPIABI_STATUS_IGNORE;
    ret = mpic_is_device_request(r[i]) ? mpic_device_wait(&r[i], s) : MPIABI_Wait(&r[i], s);
    if (ret != 0) failed("MPI_Wait", ret);
  }
  return 0;
}

/* ---- what XLA asks of a device communicator ---- */
MPIABI_EXPORT int MPIABI_Comm_rank(MPIABI_Comm comm, int *rank) {
  if (!mpic_is_device_comm(comm)) return mpic_next_Comm_rank(comm, rank);
  *rank = handle_of(comm)->key;
  return 0;
}

MPIABI_EXPORT int MPIABI_Comm_size(MPIABI_Comm comm, int *size) {
  if (!mpic_is_device_comm(comm)) return mpic_next_Comm_size(comm, size);
  *size = handle_of(comm)->g->n;
  return 0;
}

/* The process communicator goes with the group's last handle. */
int mpic_device_comm_free(MPIABI_Comm *comm) {
  struct handle *h = handle_of(*comm);
  *comm = MPIABI_COMM_NULL;
  pthread_mutex_lock(&handles_lock);
  int last = !h->freed && --h->g->live == 0;
  h->freed = 1;
  pthread_mutex_unlock(&handles_lock);
  if (last && h->g->pc != MPIABI_COMM_NULL) return MPIABI_Comm_free(&h->g->pc);
  return 0;
}

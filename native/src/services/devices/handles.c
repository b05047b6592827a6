/* Step 4's handles (devices.h): the communicators and requests devices/
 * hands XLA, and the helpers every step uses.
 *
 * Communicator handles are REGION + i (i < MAX_HANDLES), request handles
 * REGION + MAX_HANDLES + j: addresses of a mapping no one can use, so no
 * MPI library's handle (a small integer, or a pointer to a live object) can
 * be equal to one. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "comm_record.h"
#include "node.h"
#include "end_job.h"
#include "internal.h"

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
  __atomic_store_n(&region, (uintptr_t)p, __ATOMIC_RELEASE);
}

/* A freed handle's number goes back on a stack and is handed out again:
 * XLA creates and frees device communicators as programs come and go, and
 * only those alive at once count against MAX_HANDLES. */
static struct handle *handles[MAX_HANDLES];
static int nhandles = 0; /* numbers ever handed out */
static int free_handles[MAX_HANDLES], nfree_handles = 0;
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

int mpic_is_device_comm(MPIABI_Comm comm) {
  uintptr_t r = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
  return r && comm - r < MAX_HANDLES;
}
int mpic_is_device_request(MPIABI_Request request) {
  uintptr_t r = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
  return r && request - r - MAX_HANDLES < MAX_REQUESTS;
}

struct handle *mpic_device_handle(MPIABI_Comm comm) { return handles[comm - region]; }

void mpic_device_handles_new(struct group *g, MPIABI_Comm *out) {
  pthread_once(&region_once, map_region);
  pthread_mutex_lock(&handles_lock);
  if (nhandles - nfree_handles + g->m > MAX_HANDLES)
    mpic_fatal("rank %d: XLA holds more than %d device communicators at once. Fix: use fewer distinct device "
               "groups (meshes, sub-meshes) in one program, or free jitted programs no longer used "
               "(jax.clear_caches())",
               mpic_device_world_rank(), MAX_HANDLES);
  for (int s = 0; s < g->m; s++) {
    struct handle *h = calloc(1, sizeof *h);
    if (!h) mpic_fatal("rank %d: out of memory creating device groups", mpic_device_world_rank());
    h->g = g;
    h->key = g->keys[s];
    h->slot = s;
    int i = nfree_handles ? free_handles[--nfree_handles] : nhandles++;
    handles[i] = h;
    out[s] = region + (uintptr_t)i;
    g->live++;
  }
  pthread_mutex_unlock(&handles_lock);
}

int mpic_device_comm_rank(MPIABI_Comm comm, int *rank) {
  *rank = mpic_device_handle(comm)->key;
  return 0;
}

int mpic_device_comm_size(MPIABI_Comm comm, int *size) {
  *size = mpic_device_handle(comm)->g->n;
  return 0;
}

/* The handle's number is free again; the process communicator and the
 * group's scratch buffer go with the group's last handle (the group itself,
 * a few hundred bytes, stays: a transfer's message may still point at it). */
int mpic_device_comm_free(MPIABI_Comm *comm) {
  uintptr_t i = *comm - region;
  struct handle *h = handles[i];
  *comm = MPIABI_COMM_NULL;
  if (!h) return 0; /* freed before */
  struct group *g = h->g;
  pthread_mutex_lock(&handles_lock);
  int last = --g->live == 0;
  handles[i] = NULL;
  free_handles[nfree_handles++] = (int)i;
  pthread_mutex_unlock(&handles_lock);
  free(h);
  if (!last) return 0;
  free(g->scratch);
  g->scratch = NULL, g->scratch_size = 0;
  if (g->pc == MPIABI_COMM_NULL) return 0;
  mpic_node_forget(g->record);
  g->record = NULL;
  return mpic_record_free(&g->pc);
}

/* ---- requests for pending local transfers ---- */
static struct message *requests[MAX_REQUESTS];
static int free_requests[MAX_REQUESTS], nfree = -1;
static pthread_mutex_t requests_lock = PTHREAD_MUTEX_INITIALIZER;

MPIABI_Request mpic_device_request_new(struct message *msg) {
  pthread_mutex_lock(&requests_lock);
  if (nfree < 0) {
    for (int i = 0; i < MAX_REQUESTS; i++) free_requests[i] = MAX_REQUESTS - 1 - i;
    nfree = MAX_REQUESTS;
  }
  if (!nfree)
    mpic_fatal("rank %d: more than %d transfers between local CPU devices pending", mpic_device_world_rank(),
               MAX_REQUESTS);
  int i = free_requests[--nfree];
  requests[i] = msg;
  pthread_mutex_unlock(&requests_lock);
  return region + MAX_HANDLES + (uintptr_t)i;
}

struct message *mpic_device_request_message(MPIABI_Request request) {
  return requests[request - region - MAX_HANDLES];
}

void mpic_device_request_release(MPIABI_Request request) {
  int i = (int)(request - region - MAX_HANDLES);
  pthread_mutex_lock(&requests_lock);
  requests[i] = NULL;
  free_requests[nfree++] = i;
  pthread_mutex_unlock(&requests_lock);
}

/* ---- helpers ---- */
int mpic_device_world_rank(void) {
  static int rank = -1;
  if (rank < 0) mpic_next_Comm_rank(MPIABI_COMM_WORLD, &rank);
  return rank;
}

void *mpic_device_scratch(struct group *g, size_t bytes) {
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

size_t mpic_device_type_size(MPIABI_Datatype type) {
  int s = 0;
  if (mpic_next_Type_size(type, &s) != 0 || s <= 0)
    mpic_fatal("rank %d: a collective with a datatype of no size", mpic_device_world_rank());
  return (size_t)s;
}

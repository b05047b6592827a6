/* The record per communicator (comm_record.h).
 *
 * A fixed array of records, found without a lock (every MPI call XLA makes
 * looks one up, from several threads): a record is written whole before it
 * is marked live, and never moved, so a lookup sees either the old state or
 * the new, never a record half moved into another's slot. A freed record's
 * slot is reused by the next communicator; its memory is never returned, so
 * a lookup racing a free reads a record, not freed memory. */
#include <pthread.h>
#include <stdlib.h>
#include "comm_record.h"
#include "end_job.h"
#include "settings.h"
#include "test_hooks.h"

static struct mpic_record records[MPIC_MAX_RECORDS];
static int high = 0; /* records at or past it were never used; only grows */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int world_rank = -1;

struct mpic_record *mpic_record_of(MPIABI_Comm comm) {
  int n = __atomic_load_n(&high, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (__atomic_load_n(&records[i].live, __ATOMIC_ACQUIRE) && __atomic_load_n(&records[i].comm, __ATOMIC_RELAXED) == comm)
      return &records[i];
  return NULL;
}

/* The members' ranks in MPI_COMM_WORLD (local calls only), or NULL. */
static int *world_ranks_of(MPIABI_Comm comm, int size) {
  MPIABI_Group group = MPIABI_GROUP_NULL, world = MPIABI_GROUP_NULL;
  int *ranks = malloc(sizeof(int) * (size_t)size), *out = malloc(sizeof(int) * (size_t)size);
  int ok = ranks && out && mpic_next_Comm_group(comm, &group) == 0 &&
           mpic_next_Comm_group(MPIABI_COMM_WORLD, &world) == 0;
  for (int i = 0; ok && i < size; i++) ranks[i] = i;
  ok = ok && mpic_next_Group_translate_ranks(group, size, ranks, world, out) == 0;
  if (group != MPIABI_GROUP_NULL) mpic_next_Group_free(&group);
  if (world != MPIABI_GROUP_NULL) mpic_next_Group_free(&world);
  free(ranks);
  if (!ok) {
    free(out);
    return NULL;
  }
  return out;
}

struct mpic_record *mpic_record_add(MPIABI_Comm comm, int id) {
  if (comm == MPIABI_COMM_NULL) return NULL;
  if (world_rank < 0) mpic_next_Comm_rank(MPIABI_COMM_WORLD, &world_rank);
  mpic_next_Comm_set_errhandler(comm, MPIABI_ERRORS_RETURN);
  /* Intel MPI 2021 raises an error found in MPI_Wait (a truncated receive) on
   * MPI_COMM_WORLD's handler, not the request's communicator's: without this
   * it aborts the rank itself, before the wrapper can say what happened. A
   * change the program can see, so only with both checks on (as before):
   * with either off (MPI_COLLECTIVES_CHECK_SPLITS=0 says the splits may not
   * be XLA's), a program's own world keeps the library's handler. */
  static int world_returns = 0;
  if (mpic_settings.check_collectives && mpic_settings.check_splits &&
      !__atomic_exchange_n(&world_returns, 1, __ATOMIC_SEQ_CST))
    mpic_next_Comm_set_errhandler(MPIABI_COMM_WORLD, MPIABI_ERRORS_RETURN);
  int size = 0, rank = 0;
  mpic_next_Comm_size(comm, &size);
  mpic_next_Comm_rank(comm, &rank);
  int *members = size > 0 ? world_ranks_of(comm, size) : NULL;
  pthread_mutex_lock(&lock);
  int at = 0;
  while (at < high && records[at].live) at++;
  if (at == MPIC_MAX_RECORDS)
    mpic_fatal("rank %d: XLA holds more than %d communicators at once, the most the wrapper keeps a record of. "
               "Fix: use fewer distinct device groups (meshes, sub-meshes) in one program, or free jitted "
               "programs no longer used (jax.clear_caches())",
               world_rank, MPIC_MAX_RECORDS);
  struct mpic_record *r = &records[at];
  free(r->members);
  __atomic_store_n(&r->comm, comm, __ATOMIC_RELAXED); /* read by lookups without the lock */
  r->id = id, r->size = size, r->rank = rank, r->members = members, r->node = NULL;
  r->seq = (unsigned)mpic_test_hook("MPI_COLLECTIVES_TEST_SEQ_START", 0); /* a test build starts it near a wrap */
  r->node_state = MPIC_NODE_UNKNOWN;
  r->round = MPIC_ROUND_UNDECIDED;
  r->block_streak = MPIC_BLOCK_STREAK_START;
  __atomic_store_n(&r->live, 1, __ATOMIC_RELEASE);
  if (at == high) __atomic_store_n(&high, high + 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&lock);
  return r;
}

int mpic_record_free(MPIABI_Comm *comm) {
  if (comm) {
    struct mpic_record *r = mpic_record_of(*comm);
    if (r) {
      pthread_mutex_lock(&lock);
      __atomic_store_n(&r->live, 0, __ATOMIC_RELEASE); /* members stay until the slot is reused */
      pthread_mutex_unlock(&lock);
    }
  }
  return mpic_next_Comm_free(comm);
}

mpic_ticket mpic_record_begin(struct mpic_record *r, uint64_t sig) {
  return mpic_flight_begin(sig, r->id, __atomic_add_fetch(&r->seq, 1, __ATOMIC_RELAXED));
}

int mpic_record_members(int id, int *out, int max) {
  int got = -1;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < high && got < 0; i++)
    if (records[i].live && records[i].id == id && records[i].members) {
      got = records[i].size;
      for (int k = 0; k < got && k < max; k++) out[k] = records[i].members[k];
    }
  pthread_mutex_unlock(&lock);
  return got;
}

struct mpic_record *mpic_record_by_id(int id) {
  int n = __atomic_load_n(&high, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (__atomic_load_n(&records[i].live, __ATOMIC_ACQUIRE) && records[i].id == id) return &records[i];
  return NULL;
}

int mpic_record_world_rank(void) { return world_rank; }

/* Never a wrong number: the ranks agree about every collective XLA runs over
 * MPI before its data moves (agreement.h; entry/xla_calls.c sends XLA's
 * calls on the communicators tracked here).
 *
 * Ranks that disagree about a collective (a rank-dependent shape, dtype or
 * reduction) get wrong numbers from MPI, silently on most libraries: the
 * library sees only bytes. So on the communicators XLA creates (through
 * MPI_Comm_split: xla_policy.c, devices/), each all-reduce, all-gather and
 * reduce-scatter begins with one all-reduce of a small block holding its
 * signature (kind, element count, datatype, reduction: check_block.h); when
 * the signatures differ, every rank learns what each rank called and the job
 * ends with one line saying so, before any result reaches XLA. A collective
 * whose data fit in the block (at most MPIC_BLOCK_PAYLOAD bytes, 1 KiB) travels in
 * that same all-reduce and makes no second call: across hosts that halves
 * a small collective's round trips. Point-to-point transfers (XLA's
 * collective permute and all-to-all) are checked on arrival (arrivals.c).
 *
 * XLA's communicators return MPI errors instead of aborting, and an MPI
 * error there ends the job with the MPI library's own text. Other
 * communicators (mpi4py's, the user's) are left as they are.
 * MPI_COLLECTIVES_CHECK_COLLECTIVES=0 turns the checks off. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agreement.h"
#include "check_block.h"
#include "common.h"
#include "end_job.h"
#include "flight.h"
#include "log.h"
#include "peer_watch.h"
#include "settings.h"
#include "signature.h"

/* ---- XLA's communicators ---- */
#define MAX_COMMS 1024
/* A tracked communicator: its id (the split that made it: flight.h), its
 * collectives so far, and its members' ranks in MPI_COMM_WORLD. */
struct tracked {
  MPIABI_Comm comm;
  int id;
  unsigned seq;
  int size, rank;
  int *members;
};
static struct tracked comms[MAX_COMMS];
static int ncomms = 0; /* read without the lock: entries below it are set before it grows */
static pthread_mutex_t comms_lock = PTHREAD_MUTEX_INITIALIZER;
static int world_rank = -1;

static int find(MPIABI_Comm comm) {
  int n = __atomic_load_n(&ncomms, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (comms[i].comm == comm) return i;
  return -1;
}

int mpic_agreement_tracks(MPIABI_Comm comm) { return find(comm) >= 0; }

/* The members' ranks in MPI_COMM_WORLD (local calls only), or NULL. */
static int *world_ranks_of(MPIABI_Comm comm, int *size) {
  MPIABI_Group group = MPIABI_GROUP_NULL, world = MPIABI_GROUP_NULL;
  *size = 0;
  if (mpic_next_Comm_size(comm, size) != 0 || *size <= 0) return NULL;
  int *ranks = malloc(sizeof(int) * (size_t)*size), *out = malloc(sizeof(int) * (size_t)*size);
  int ok = ranks && out && mpic_next_Comm_group(comm, &group) == 0 &&
           mpic_next_Comm_group(MPIABI_COMM_WORLD, &world) == 0;
  for (int i = 0; ok && i < *size; i++) ranks[i] = i;
  ok = ok && mpic_next_Group_translate_ranks(group, *size, ranks, world, out) == 0;
  if (group != MPIABI_GROUP_NULL) mpic_next_Group_free(&group);
  if (world != MPIABI_GROUP_NULL) mpic_next_Group_free(&world);
  free(ranks);
  if (!ok) {
    free(out);
    return NULL;
  }
  return out;
}

int mpic_agreement_members(int comm_id, int *out, int max) {
  int n = __atomic_load_n(&ncomms, __ATOMIC_ACQUIRE), got = -1;
  pthread_mutex_lock(&comms_lock);
  for (int i = 0; i < n && got < 0; i++)
    if (comms[i].id == comm_id && comms[i].members) {
      got = comms[i].size;
      for (int k = 0; k < got && k < max; k++) out[k] = comms[i].members[k];
    }
  pthread_mutex_unlock(&comms_lock);
  return got;
}

/* The check's block as a datatype of its own, and its reduction: made once,
 * when XLA's first communicator is tracked (MPI is up by then). */
static MPIABI_Datatype block_type; /* set by make_block */
static MPIABI_Op block_op;
static int block_error = 0;
static pthread_once_t block_once = PTHREAD_ONCE_INIT;

static void make_block(void) {
  /* One element of the block's size: the library reduces whole blocks,
   * never a part of one (a segmenting algorithm splits between elements). */
  int ret = mpic_next_Type_contiguous((int)sizeof(struct mpic_block), MPIABI_BYTE, &block_type);
  if (ret == 0) ret = mpic_next_Type_commit(&block_type);
  if (ret == 0) ret = mpic_next_Op_create((MPIABI_User_function *)mpic_block_reduce, 1, &block_op);
  block_error = ret;
}

void mpic_agreement_track(MPIABI_Comm comm, int id) {
  if (!mpic_settings.check_collectives || comm == MPIABI_COMM_NULL) return;
  if (world_rank < 0) mpic_next_Comm_rank(MPIABI_COMM_WORLD, &world_rank);
  mpic_next_Comm_set_errhandler(comm, MPIABI_ERRORS_RETURN);
  /* Intel MPI 2021 raises an error found in MPI_Wait (a truncated receive) on
   * MPI_COMM_WORLD's handler, not the request's communicator's: without this
   * it aborts the rank itself, before the wrapper can say what happened. */
  static int world_returns = 0;
  if (!__atomic_exchange_n(&world_returns, 1, __ATOMIC_SEQ_CST))
    mpic_next_Comm_set_errhandler(MPIABI_COMM_WORLD, MPIABI_ERRORS_RETURN);
  pthread_once(&block_once, make_block);
  int size = 0, rank = 0;
  int *members = world_ranks_of(comm, &size);
  mpic_next_Comm_rank(comm, &rank);
  pthread_mutex_lock(&comms_lock);
  if (ncomms < MAX_COMMS) {
    comms[ncomms] = (struct tracked){comm, id, 0, size, rank, members};
    __atomic_store_n(&ncomms, ncomms + 1, __ATOMIC_RELEASE);
  } else {
    mpic_log(1, "more than %d communicators from XLA: the newest are not checked", MAX_COMMS);
  }
  pthread_mutex_unlock(&comms_lock);
}

/* A freed handle may be reused by the library for someone else's communicator. */
static void untrack(MPIABI_Comm comm) {
  pthread_mutex_lock(&comms_lock);
  for (int i = 0; i < ncomms; i++)
    if (comms[i].comm == comm) {
      free(comms[i].members);
      comms[i] = comms[ncomms - 1];
      __atomic_store_n(&ncomms, ncomms - 1, __ATOMIC_RELEASE);
      break;
    }
  pthread_mutex_unlock(&comms_lock);
}

int mpic_agreement_comm_free(MPIABI_Comm *comm) {
  if (comm && mpic_agreement_tracks(*comm)) untrack(*comm);
  return mpic_next_Comm_free(comm);
}

static __attribute__((noreturn)) void mpi_failed(const char *function, int code, MPIABI_Comm comm);
void mpic_agreement_failed(const char *function, int code) { mpi_failed(function, code, MPIABI_COMM_NULL); }

static __attribute__((noreturn)) void mpi_failed(const char *function, int code, MPIABI_Comm comm) {
  char text[1024] = "";
  int n = 0;
  (void)comm;
  if (mpic_next_Error_string(code, text, &n) != 0) snprintf(text, sizeof text, "error code %d", code);
  /* One line: MPICH's text is an error stack over several. */
  for (char *p = text; *p; p++)
    if (*p == '\n') *p = ' ';
  char dead[320];
  if (mpic_watch_dead_peer(500, dead, sizeof dead))
    mpic_fatal("%s ended while the job was still running, before finishing its program: killed (SIGKILL, the "
               "out-of-memory killer), crashed, called os._exit, or stopped by its MPI library's own error "
               "handler; rank %d's %s failed on it. Ending the whole job. Fix: see that rank's own output and "
               "the launcher's report (exit code, signal) for why it ended",
               dead, world_rank, function);
  mpic_fatal("rank %d: %s failed in a collective XLA runs: %s (the MPI library's words). Fix: see the "
             "first error of the job above; when ranks disagree about a collective's size, make every "
             "rank run the same collectives with the same shapes",
             world_rank, function, text);
}

/* Whether the ranks' words (mpic_describe's, "rank 0 all-gather f32 x1; rank 1 all-gather f64 x1")
 * hold one type at 32 and at 64 bits: what JAX's 64-bit mode on some ranks only makes of the same
 * program (JAX_ENABLE_X64=1 given to some ranks: every float and int array doubles its width). */
static int wider_on_some(const char *line) {
  static const char *const pairs[][2] = {{" f32 ", " f64 "}, {" s32 ", " s64 "}, {" u32 ", " u64 "},
                                         {" c64 ", " c128 "}};
  for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++)
    if (strstr(line, pairs[i][0]) && strstr(line, pairs[i][1])) return 1;
  return 0;
}

/* Every rank learns every rank's signature, and all end the job with the same line. */
static __attribute__((noreturn)) void disagree(MPIABI_Comm comm, const struct mpic_call *mine, uint64_t sig) {
  int size = 0;
  mpic_next_Comm_size(comm, &size);
  int64_t pair[2] = {(int64_t)sig, world_rank};
  int64_t *all = calloc((size_t)(size > 0 ? size : 1), sizeof pair);
  if (!all || mpic_next_Allgather(pair, 2, MPIABI_INT64_T, all, 2, MPIABI_INT64_T, comm) != 0)
    mpic_fatal("rank %d: the ranks disagree about a collective (%s), and could not tell each other what "
               "they called. Fix: make every rank run the same collectives with the same shapes, dtypes "
               "and reductions",
               world_rank, mpic_kind_names[mine->kind]);
  char line[1536] = "";
  size_t used = 0;
  int shown = 0;
  for (int i = 0; i < size && used < sizeof line - 200; i++) {
    int first = 1;
    for (int j = 0; j < i; j++)
      if (all[2 * j] == all[2 * i]) first = 0;
    if (!first) continue;
    char what[160];
    mpic_describe((uint64_t)all[2 * i], what, sizeof what);
    int ranks = 0;
    used += (size_t)snprintf(line + used, sizeof line - used, "%s", shown++ ? "; " : "");
    for (int j = i; j < size && used < sizeof line - 200; j++)
      if (all[2 * j] == all[2 * i]) {
        if (ranks < 8)
          used += (size_t)snprintf(line + used, sizeof line - used, "%s%lld", ranks ? "," : "rank ",
                                   (long long)all[2 * j + 1]);
        else if (ranks == 8)
          used += (size_t)snprintf(line + used, sizeof line - used, ",...");
        ranks++;
      }
    used += (size_t)snprintf(line + used, sizeof line - used, " %s", what);
  }
  free(all);
  mpic_fatal("the ranks disagree about a collective: %s. No result was returned. Fix: make every rank run "
             "the same collectives with the same shapes, dtypes and reductions (look for a rank-dependent "
             "shape or branch%s); MPI_COLLECTIVES_CHECK_COLLECTIVES=0 turns this check off",
             line, wider_on_some(line) ? ", or JAX's 64-bit mode on some ranks only: JAX_ENABLE_X64 or "
                                         "jax.config.update('jax_enable_x64', ...) reached only some"
                                       : "");
}

/* The collective begins in the flight record, on communicator `at` of the table. */
static int record(int at, uint64_t sig) {
  struct tracked *t = &comms[at];
  return mpic_flight_begin(sig, t->id, __atomic_add_fetch(&t->seq, 1, __ATOMIC_RELAXED));
}

/* The check: one all-reduce of the block (check_block.h), `b` already
 * holding what this rank carries. Returns the flight record's slot, to end
 * when the data has moved; on return b->payload holds the carried result. */
static int agree(MPIABI_Comm comm, const struct mpic_call *c, uint64_t sig, struct mpic_block *b) {
  int at = find(comm);
  int slot = at >= 0 ? record(at, sig) : -1;
  if (block_error) mpi_failed("MPI_Op_create", block_error, comm);
  int ret = mpic_next_Allreduce(MPIABI_IN_PLACE, b, 1, block_type, block_op, comm);
  if (ret != 0) mpi_failed("MPI_Allreduce", ret, comm);
  if (!mpic_block_agreed(b)) disagree(comm, c, sig);
  return slot;
}

/* The check alone, carrying nothing. */
static int agree_only(MPIABI_Comm comm, const struct mpic_call *c) {
  struct mpic_block b;
  uint64_t sig = mpic_signature(c);
  mpic_block_start(&b, sig, MPIC_CARRY_NONE);
  return agree(comm, c, sig, &b);
}

int mpic_agreement_begin(MPIABI_Comm comm, uint64_t sig) {
  int at = find(comm);
  return at >= 0 ? record(at, sig) : -1;
}

int mpic_agreement_world_rank(void) { return world_rank; }

int mpic_agreement_check(MPIABI_Comm comm, int kind, int64_t count, MPIABI_Datatype type, MPIABI_Op op) {
  if (!mpic_agreement_tracks(comm)) return -1;
  struct mpic_call c = {kind, count, type, op};
  return agree_only(comm, &c);
}

void mpic_agreement_finished(int slot) { mpic_flight_end(slot); }

/* ---- XLA's collectives on a tracked communicator ---- */
/* This rank's place and the communicator's size (kept when it was tracked). */
static int place_in(MPIABI_Comm comm, int *size) {
  int at = find(comm), rank = 0;
  if (at >= 0 && comms[at].size > 0) {
    *size = comms[at].size;
    return comms[at].rank;
  }
  mpic_next_Comm_size(comm, size);
  mpic_next_Comm_rank(comm, &rank);
  return rank;
}

/* A reduction whose data fit in the block: reduced there, in the check's
 * own all-reduce, and written to out at `from` (bytes into the result). */
static void carried_reduction(MPIABI_Comm comm, const struct mpic_call *c, uint64_t sig, const void *data,
                              size_t bytes, void *out, size_t from, size_t out_bytes) {
  struct mpic_block b;
  mpic_block_start(&b, sig, MPIC_CARRY_REDUCE);
  memcpy(b.payload, data, bytes);
  int slot = agree(comm, c, sig, &b);
  memcpy(out, b.payload + from, out_bytes);
  mpic_flight_end(slot);
}

int mpic_checked_allreduce(const void *sendbuf, void *recvbuf, int count, MPIABI_Datatype datatype, MPIABI_Op op,
                           MPIABI_Comm comm) {
  struct mpic_call c = {MPIC_ALL_REDUCE, count, datatype, op};
  uint64_t sig = mpic_signature(&c);
  size_t bytes = mpic_block_reducible(sig) * (size_t)(count > 0 ? count : 0);
  if (bytes && bytes <= MPIC_BLOCK_PAYLOAD) {
    carried_reduction(comm, &c, sig, sendbuf == MPIABI_IN_PLACE ? recvbuf : sendbuf, bytes, recvbuf, 0, bytes);
    return 0;
  }
  int slot = agree_only(comm, &c);
  int ret = mpic_next_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  if (ret != 0) mpi_failed("MPI_Allreduce", ret, comm);
  mpic_flight_end(slot);
  return ret;
}

int mpic_checked_allgather(const void *sendbuf, int sendcount, MPIABI_Datatype sendtype, void *recvbuf,
                           int recvcount, MPIABI_Datatype recvtype, MPIABI_Comm comm) {
  struct mpic_call c = {MPIC_ALL_GATHER, sendcount, sendtype, MPIABI_OP_NULL};
  uint64_t sig = mpic_signature(&c);
  int size = 0, rank = place_in(comm, &size);
  size_t each = mpic_block_element_size(sig) * (size_t)(sendcount > 0 ? sendcount : 0);
  if (each && recvtype == sendtype && recvcount == sendcount && each * (size_t)size <= MPIC_BLOCK_PAYLOAD) {
    /* Each rank's part in its own place, zeros elsewhere: the block's
     * reduction joins them. */
    struct mpic_block b;
    mpic_block_start(&b, sig, MPIC_CARRY_PLACE);
    const char *mine = sendbuf == MPIABI_IN_PLACE ? (const char *)recvbuf + each * (size_t)rank : sendbuf;
    memcpy(b.payload + each * (size_t)rank, mine, each);
    int slot = agree(comm, &c, sig, &b);
    memcpy(recvbuf, b.payload, each * (size_t)size);
    mpic_flight_end(slot);
    return 0;
  }
  int slot = agree_only(comm, &c);
  int ret = mpic_next_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  if (ret != 0) mpi_failed("MPI_Allgather", ret, comm);
  mpic_flight_end(slot);
  return ret;
}

int mpic_checked_reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPIABI_Datatype datatype,
                                MPIABI_Op op, MPIABI_Comm comm) {
  int size = 0, rank = place_in(comm, &size);
  int64_t total = 0, before = 0;
  for (int i = 0; i < size; i++) {
    if (i == rank) before = total;
    total += recvcounts[i];
  }
  struct mpic_call c = {MPIC_REDUCE_SCATTER, total, datatype, op};
  uint64_t sig = mpic_signature(&c);
  size_t elem = mpic_block_reducible(sig), bytes = elem * (size_t)(total > 0 ? total : 0);
  if (bytes && bytes <= MPIC_BLOCK_PAYLOAD) {
    carried_reduction(comm, &c, sig, sendbuf == MPIABI_IN_PLACE ? recvbuf : sendbuf, bytes, recvbuf,
                      elem * (size_t)before, elem * (size_t)recvcounts[rank]);
    return 0;
  }
  int slot = agree_only(comm, &c);
  int ret = mpic_next_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
  if (ret != 0) mpi_failed("MPI_Reduce_scatter", ret, comm);
  mpic_flight_end(slot);
  return ret;
}

/* Never a wrong number: the ranks agree about every collective XLA runs over
 * MPI before its data moves (agreement.h; dispatch.c runs the check before
 * each collective on a communicator XLA created: comm_record.h).
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
 * MPI_COLLECTIVES_CHECK_COLLECTIVES=0 turns the checks off; the record,
 * the flight record and the failure's sentence stay (dispatch.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agreement.h"
#include "call_failed.h"
#include "check_block.h"
#include "common.h"
#include "counts.h"
#include "end_job.h"
#include "phases.h"
#include "settings.h"
#include "signature.h"

/* The check's blocks as datatypes of their own, and their reductions: made
 * once, at the first check (MPI is up by then). [0] the small block, [1] the
 * whole one. */
static MPIABI_Datatype block_type[2]; /* set by make_blocks */
static MPIABI_Op block_op[2];
static int block_error = 0;
static pthread_once_t block_once = PTHREAD_ONCE_INIT;

static void make_blocks(void) {
  /* One element of the block's size: the library reduces whole blocks,
   * never a part of one (a segmenting algorithm splits between elements). */
  static const size_t payload[2] = {MPIC_BLOCK_SMALL_PAYLOAD, MPIC_BLOCK_PAYLOAD};
  MPIABI_User_function *reduce[2] = {(MPIABI_User_function *)mpic_block_reduce_small,
                                     (MPIABI_User_function *)mpic_block_reduce};
  int ret = 0;
  for (int i = 0; i < 2 && ret == 0; i++) {
    ret = mpic_next_Type_contiguous((int)mpic_block_bytes(payload[i]), MPIABI_BYTE, &block_type[i]);
    if (ret == 0) ret = mpic_next_Type_commit(&block_type[i]);
    if (ret == 0) ret = mpic_next_Op_create(reduce[i], 1, &block_op[i]);
  }
  block_error = ret;
}

/* The block's room for the next call on r: the small block once
 * MPIC_SMALL_AFTER agreed calls in a row carried no more than its payload (a
 * loop of scalar psums, or of collectives too large to carry), else the
 * whole one. Chosen from calls every rank agreed, so every rank picks the
 * same size whatever it calls next; a call whose data do not fit the room
 * chosen is checked in the block and moved by its own call after. */
#define MPIC_SMALL_AFTER MPIC_BLOCK_STREAK_START
size_t mpic_agreement_room(const struct mpic_record *r) {
  return r->block_streak >= MPIC_SMALL_AFTER ? MPIC_BLOCK_SMALL_PAYLOAD : MPIC_BLOCK_PAYLOAD;
}

void mpic_agreement_learn(struct mpic_record *r, size_t carried_bytes) {
  int whole = carried_bytes > MPIC_BLOCK_SMALL_PAYLOAD && carried_bytes <= MPIC_BLOCK_PAYLOAD;
  r->block_streak = whole ? 0 : r->block_streak < MPIC_SMALL_AFTER ? r->block_streak + 1 : MPIC_SMALL_AFTER;
}

int mpic_agreement_on(void) { return mpic_settings.check_collectives; }

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

static int phases_differ(const int64_t *all, int size) {
  for (int i = 1; i < size; i++)
    if (all[3 * i + 2] != all[2]) return 1;
  return 0;
}

static __attribute__((noreturn)) void say_disagreement(int64_t *all, int size, int64_t my_phase);

/* Every rank learns every rank's signature, and all end the job with the same line. */
static __attribute__((noreturn)) void disagree(MPIABI_Comm comm, const struct mpic_call *mine, uint64_t sig) {
  int size = 0;
  mpic_next_Comm_size(comm, &size);
  int64_t pair[3] = {(int64_t)sig, mpic_record_world_rank(), mpic_phase_now()};
  int64_t *all = calloc((size_t)(size > 0 ? size : 1), sizeof pair);
  if (!all || mpic_next_Allgather(pair, 3, MPIABI_INT64_T, all, 3, MPIABI_INT64_T, comm) != 0)
    mpic_fatal("rank %d: the ranks disagree about a collective (%s), and could not tell each other what "
               "they called. Fix: make every rank run the same collectives with the same shapes, dtypes "
               "and reductions",
               mpic_record_world_rank(), mpic_kind_names[mine->kind]);
  say_disagreement(all, size, pair[2]);
}

void mpic_agreement_disagree_seen(int64_t *all, int size) {
  say_disagreement(all, size, mpic_phase_now());
}

/* all: (signature, rank in MPI_COMM_WORLD, phase) of each member; freed here. */
static __attribute__((noreturn)) void say_disagreement(int64_t *all, int size, int64_t my_phase) {
  char line[1536] = "";
  size_t used = 0;
  int shown = 0;
  for (int i = 0; i < size && used < sizeof line - 200; i++) {
    int first = 1;
    for (int j = 0; j < i; j++)
      if (all[3 * j] == all[3 * i] && all[3 * j + 2] == all[3 * i + 2]) first = 0;
    if (!first) continue;
    char what[160];
    mpic_describe((uint64_t)all[3 * i], what, sizeof what);
    int ranks = 0;
    used += (size_t)snprintf(line + used, sizeof line - used, "%s", shown++ ? "; " : "");
    for (int j = i; j < size && used < sizeof line - 200; j++)
      if (all[3 * j] == all[3 * i] && all[3 * j + 2] == all[3 * i + 2]) {
        if (ranks < 8)
          used += (size_t)snprintf(line + used, sizeof line - used, "%s%lld", ranks ? "," : "rank ",
                                   (long long)all[3 * j + 1]);
        else if (ranks == 8)
          used += (size_t)snprintf(line + used, sizeof line - used, ",...");
        ranks++;
      }
    used += (size_t)snprintf(line + used, sizeof line - used, " %s", what);
    if (all[3 * i + 2] != my_phase || phases_differ(all, size))
      used += (size_t)snprintf(line + used, sizeof line - used, " in phase %lld", (long long)all[3 * i + 2]);
  }
  int phased = phases_differ(all, size);
  free(all);
  if (phased)
    mpic_fatal("the ranks are in different phases of the program at one collective: %s. No result was "
               "returned. A rank left a phase (a test) before a collective its peers wait in, or ran ahead "
               "of them. Fix: make every rank run the same collectives in each phase; under pytest, run "
               "the suite with the mpi_collectives plugin on (it is unless -p no:mpi_collectives)",
               line);
  mpic_fatal("the ranks disagree about a collective: %s. No result was returned. Fix: make every rank run "
             "the same collectives with the same shapes, dtypes and reductions (look for a rank-dependent "
             "shape or branch%s); MPI_COLLECTIVES_CHECK_COLLECTIVES=0 turns this check off",
             line, wider_on_some(line) ? ", or JAX's 64-bit mode on some ranks only: JAX_ENABLE_X64 or "
                                         "jax.config.update('jax_enable_x64', ...) reached only some"
                                       : "");
}

int mpic_agreement_agree(struct mpic_record *r, const struct mpic_call *c, uint64_t sig, struct mpic_block *b,
                         size_t room) {
  pthread_once(&block_once, make_blocks);
  if (block_error) mpic_call_failed("MPI_Op_create", block_error);
  int whole = room > MPIC_BLOCK_SMALL_PAYLOAD;
  int ret;
  mpic_count_add(MPIC_COUNT_CHECKS, 1);
  mpic_count_add(MPIC_COUNT_CHECK_BYTES, mpic_block_bytes(whole ? MPIC_BLOCK_PAYLOAD : MPIC_BLOCK_SMALL_PAYLOAD));
  if (mpic_phases_on()) {
    mpic_block_set_phase(b, mpic_phase_now());
    ret = mpic_phase_agree(r, b, block_type[whole], block_op[whole]);
    if (ret != 0 && ret == mpic_phase_error_code()) return ret; /* given up: XLA raises it */
  } else {
    ret = mpic_next_Allreduce(MPIABI_IN_PLACE, b, 1, block_type[whole], block_op[whole], r->comm);
  }
  if (ret != 0) mpic_call_failed("MPI_Allreduce", ret);
  if (!mpic_block_agreed(b)) disagree(r->comm, c, sig);
  return 0;
}

/* A check block that others gave up (phases.h) and this member never began:
 * joined with a block that says nothing (theirs discard it). Keeps this
 * record's count of collectives in step with theirs. */
static int join_block(struct mpic_record *r, double timeout_s) {
  pthread_once(&block_once, make_blocks);
  if (block_error) return block_error;
  int whole = mpic_agreement_room(r) > MPIC_BLOCK_SMALL_PAYLOAD;
  struct mpic_block b;
  mpic_block_start(&b, 0, MPIC_CARRY_NONE);
  mpic_block_set_phase(&b, mpic_phase_now());
  __atomic_add_fetch(&r->seq, 1, __ATOMIC_RELAXED);
  MPIABI_Request req;
  int ret = mpic_next_Iallreduce(MPIABI_IN_PLACE, &b, 1, block_type[whole], block_op[whole], r->comm, &req);
  return ret ? ret : mpic_phase_poll(&req, timeout_s);
}

int mpic_agreement_settle(const int *triples, int n, double timeout_s) {
  for (int i = 0; i < n; i++) {
    int kind = triples[3 * i], id = triples[3 * i + 1], ret = 0;
    unsigned seq = (unsigned)triples[3 * i + 2];
    if (mpic_phase_wait_given(kind, id, seq, timeout_s, &ret)) {
      if (ret) return ret;
    } else {
      struct mpic_record *r = mpic_record_by_id(id);
      /* the given-up call was the seq-th on its communicator: a member short of it never began it */
      while (r && (int)(__atomic_load_n(&r->seq, __ATOMIC_RELAXED) - seq) < 0) /* modular: seq wraps at 2^32 */
        if ((ret = join_block(r, timeout_s))) return ret;
    }
  }
  return 0;
}

/* Whether the path takes a call (node.h): the one place that decides, asked
 * once per call by the dispatcher after the agreement check; and the call
 * run through the window with one caller at a time. */
#include "call_failed.h"
#include "internal.h"
#include "log.h"
#include "node.h"
#include "settings.h"
#include "signature.h"


uint64_t mpic_node_shape(const struct mpic_record *r, mpic_library_call call, const void *args) {
  if (call != mpic_call_reduce_scatter) return 0;
  const struct mpic_reduce_scatter_args *a = args;
  uint64_t shape = 1469598103934665603ull; /* FNV-1a over the parts */
  for (int q = 0; q < r->size; q++) shape = (shape ^ (uint64_t)(uint32_t)a->counts[q]) * 1099511628211ull;
  return shape;
}

/* A call as the path measures it: its collective's bit in
 * MPI_COLLECTIVES_NODE_PATH_COLLECTIVES, its kind (signature.h), its
 * datatype and operation, its count (the all-reduce's buffer, the
 * all-gather's result, the reduce-scatter's or all-to-all's input), and the
 * shape of a reduce-scatter's parts. */
struct measure {
  int collective, kind;
  MPIABI_Datatype type;
  MPIABI_Op op;
  int64_t count;
  uint64_t shape;
};

/* 0 where the call is not one the path has a loop for: an all-gather of mixed
 * types or counts, a reduce-scatter in place, an exchange with itself or
 * MPI_PROC_NULL, or of mixed types or counts. */
static int measure_of(const struct mpic_record *r, mpic_library_call call, const void *args, struct measure *m) {
  if (call == mpic_call_allreduce) {
    const struct mpic_allreduce_args *a = args;
    *m = (struct measure){MPIC_NODE_PATH_COLLECTIVES_ALL_REDUCE, MPIC_ALL_REDUCE, a->type, a->op, a->count, 0};
    return 1;
  }
  if (call == mpic_call_allgather) {
    const struct mpic_allgather_args *a = args;
    if (a->send != MPIABI_IN_PLACE && (a->sendtype != a->recvtype || a->sendcount != a->recvcount)) return 0;
    *m = (struct measure){MPIC_NODE_PATH_COLLECTIVES_ALL_GATHER, MPIC_ALL_GATHER, a->recvtype, MPIABI_OP_NULL,
                          (int64_t)a->recvcount * r->size, 0};
    return 1;
  }
  if (call == mpic_call_reduce_scatter) {
    const struct mpic_reduce_scatter_args *a = args;
    if (a->send == MPIABI_IN_PLACE) return 0;
    int64_t total = 0;
    for (int q = 0; q < r->size; q++) total += a->counts[q];
    *m = (struct measure){MPIC_NODE_PATH_COLLECTIVES_REDUCE_SCATTER, MPIC_REDUCE_SCATTER, a->type, a->op, total,
                          mpic_node_shape(r, call, args)};
    return 1;
  }
  if (call == mpic_call_sendrecv) {
    const struct mpic_sendrecv_args *a = args;
    if (a->sendcount != a->recvcount || a->sendtype != a->recvtype || a->sendcount <= 0) return 0;
    if (a->dest < 0 || a->dest >= r->size || a->source < 0 || a->source >= r->size || a->dest == r->rank ||
        a->source == r->rank)
      return 0;
    /* the all-to-all's whole buffer, as the other collectives count theirs */
    *m = (struct measure){MPIC_NODE_PATH_COLLECTIVES_ALL_TO_ALL, MPIC_ALL_TO_ALL, a->sendtype, MPIABI_OP_NULL,
                          (int64_t)a->sendcount * r->size, 0};
    return 1;
  }
  return 0;
}

/* The element's size where the path computes the call right, else 0: a
 * datatype of signature.c's table (predefined and contiguous: every copy
 * here is count * size bytes) and, for a reduction, an operation of its
 * table (predefined and commutative: each slice is reduced in an order of
 * its own). Anything else (a user's datatype or operation, MPI_MAXLOC) is
 * the library's. */
static int computes_right(const struct measure *m) {
  if (!mpic_type_name(m->type)) return 0;
  if (m->op != MPIABI_OP_NULL && !mpic_op_name(m->op)) return 0;
  int esize = 0;
  if (mpic_next_Type_size(m->type, &esize) != 0 || esize <= 0) return 0;
  return esize;
}

/* Whether the path may run on r at all: the setting, two ranks or more, and not Intel MPI by default.
 * Intel MPI's own shared-memory all-reduce is within 1.2-1.5x of the copy floor on a 16-core node
 * (issue 55's measurements), and on a 2-core VM it was faster than this path at 1 MiB and from 64 MiB:
 * MPI_COLLECTIVES_NODE_PATH=2 (the default) leaves it its own. */
/* A communicator without a split id (a split of another communicator than MPI_COMM_WORLD: never XLA's)
 * keeps the library's: a window is reclaimed and ordered at MPI_Finalize by its split's id, the same on
 * every member, and such windows were never reclaimed (MPICH's comm/ctxsplit ran out of its 2048
 * communicators after a few thousand splits through the path, issue 71). */
static int has_id(const struct mpic_record *r) { return r->id >= 0; }

static int allowed(struct mpic_record *r) {
  if (!mpic_settings.node_path || r->size < 2 || !has_id(r) ||
      __atomic_load_n(&r->node_state, __ATOMIC_ACQUIRE) == MPIC_NODE_LIBRARY)
    return 0;
  if (mpic_node_library_keeps_large()) {
    /* a communicator without a window keeps the library's for good; one whose window the round made
     * keeps it (its large collectives are Intel MPI's own) */
    int unknown = MPIC_NODE_UNKNOWN;
    if (__atomic_compare_exchange_n(&r->node_state, &unknown, MPIC_NODE_LIBRARY, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
      mpic_log(2, "communicator %d: Intel MPI's own collectives (MPI_COLLECTIVES_NODE_PATH=1 takes the node path)",
               r->id);
    return 0;
  }
  return 1;
}


/* Whether the round may run on r: the path on (MPI_COLLECTIVES_NODE_PATH 1 or 2: a small collective's
 * round beats every library measured, Intel MPI's too: 365 ns an 8 B all-reduce, checked, against its own
 * 485 unchecked, 2 ranks of the VM), two ranks or more, and a window not refused for good. */
static int round_allowed(struct mpic_record *r) {
  return mpic_settings.node_path && r->size >= 2 && has_id(r) &&
         __atomic_load_n(&r->node_state, __ATOMIC_ACQUIRE) != MPIC_NODE_LIBRARY;
}

int mpic_node_round_undecided(const struct mpic_record *r) {
  return __atomic_load_n(&r->round, __ATOMIC_ACQUIRE) == MPIC_ROUND_UNDECIDED;
}

int mpic_node_round_on(const struct mpic_record *r) { return __atomic_load_n(&r->round, __ATOMIC_ACQUIRE) == MPIC_ROUND_ON; }

void mpic_node_round_decide(struct mpic_record *r, int phases_on) {
  /* Every member asks round_allowed() the same (the settings it reads are the job's, its state agreed), and
   * the round's size is the least any rank allows; a rank in phases says no. */
  int most = mpic_settings.node_path_round < MPIC_NODE_ROUND_MOST ? mpic_settings.node_path_round : MPIC_NODE_ROUND_MOST;
  int want = most > 0 && !phases_on && round_allowed(r) ? most : 0, agreed = 0;
  int ret = mpic_next_Allreduce(&want, &agreed, 1, MPIABI_INT, MPIABI_MIN, r->comm);
  if (ret != 0) mpic_call_failed("MPI_Allreduce (the node path's)", ret);
  struct mpic_node *n = agreed > 0 ? mpic_node_attach(r) : NULL; /* collective: the window, or none, agreed */
  if (n && n->across == MPIABI_COMM_NULL) {
    n->round_most = agreed;
    mpic_log(2, "communicator %d: checked collectives in one round through its window, data up to %d bytes", r->id,
             agreed);
  }
  __atomic_store_n(&r->round, n && n->across == MPIABI_COMM_NULL ? MPIC_ROUND_ON : MPIC_ROUND_OFF, __ATOMIC_RELEASE);
}

void mpic_node_created(struct mpic_record *r) {
  /* An all-to-all is point-to-point calls only (one MPI_Sendrecv with each peer), which some members of a
   * communicator may not make (a program's own exchange between two of them): a window, made collectively,
   * is never made inside one. Where all-to-all is on the path, the communicator's creation, which every
   * member makes, makes it. */
  if ((mpic_settings.node_path_collectives & MPIC_NODE_PATH_COLLECTIVES_ALL_TO_ALL) && allowed(r)) {
    struct mpic_node *n = mpic_node_attach(r);
    if (n) mpic_node_direct_decide(n); /* the exchanges' way, decided while every member is here */
  }
}

int mpic_node_takes(struct mpic_record *r, mpic_library_call call, const void *args, struct mpic_node_plan *plan) {
  /* the cheap questions first: most calls stop at them */
  if (!mpic_settings.node_path || r->size < 2 || !has_id(r) ||
      __atomic_load_n(&r->node_state, __ATOMIC_ACQUIRE) == MPIC_NODE_LIBRARY)
    return 0;
  struct measure m;
  if (!measure_of(r, call, args, &m) || !(mpic_settings.node_path_collectives & m.collective) || m.count <= 0) return 0;
  /* no element of signature.c's table is larger than 16 bytes: a small call stops here, before the table
   * is searched and the library asked the type's size (a psum of 8 bytes is a few microseconds in all) */
  if (m.count * 16 < (int64_t)mpic_settings.node_path_min) return 0;
  int esize = computes_right(&m);
  if (!esize || esize > MPIC_NODE_CHUNK / r->size) return 0; /* a reduce-scatter's piece holds an element */
  int64_t bytes = (int64_t)esize * m.count;
  if (bytes < mpic_settings.node_path_min || (mpic_settings.node_path_max && bytes > mpic_settings.node_path_max))
    return 0;
  if (!allowed(r)) return 0;
  /* A point-to-point call uses a window made before (mpic_node_created), never makes one; a collective is
   * made by every member, all at this call (after the agreement check): the window is made here, the
   * first time. */
  struct mpic_node *n = call == mpic_call_sendrecv ? mpic_node_of(r) : mpic_node_attach(r);
  if (!n) return 0;
  /* over several nodes, the all-reduce alone is composed */
  if (n->across != MPIABI_COMM_NULL && m.collective != MPIC_NODE_PATH_COLLECTIVES_ALL_REDUCE) return 0;
  struct mpic_call c = {m.kind, m.count, m.type, m.op};
  *plan = (struct mpic_node_plan){n, esize, mpic_signature(&c), m.count, m.shape};
  return 1;
}

int mpic_node_run(const struct mpic_node_plan *plan, mpic_library_call call, void *args) {
  struct mpic_node *n = plan->node;
  int esize = plan->esize, ret = 0;
  /* an exchange is two ranks' call: it never counts among the collectives every member numbers alike */
  mpic_turns_enter(n, plan->sig, plan->count, plan->shape, call != mpic_call_sendrecv);
  /* one node, its ranks reading each other's buffers in place: one copy (direct.c); else the window's two */
  int direct = call != mpic_call_sendrecv && mpic_node_direct_decide(n) == 1;
  if (call == mpic_call_allreduce)
    ret = direct ? mpic_node_direct_allreduce(n, args, esize) : mpic_node_allreduce(n, args, esize);
  else if (call == mpic_call_allgather)
    ret = direct ? mpic_node_direct_allgather(n, args, esize) : mpic_node_allgather(n, args, esize);
  else if (call == mpic_call_reduce_scatter)
    ret = direct ? mpic_node_direct_reduce_scatter(n, args, esize) : mpic_node_reduce_scatter(n, args, esize);
  else ret = mpic_node_exchange(n, args, esize);
  mpic_turns_leave(n);
  return ret;
}

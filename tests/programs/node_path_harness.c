/*
 * The node path's promises where JAX cannot reach them (issue 60), through
 * the wrapper's MPIABI_* exports as MPItrampoline calls them (dlopen with
 * RTLD_DEEPBIND, everything through dlsym; no MPI header), on communicators
 * made by MPIABI_Comm_split as XLA makes them (key = rank, so the wrapper
 * records them and its node path may take their collectives):
 *
 *     node_path_harness.so WRAPPER.so SCENARIO   (run by conformance_runner.py)
 *
 * Scenarios (each prints "RESULT <scenario> rank R: exact|WRONG ..." lines):
 *   free-order  two communicators over the same ranks, a large all-reduce on
 *               each (a window each), freed in opposite orders on rank 0 and
 *               the others, then MPI_Finalize: must end, not hang (jax 0.4's
 *               XLA frees in an order of its own on each rank).
 *   mismatch    with the checks off, rank 0 all-reduces 393,216 floats where
 *               the others all-reduce 262,144 (an erroneous program), then
 *               every rank runs the same correct all-reduce: the job must stop
 *               at the first, never return a wrong sum from the second.
 *   user-types  a non-commutative operation of the program's on a derived
 *               type, and a strided datatype with a sum of the program's, each large enough
 *               for the path: MPI's order and layout exactly.
 *   threads     two threads all-reduce on one communicator at once: the job
 *               stops with one sentence, or every sum is exact.
 *   many        eight communicators, a 1 MiB all-reduce on each: exact, in
 *               whatever room /dev/shm has (the test mounts a small one).
 *   cycles      48 times: a communicator split, a 1 MiB all-reduce on it, freed
 *               (a mesh per test): exact, and the windows this rank still
 *               holds at the end ("WINDOWS live L kept K").
 *   pair        with all-to-all on the path, ranks 0 and 1 of a communicator
 *               of every rank exchange 256 KiB (MPI_Sendrecv), the others do
 *               not: exact, and the job ends (a window made inside the
 *               exchange waited for the others).
 *   mismatch-op, mismatch-type
 *               with the checks off, rank 0 all-reduces with max (or int32)
 *               where the others use sum (float), the same count: the job must
 *               stop at it.
 *   errors      after a large all-reduce: how many of this rank's windows
 *               return their errors to the wrapper ("WINDOWS ... returning R").
 *   round       with the checks on, small all-reduces (float, double, int;
 *               sum and max; in place and not), all-gathers and reduce-scatters
 *               (parts of unequal sizes) from 1 element to just past the
 *               round's 64 KiB, 3 times over, each checked exactly against
 *               the sum computed here (the round's data, or its check alone).
 *   round-mismatch
 *               with the checks on, after an agreed call, rank 0 all-reduces 8
 *               floats with max where the others sum them: the job stops.
 *   round-parts with the checks on, a reduce-scatter whose parts' sizes differ
 *               between ranks (the same total): the job stops.
 *   round-early after an agreed call, the last rank skips the next small
 *               all-reduce and calls MPI_Finalize: the job stops, naming it.
 *   round-final-race
 *               after an agreed call, the last rank comes 300 ms late to a
 *               small all-reduce and then
 *               calls MPI_Finalize: exact, exit 0 (with MPI_COLLECTIVES_TEST_ROUND_PAUSE_MS,
 *               a test build pauses the rank waiting for it between its loads).
 *   fork-finalize
 *               after an agreed small all-reduce, rank 0 forks a child that
 *               calls MPI_Finalize and exits; then every rank all-reduces
 *               again: exact (the child's exit is not the rank's).
 *   late        after a large all-reduce, the last rank sleeps LATE_S seconds
 *               (the environment's) before MPI_Finalize; the wrapper's wait
 *               there reports after LATE_REPORT_S and ends the job after
 *               LATE_LIMIT_S seconds, as initialize() would set them.
 *   big         an in-place int8 sum all-reduce of BIG_COUNT elements (the
 *               environment's; 1.1 G at 2 ranks puts count * P past 2^31),
 *               every element checked: "exact", never a wrong element.
 *   sum         three 1 MiB float all-reduces, checked (ranks in containers).
 *   progress    rank 0 leaves a 64 MiB MPI_Isend to rank 1 outstanding across
 *               an 8-byte all-reduce; rank 1 receives it first: MPI's progress
 *               rule makes it a correct program, which must end.
 *   pair-then-reduce
 *               ranks 0 and 1 exchange 256 KiB (MPI_Sendrecv), then every rank
 *               all-reduces 1 MiB: exact (an exchange is not a collective).
 *   early2      two communicators, each with a small checked all-reduce; the
 *               last rank then skips one more on the one made second (first
 *               with B_FIRST=1) and calls MPI_Finalize: the others are told at
 *               once, whichever window it frees first.
 *   round-alone as a tuning's "round alone" sets it (the library's own large
 *               collectives, the round for the checks): small all-reduces,
 *               exact, and the window's bytes ("WINDOWS round-alone ...").
 *   sub-cycles  20 times: a split of a split of the world (no split id: never
 *               XLA's), a 1 MiB all-reduce on it, freed: exact, and the windows
 *               this rank holds at the end ("WINDOWS sub-cycles ...").
 *   after-final a small checked all-reduce (the round), MPI_Finalize, then
 *               another on the same communicator: the library's own error for
 *               a call after MPI_Finalize, never a crash of the wrapper.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mpiabi.h"

#define FUNCTIONS(X)                                                                                    \
  X(Init_thread) X(Finalize) X(Comm_rank) X(Comm_size) X(Comm_split) X(Comm_free) X(Allreduce)          \
  X(Type_contiguous) X(Type_vector) X(Type_commit) X(Type_free) X(Op_create) X(Op_free) X(Barrier)      \
  X(Sendrecv) X(Allgather) X(Reduce_scatter) X(Isend) X(Recv) X(Wait)
#define CONSTANTS(X)                                                                                    \
  X(COMM_WORLD) X(FLOAT) X(DOUBLE) X(INT) X(SUM) X(MAX) X(THREAD_MULTIPLE) X(STATUS_IGNORE) X(IN_PLACE) \
  X(INT8_T) X(BYTE)

static struct {
#define DECLARE_FUNCTION(name) __typeof__(MPIABI_##name) *name;
  FUNCTIONS(DECLARE_FUNCTION)
#define DECLARE_CONSTANT(name) __typeof__((void)0, MPIABI_##name) name;
  CONSTANTS(DECLARE_CONSTANT)
} mpi;

static void *must(void *handle, const char *name) {
  void *p = dlsym(handle, name);
  if (!p) {
    printf("FAIL load: %s\n", name);
    exit(2);
  }
  return p;
}

static int rank, size;

static void result(const char *scenario, int exact, const char *detail) {
  printf("RESULT %s rank %d: %s%s%s\n", scenario, rank, exact ? "exact" : "WRONG", detail ? " " : "",
         detail ? detail : "");
  fflush(stdout);
}

static MPIABI_Comm split(void) {
  MPIABI_Comm c;
  if (mpi.Comm_split(mpi.COMM_WORLD, 0, rank, &c) != 0) {
    printf("FAIL split\n");
    exit(2);
  }
  return c;
}

/* Every rank's n floats, rank-dependent small integers: every order of the sum gives the same bits. */
static float value(int r, long i) { return (float)((i * 7 + 3 * r) % 11); }

static int allreduce_exact(MPIABI_Comm c, long n, int tag) {
  float *x = calloc((size_t)n, sizeof(float)), *y = calloc((size_t)n, sizeof(float));
  if (!x || !y) exit(2);
  for (long i = 0; i < n; i++) x[i] = value(rank + tag, i);
  mpi.Allreduce(x, y, (int)n, mpi.FLOAT, mpi.SUM, c);
  int ok = 1;
  for (long i = 0; i < n && ok; i++) {
    float want = 0;
    for (int r = 0; r < size; r++) want += value(r + tag, i);
    ok = y[i] == want;
  }
  free(x);
  free(y);
  return ok;
}

static void free_order(void) {
  MPIABI_Comm a = split(), b = split();
  int ok = allreduce_exact(a, 262144, 0) && allreduce_exact(b, 262144, 1);
  if (rank == 0) {
    mpi.Comm_free(&a);
    mpi.Comm_free(&b);
  } else {
    mpi.Comm_free(&b);
    mpi.Comm_free(&a);
  }
  result("free-order", ok, "freed");
}

static void mismatch(void) {
  MPIABI_Comm c = split();
  long n = rank == 0 ? 393216 : 262144;
  float *x = calloc((size_t)n, sizeof(float)), *y = calloc((size_t)n, sizeof(float));
  mpi.Allreduce(x, y, (int)n, mpi.FLOAT, mpi.SUM, c); /* erroneous: the counts differ */
  printf("RESULT mismatch rank %d: the erroneous call returned\n", rank);
  fflush(stdout);
  result("mismatch", allreduce_exact(c, 262144, 5), "(the correct call after it)");
  free(x);
  free(y);
}

/* x -> a x + b, composed: (f op g)(x) = f(g(x)), associative and not commutative; small integers keep
 * every product exact. */
static void compose(void *in, void *inout, int *len, MPIABI_Datatype *type) {
  (void)type;
  double *f = in, *g = inout;
  for (int i = 0; i < *len; i++) {
    double a = f[2 * i] * g[2 * i], b = f[2 * i] * g[2 * i + 1] + f[2 * i + 1];
    g[2 * i] = a, g[2 * i + 1] = b;
  }
}

/* A sum over the strided datatype's two floats (element i at 3 * i floats: its blocks at 0 and 2). */
static void strided_sum(void *in, void *inout, int *len, MPIABI_Datatype *type) {
  (void)type;
  float *a = in, *b = inout;
  for (int i = 0; i < *len; i++) b[3 * i] += a[3 * i], b[3 * i + 2] += a[3 * i + 2];
}

static void affine(int r, long i, double *out) {
  out[0] = (double)(1 + (r + i) % 2);
  out[1] = (double)((r * 3 + i) % 5);
}

static void user_types(void) {
  MPIABI_Comm c = split();
  /* a non-commutative operation on pairs of doubles, 40,000 pairs (625 KiB) */
  long n = 40000;
  MPIABI_Datatype pair;
  MPIABI_Op op;
  mpi.Type_contiguous(2, mpi.DOUBLE, &pair);
  mpi.Type_commit(&pair);
  mpi.Op_create(compose, 0, &op);
  double *x = malloc(sizeof(double) * 2 * (size_t)n), *y = malloc(sizeof(double) * 2 * (size_t)n);
  for (long i = 0; i < n; i++) affine(rank, i, x + 2 * i);
  mpi.Allreduce(x, y, (int)n, pair, op, c);
  int ok = 1;
  for (long i = 0; i < n && ok; i++) {
    double want[2], f[2];
    affine(size - 1, i, want);
    for (int r = size - 2; r >= 0; r--) { /* MPI's order: s0 op (s1 op (... op s(P-1))) */
      int one = 1;
      affine(r, i, f);
      compose(f, want, &one, NULL);
    }
    ok = y[2 * i] == want[0] && y[2 * i + 1] == want[1];
  }
  result("user-types", ok, "(a non-commutative operation of the program's)");
  mpi.Op_free(&op);
  mpi.Type_free(&pair);
  free(x);
  free(y);
  /* a strided datatype (two floats with a hole between: 8 bytes of data in a 12-byte extent) and a
   * commutative sum of the program's (MPICH defines its own MPI_SUM on basic types only): 65,536
   * elements, 512 KiB of data; the holes as the library leaves them */
  long m = 65536;
  MPIABI_Datatype strided;
  mpi.Type_vector(2, 1, 2, mpi.FLOAT, &strided);
  mpi.Type_commit(&strided);
  mpi.Op_create(strided_sum, 1, &op);
  float *u = malloc(sizeof(float) * 3 * (size_t)m), *v = malloc(sizeof(float) * 3 * (size_t)m);
  float *lib = malloc(sizeof(float) * 3 * (size_t)m);
  for (long i = 0; i < 3 * m; i++) u[i] = value(rank, i), v[i] = -1, lib[i] = -1;
  mpi.Allreduce(u, v, (int)m, strided, op, c);
  /* The holes: what the library's own call leaves there (MPI_COMM_WORLD has no record: the wrapper
   * passes it straight to the library). MPICH and Open MPI leave them alone; Intel MPI 2021.18 copies
   * the send buffer's whole extent, holes included. */
  mpi.Allreduce(u, lib, (int)m, strided, op, mpi.COMM_WORLD);
  ok = 1;
  for (long i = 0; i < 3 * m && ok; i++) {
    float want = lib[i];
    if (i % 3 != 1) {
      want = 0;
      for (int r = 0; r < size; r++) want += value(r, i);
    }
    ok = v[i] == want;
  }
  result("user-types", ok, "(a strided datatype)");
  mpi.Op_free(&op);
  mpi.Type_free(&strided);
  free(u);
  free(v);
  free(lib);
}

static MPIABI_Comm shared_comm;
static void *one_thread(void *arg) {
  int tag = (int)(intptr_t)arg, ok = 1;
  for (int k = 0; k < 20; k++) ok = ok && allreduce_exact(shared_comm, 524288, tag);
  result("threads", ok, tag ? "(thread 2)" : "(thread 1)");
  return NULL;
}

static void threads(void) {
  shared_comm = split();
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, one_thread, (void *)(intptr_t)(i * 20));
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
}

/* Two windows made at once in one process (two devices a process: each group's first large collective
 * on a thread of its own), the threads' order reversed on rank 0, so that the windows' list order differs
 * between ranks; then MPI_Finalize frees both (issue 65: equal finalize orders hung there). */
static MPIABI_Comm pair[2];
static int pair_ok[2];
static void *pair_thread(void *arg) {
  int i = (int)(intptr_t)arg;
  if ((rank == 0) == (i == 1)) usleep(300000);
  pair_ok[i] = allreduce_exact(pair[i], 262144, i);
  return NULL;
}

static void windows_at_once(void) {
  pair[0] = split(), pair[1] = split();
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, pair_thread, (void *)(intptr_t)i);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  result("windows-at-once", pair_ok[0] && pair_ok[1], "(two threads, two communicators)");
}

static void many(void) {
  MPIABI_Comm c[8];
  for (int i = 0; i < 8; i++) c[i] = split();
  int ok = 1;
  for (int i = 0; i < 8; i++) ok = ok && allreduce_exact(c[i], 262144, i);
  result("many", ok, "(eight communicators)");
}

/* The wrapper's count of the node path's windows this rank belongs to (python_api.c). */
static void *wrapper;
static int (*windows_held)(int *live, int *kept, long long *bytes, int *returning);
static void say_windows(const char *scenario) {
  int live = -1, kept = -1, returning = -1;
  long long bytes = -1;
  if (windows_held) windows_held(&live, &kept, &bytes, &returning);
  printf("WINDOWS %s rank %d: live %d kept %d bytes %lld returning %d\n", scenario, rank, live, kept, bytes,
         returning);
  fflush(stdout);
}

static void cycles(void) {
  int ok = 1;
  for (int k = 0; k < 48; k++) {
    MPIABI_Comm c = split();
    ok = ok && allreduce_exact(c, 262144, k);
    mpi.Comm_free(&c);
  }
  result("cycles", ok, "(48 communicators split, used, freed)");
  say_windows("cycles");
}

static void pair_exchange(void) {
  MPIABI_Comm c = split();
  long n = 65536; /* 256 KiB of floats */
  int ok = 1;
  if (rank < 2) {
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    for (long i = 0; i < n; i++) x[i] = value(rank, i);
    int peer = 1 - rank;
    mpi.Sendrecv(x, (int)n, mpi.FLOAT, peer, 7, y, (int)n, mpi.FLOAT, peer, 7, c, mpi.STATUS_IGNORE);
    for (long i = 0; i < n && ok; i++) ok = y[i] == value(peer, i);
    free(x);
    free(y);
  }
  mpi.Barrier(mpi.COMM_WORLD);
  result("pair", ok, rank < 2 ? "(exchanged)" : "(not in the exchange)");
}

static void mismatch_kind(int by_type) {
  MPIABI_Comm c = split();
  long n = 262144;
  float *x = calloc((size_t)n, sizeof(float)), *y = calloc((size_t)n, sizeof(float));
  MPIABI_Datatype t = by_type && rank == 0 ? mpi.INT : mpi.FLOAT;
  MPIABI_Op op = !by_type && rank == 0 ? mpi.MAX : mpi.SUM;
  mpi.Allreduce(x, y, (int)n, t, op, c); /* erroneous: the operations (or datatypes) differ */
  printf("RESULT mismatch rank %d: the erroneous call returned\n", rank);
  fflush(stdout);
  free(x);
  free(y);
}

static void errors(void) {
  MPIABI_Comm c = split();
  result("errors", allreduce_exact(c, 262144, 0), NULL);
  say_windows("errors");
}

static void late(void) {
  int (*set_waits)(double, double) = (int (*)(double, double))must(wrapper, "mpic_set_finalize_waits");
  const char *report = getenv("LATE_REPORT_S"), *limit = getenv("LATE_LIMIT_S");
  set_waits(report ? atof(report) : 60, limit ? atof(limit) : 0);
  MPIABI_Comm c = split();
  result("late", allreduce_exact(c, 262144, 0), NULL);
  const char *s = getenv("LATE_S");
  if (rank == size - 1) sleep(s ? (unsigned)atoi(s) : 3);
}

/* ---- the one round ---- */
/* Rank r's element i as a double: small integers, exact in every type and every order of a sum. */
static double small(int r, long i) { return (double)((i * 5 + 7 * r) % 13) - 6; }

/* An all-reduce of n elements of type t (0 float, 1 double, 2 int) with sum or max, exact on every rank. */
static int round_allreduce(MPIABI_Comm c, long n, int t, int use_max, int in_place) {
  size_t es = t == 1 ? 8 : 4;
  char *x = calloc((size_t)n, es), *y = calloc((size_t)n, es);
  if (!x || !y) exit(2);
  for (long i = 0; i < n; i++) {
    double v = small(rank, i);
    if (t == 0) ((float *)x)[i] = (float)v;
    else if (t == 1) ((double *)x)[i] = v;
    else ((int *)x)[i] = (int)v;
  }
  if (in_place) memcpy(y, x, (size_t)n * es);
  MPIABI_Datatype type = t == 0 ? mpi.FLOAT : t == 1 ? mpi.DOUBLE : mpi.INT;
  mpi.Allreduce(in_place ? mpi.IN_PLACE : x, y, (int)n, type, use_max ? mpi.MAX : mpi.SUM, c);
  int ok = 1;
  for (long i = 0; i < n && ok; i++) {
    double want = use_max ? -1e9 : 0;
    for (int r = 0; r < size; r++) want = use_max ? (small(r, i) > want ? small(r, i) : want) : want + small(r, i);
    double got = t == 0 ? ((float *)y)[i] : t == 1 ? ((double *)y)[i] : ((int *)y)[i];
    ok = got == want;
  }
  free(x);
  free(y);
  return ok;
}

static int round_allgather(MPIABI_Comm c, long n) {
  float *x = calloc((size_t)n, sizeof(float)), *y = calloc((size_t)(n * size), sizeof(float));
  if (!x || !y) exit(2);
  for (long i = 0; i < n; i++) x[i] = (float)small(rank, i);
  mpi.Allgather(x, (int)n, mpi.FLOAT, y, (int)n, mpi.FLOAT, c);
  int ok = 1;
  for (int r = 0; r < size; r++)
    for (long i = 0; i < n && ok; i++) ok = y[r * n + i] == (float)small(r, i);
  free(x);
  free(y);
  return ok;
}

/* Rank r's part holds n + r elements (unequal parts). */
static int round_reduce_scatter(MPIABI_Comm c, long n) {
  int *counts = calloc(size > 0 ? (size_t)size : 1, sizeof(int));
  long total = 0, before = 0;
  for (int r = 0; r < size; r++) {
    counts[r] = (int)(n + r);
    if (r < rank) before += counts[r];
    total += counts[r];
  }
  double *x = calloc((size_t)total, sizeof(double)), *y = calloc((size_t)counts[rank], sizeof(double));
  if (!x || !y) exit(2);
  for (long i = 0; i < total; i++) x[i] = small(rank, i);
  mpi.Reduce_scatter(x, y, counts, mpi.DOUBLE, mpi.SUM, c);
  int ok = 1;
  for (long i = 0; i < counts[rank] && ok; i++) {
    double want = 0;
    for (int r = 0; r < size; r++) want += small(r, before + i);
    ok = y[i] == want;
  }
  free(counts);
  free(x);
  free(y);
  return ok;
}

static void round_calls(void) {
  MPIABI_Comm c = split();
  static const long counts[] = {1, 2, 3, 16, 255, 256, 257, 1000, 4096, 8191, 16384, 16385, 40000};
  int ok = 1, calls = 0;
  char first_wrong[160] = "";
  for (int pass = 0; pass < 3; pass++)
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
      long n = counts[k];
      int got[6] = {round_allreduce(c, n, 0, 0, 0), round_allreduce(c, n, 1, 1, 1), round_allreduce(c, n, 2, 0, 1),
                    round_allreduce(c, n, 2, 1, 0), round_allgather(c, (n + size - 1) / size),
                    round_reduce_scatter(c, (n + size - 1) / size)};
      for (int j = 0; j < 6; j++, calls++)
        if (!got[j] && ok) {
          ok = 0;
          snprintf(first_wrong, sizeof first_wrong, "(call %d of %ld elements, kind %d, pass %d)", j, n, j, pass);
        }
    }
  char detail[200];
  snprintf(detail, sizeof detail, "%d calls %s", calls, first_wrong);
  result("round", ok, detail);
}

static void round_mismatch(void) {
  MPIABI_Comm c = split();
  result("round-mismatch", round_allreduce(c, 8, 0, 0, 0), "(the agreed call)");
  round_allreduce(c, 8, 0, rank == 0, 0); /* erroneous: max against sum */
  printf("RESULT round-mismatch rank %d: the erroneous call returned\n", rank);
  fflush(stdout);
}

static void round_parts(void) {
  MPIABI_Comm c = split();
  result("round-parts", round_allreduce(c, 8, 0, 0, 0), "(the agreed call)");
  int *counts = calloc(size > 0 ? (size_t)size : 1, sizeof(int));
  for (int r = 0; r < size; r++) counts[r] = 4 + (rank == 0 ? (r == 0 ? 1 : r == 1 ? -1 : 0) : 0);
  double x[64] = {0}, y[64];
  mpi.Reduce_scatter(x, y, counts, mpi.DOUBLE, mpi.SUM, c); /* erroneous: rank 0's parts differ */
  printf("RESULT round-parts rank %d: the erroneous call returned\n", rank);
  fflush(stdout);
}

static void round_early(void) {
  MPIABI_Comm c = split();
  result("round-early", round_allreduce(c, 8, 0, 0, 0), "(the agreed call)");
  if (rank != size - 1) {
    round_allreduce(c, 8, 0, 0, 0); /* the last rank never calls it */
    printf("RESULT round-early rank %d: the call returned\n", rank);
    fflush(stdout);
  }
}

/* The last rank comes 300 ms late to one small all-reduce, then calls MPI_Finalize at once; the others
 * wait for it in the round (a test build pauses the first of them between its loads: the fourth read's B6). */
static void round_final_race(void) {
  MPIABI_Comm c = split();
  int ok = round_allreduce(c, 8, 0, 0, 0); /* agreed: the window made */
  if (rank == size - 1) {
    struct timespec t = {0, 300 * 1000 * 1000};
    nanosleep(&t, NULL);
  }
  result("round-final-race", round_allreduce(c, 8, 0, 0, 0) && ok, "(two calls, then MPI_Finalize)");
}

/* After an agreed small all-reduce, rank 0 forks a child that calls MPI_Finalize and exits (as a child of
 * multiprocessing or a test's fork runs the parent's atexit handlers, JAX's MPI_Finalize among them); the
 * parent waits for it, then every rank all-reduces again (issue 81). */
static void fork_finalize(void) {
  MPIABI_Comm c = split();
  int ok = round_allreduce(c, 8, 0, 0, 0);
  if (rank == 0) {
    pid_t child = fork();
    if (child == 0) {
      mpi.Finalize();
      _exit(0);
    }
    int status = 0;
    ok = ok && child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  ok = round_allreduce(c, 8, 0, 0, 0) && ok;
  result("fork-finalize", ok, "(a forked child's MPI_Finalize, then a call)");
}

/* Not a test: ROUND_TIME_CALLS all-reduces of ROUND_TIME_DOUBLES doubles (default one), timed ("TIME ns per
 * call"), for profiling the wrapper's own cost of a call (perf record on a rank) and for comparing two builds
 * of it interleaved (the path's 1 and 16 MiB: ROUND_TIME_DOUBLES=131072 and 2097152). */
static void round_time(void) {
  MPIABI_Comm c = split();
  const char *env = getenv("ROUND_TIME_CALLS"), *denv = getenv("ROUND_TIME_DOUBLES");
  long calls = env ? atol(env) : 100000, n = denv ? atol(denv) : 1;
  double *x = calloc((size_t)n, sizeof *x), *y = calloc((size_t)n, sizeof *y);
  for (long i = 0; i < n; i++) x[i] = rank;
  long warm = calls / 10 > 0 ? calls / 10 : 1;
  for (long i = 0; i < warm; i++) mpi.Allreduce(x, y, (int)n, mpi.DOUBLE, mpi.SUM, c);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < calls; i++) mpi.Allreduce(x, y, (int)n, mpi.DOUBLE, mpi.SUM, c);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / calls;
  printf("TIME rank %d: %.0f ns per call\n", rank, ns);
  result("round-time", y[0] == size * (size - 1) / 2.0 && y[n - 1] == y[0], NULL);
  free(x);
  free(y);
}

/* ---- issue 71's scenarios ---- */
static void big(void) {
  MPIABI_Comm c = split();
  const char *env = getenv("BIG_COUNT");
  long n = env ? atol(env) : 1100000000L;
  signed char *x = malloc((size_t)n);
  if (!x) {
    printf("FAIL big: no memory for %ld bytes\n", n);
    exit(2);
  }
  for (long i = 0; i < n; i++) x[i] = (signed char)((i + rank) % 3);
  mpi.Allreduce(mpi.IN_PLACE, x, (int)n, mpi.INT8_T, mpi.SUM, c);
  long wrong = 0, first = -1;
  for (long i = 0; i < n; i++) {
    int want = 0;
    for (int r = 0; r < size; r++) want += (int)((i + r) % 3);
    if (x[i] != (signed char)want && !wrong++) first = i;
  }
  char detail[120];
  snprintf(detail, sizeof detail, "(%ld elements, %ld wrong, the first at %ld)", n, wrong, first);
  result("big", wrong == 0, detail);
  free(x);
}

static void sum(void) {
  MPIABI_Comm c = split();
  int ok = 1;
  for (int k = 0; k < 3; k++) ok = ok && allreduce_exact(c, 262144, k);
  char detail[64];
  snprintf(detail, sizeof detail, "(pid %d, 3 calls)", (int)getpid());
  result("sum", ok, detail);
}

static void progress(void) {
  MPIABI_Comm c = split();
  size_t bytes = 64u << 20;
  char *buf = malloc(bytes);
  memset(buf, rank == 0 ? 7 : 0, bytes);
  int ok = round_allreduce(c, 2, 0, 0, 0); /* the first checked call decides the round: the next are rounds */
  if (rank == 0) {
    MPIABI_Request req;
    mpi.Isend(buf, (int)bytes, mpi.BYTE, 1, 11, mpi.COMM_WORLD, &req);
    ok = round_allreduce(c, 2, 0, 0, 0) && ok;
    mpi.Wait(&req, mpi.STATUS_IGNORE);
  } else {
    if (rank == 1) {
      mpi.Recv(buf, (int)bytes, mpi.BYTE, 0, 11, mpi.COMM_WORLD, mpi.STATUS_IGNORE);
      ok = buf[0] == 7 && buf[bytes - 1] == 7 && ok;
    }
    ok = round_allreduce(c, 2, 0, 0, 0) && ok;
  }
  free(buf);
  result("progress", ok, rank < 2 ? "(the send and the all-reduce)" : "(the all-reduce)");
}

static void pair_then_reduce(void) {
  MPIABI_Comm c = split();
  long n = 65536;
  int ok = 1;
  if (rank < 2) {
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    for (long i = 0; i < n; i++) x[i] = value(rank, i);
    mpi.Sendrecv(x, (int)n, mpi.FLOAT, 1 - rank, 7, y, (int)n, mpi.FLOAT, 1 - rank, 7, c, mpi.STATUS_IGNORE);
    for (long i = 0; i < n && ok; i++) ok = y[i] == value(1 - rank, i);
    free(x);
    free(y);
  }
  ok = allreduce_exact(c, 262144, 3) && ok;
  result("pair-then-reduce", ok, rank < 2 ? "(exchanged, then all-reduced)" : "(all-reduced)");
}

static void early2(void) {
  int b_first = getenv("B_FIRST") && atoi(getenv("B_FIRST"));
  MPIABI_Comm a, b;
  if (b_first) b = split(), a = split();
  else a = split(), b = split();
  /* each communicator's window made, in the order of their making (its finalize order) */
  int ok = b_first ? round_allreduce(b, 1, 0, 0, 0) && round_allreduce(a, 1, 0, 0, 0)
                   : round_allreduce(a, 1, 0, 0, 0) && round_allreduce(b, 1, 0, 0, 0);
  result("early2", ok, "(the agreed calls)");
  if (rank != size - 1) {
    round_allreduce(b, 1, 0, 0, 0); /* the last rank never calls it */
    printf("RESULT early2 rank %d: the call returned\n", rank);
    fflush(stdout);
  }
}

static void round_alone(void) {
  int (*set)(int, int, int, int, int, int, int) =
      (int (*)(int, int, int, int, int, int, int))must(wrapper, "mpic_set_node_path");
  set(1, 0, 262144, 67108864, 0, 1, 65536); /* no collective on the path: the round alone */
  MPIABI_Comm c = split();
  int ok = 1;
  for (int k = 0; k < 20; k++) ok = ok && round_allreduce(c, 64, k % 3, k % 2, 0);
  ok = ok && allreduce_exact(c, 262144, 1); /* a large one: the library's */
  result("round-alone", ok, NULL);
  say_windows("round-alone");
}

static void sub_cycles(void) {
  MPIABI_Comm c = split();
  int ok = 1;
  for (int k = 0; k < 20; k++) {
    MPIABI_Comm sub;
    mpi.Comm_split(c, 0, rank, &sub);
    ok = ok && allreduce_exact(sub, 262144, k);
    mpi.Comm_free(&sub);
  }
  result("sub-cycles", ok, "(20 splits of a split, used, freed)");
  say_windows("sub-cycles");
}

static void after_final(void) {
  MPIABI_Comm c = split();
  result("after-final", round_allreduce(c, 2, 0, 0, 0), "(before MPI_Finalize)");
  mpi.Finalize();
  printf("FINALIZED rank %d\n", rank);
  fflush(stdout);
  double x = 1, y = 0;
  int ret = mpi.Allreduce(&x, &y, 1, mpi.DOUBLE, mpi.SUM, c); /* erroneous: after MPI_Finalize */
  printf("RESULT after-final rank %d: the call after MPI_Finalize returned %d\n", rank, ret);
  fflush(stdout);
  exit(0);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    printf("usage: node_path_harness WRAPPER.so SCENARIO\n");
    return 2;
  }
  /* MPItrampoline's flags; without RTLD_DEEPBIND under the sanitizers (HARNESS_NO_DEEPBIND=1: their
   * runtimes refuse it, tests/native/test_sanitizers.py) */
  int deepbind = getenv("HARNESS_NO_DEEPBIND") && atoi(getenv("HARNESS_NO_DEEPBIND")) ? 0 : RTLD_DEEPBIND;
  void *w = dlopen(argv[1], RTLD_LAZY | RTLD_LOCAL | deepbind);
  if (!w) {
    printf("FAIL load: %s\n", dlerror());
    return 2;
  }
#define LOAD_FUNCTION(name) *(void **)&mpi.name = must(w, "MPIABI_" #name);
  FUNCTIONS(LOAD_FUNCTION)
#define LOAD_CONSTANT(name) mpi.name = *(__typeof__(MPIABI_##name) *)must(w, "MPIABI_" #name);
  CONSTANTS(LOAD_CONSTANT)
  wrapper = w;
  *(void **)&windows_held = dlsym(w, "mpic_node_windows"); /* a wrapper before issue 65 has none */
  int provided;
  mpi.Init_thread(&argc, &argv, mpi.THREAD_MULTIPLE, &provided);
  mpi.Comm_rank(mpi.COMM_WORLD, &rank);
  mpi.Comm_size(mpi.COMM_WORLD, &size);
  const char *s = argv[2];
  if (!strcmp(s, "free-order")) free_order();
  else if (!strcmp(s, "mismatch")) mismatch();
  else if (!strcmp(s, "user-types")) user_types();
  else if (!strcmp(s, "threads")) threads();
  else if (!strcmp(s, "many")) many();
  else if (!strcmp(s, "windows-at-once")) windows_at_once();
  else if (!strcmp(s, "cycles")) cycles();
  else if (!strcmp(s, "pair")) pair_exchange();
  else if (!strcmp(s, "mismatch-op")) mismatch_kind(0);
  else if (!strcmp(s, "mismatch-type")) mismatch_kind(1);
  else if (!strcmp(s, "errors")) errors();
  else if (!strcmp(s, "late")) late();
  else if (!strcmp(s, "round")) round_calls();
  else if (!strcmp(s, "round-mismatch")) round_mismatch();
  else if (!strcmp(s, "round-parts")) round_parts();
  else if (!strcmp(s, "round-early")) round_early();
  else if (!strcmp(s, "round-final-race")) round_final_race();
  else if (!strcmp(s, "fork-finalize")) fork_finalize();
  else if (!strcmp(s, "round-time")) round_time();
  else if (!strcmp(s, "big")) big();
  else if (!strcmp(s, "sum")) sum();
  else if (!strcmp(s, "progress")) progress();
  else if (!strcmp(s, "pair-then-reduce")) pair_then_reduce();
  else if (!strcmp(s, "early2")) early2();
  else if (!strcmp(s, "after-final")) after_final();
  else if (!strcmp(s, "round-alone")) round_alone();
  else if (!strcmp(s, "sub-cycles")) sub_cycles();
  else {
    printf("FAIL unknown scenario %s\n", s);
    return 2;
  }
  mpi.Finalize();
  printf("DONE rank %d\n", rank);
  fflush(stdout);
  return 0;
}

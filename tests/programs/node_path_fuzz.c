/*
 * A differential fuzzer of the wrapper (issue 71): a seeded random MPI
 * program, the same on every rank, through the wrapper's MPIABI_* exports as
 * MPItrampoline calls them (like node_path_harness.c), on communicators split
 * as XLA splits them (so the node path may take their collectives):
 *
 *     node_path_fuzz.so WRAPPER.so SEED STEPS   (run by conformance_runner.py)
 *
 * Each step is one of: an all-reduce (float, double, int32, int64, int8,
 * uint8; sum, max, min; in place or not), an all-gather, a reduce-scatter of
 * unequal parts, an all-to-all as XLA makes it (one MPI_Sendrecv with each
 * peer in turn), an exchange between two ranks only, a large MPI_Isend left
 * outstanding across a collective (received before it, or posted and waited
 * for after), two threads each on a communicator of its own, a communicator
 * freed and split again. Sizes cross every threshold of the path (the round's
 * 64 KiB, the path's 256 KiB default, the chunk's 512 KiB). Every value is a
 * small integer, so every order of a sum gives the same bits: each result is
 * checked here against the single-process computation ("WRONG" otherwise), and
 * its hash printed ("STEP s rank r <what> <hash>"), so that a run through the
 * node path and one through the library (MPI_COLLECTIVES_NODE_PATH=0) can be
 * compared line by line (tests/native/test_fuzz.py, scripts/fuzz_node_path.py).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpiabi.h"

#define FUNCTIONS(X)                                                                                    \
  X(Init_thread) X(Finalize) X(Comm_rank) X(Comm_size) X(Comm_split) X(Comm_free) X(Allreduce)          \
  X(Allgather) X(Reduce_scatter) X(Sendrecv) X(Isend) X(Irecv) X(Recv) X(Wait) X(Barrier)
#define CONSTANTS(X)                                                                                    \
  X(COMM_WORLD) X(FLOAT) X(DOUBLE) X(INT32_T) X(INT64_T) X(INT8_T) X(UINT8_T) X(BYTE) X(SUM) X(MAX)     \
  X(MIN) X(IN_PLACE) X(STATUS_IGNORE) X(THREAD_MULTIPLE)

static struct {
#define DECLARE_FUNCTION(name) __typeof__(MPIABI_##name) *name;
  FUNCTIONS(DECLARE_FUNCTION)
#define DECLARE_CONSTANT(name) __typeof__((void)0, MPIABI_##name) name;
  CONSTANTS(DECLARE_CONSTANT)
} mpi;

static int rank, size, failures;

/* ---- the program's randomness: the same stream on every rank ---- */
struct rng {
  uint64_t s;
};
static uint64_t next(struct rng *g) { /* splitmix64 */
  uint64_t z = (g->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static long pick(struct rng *g, long n) { return (long)(next(g) % (uint64_t)n); }

/* Element counts around the path's thresholds (in bytes: the round's 64 KiB, the path's 256 KiB, the
 * chunk's 512 KiB), for an element of `esize` bytes. */
static long some_count(struct rng *g, int esize) {
  static const long bytes[] = {1, 8, 100, 4096, 65536, 65540, 200000, 262144, 262148, 524288, 524300, 1 << 21,
                               (1 << 22) + 12};
  long b = bytes[pick(g, sizeof bytes / sizeof *bytes)] + pick(g, 3) * esize;
  long n = b / esize;
  return n > 0 ? n : 1;
}

/* ---- values: small integers, exact in every type and every order ---- */
static int value(int r, int step, long i) { return (int)((i * 7 + r * 3 + step * 5) % 11); }

enum { F32, F64, I32, I64, I8, U8, TYPES };
static const char *type_names[TYPES] = {"f32", "f64", "i32", "i64", "i8", "u8"};
static const int type_sizes[TYPES] = {4, 8, 4, 8, 1, 1};
static MPIABI_Datatype type_handle(int t) {
  MPIABI_Datatype h[TYPES] = {mpi.FLOAT, mpi.DOUBLE, mpi.INT32_T, mpi.INT64_T, mpi.INT8_T, mpi.UINT8_T};
  return h[t];
}
static void put(void *buf, int t, long i, long v) {
  switch (t) {
  case F32: ((float *)buf)[i] = (float)v; break;
  case F64: ((double *)buf)[i] = (double)v; break;
  case I32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case I64: ((int64_t *)buf)[i] = v; break;
  case I8: ((int8_t *)buf)[i] = (int8_t)v; break;
  default: ((uint8_t *)buf)[i] = (uint8_t)v; break;
  }
}
static long get(const void *buf, int t, long i) {
  switch (t) {
  case F32: return (long)((const float *)buf)[i];
  case F64: return (long)((const double *)buf)[i];
  case I32: return ((const int32_t *)buf)[i];
  case I64: return (long)((const int64_t *)buf)[i];
  case I8: return ((const int8_t *)buf)[i];
  default: return ((const uint8_t *)buf)[i];
  }
}

enum { SUM_OP, MAX_OP, MIN_OP, OPS };
static const char *op_names[OPS] = {"sum", "max", "min"};
static MPIABI_Op op_handle(int o) { return o == SUM_OP ? mpi.SUM : o == MAX_OP ? mpi.MAX : mpi.MIN; }
static long reduce(int o, long a, long b) { return o == SUM_OP ? a + b : o == MAX_OP ? (a > b ? a : b) : (a < b ? a : b); }

static uint64_t hash(const void *p, size_t n, uint64_t h) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

static void *must_alloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p) {
    printf("FAIL out of memory (%zu bytes)\n", n);
    exit(2);
  }
  return p;
}

/* ---- communicators as XLA makes them: a split of the world, key = the new rank ---- */
struct comm {
  MPIABI_Comm c;
  int size, rank, color, colors; /* world ranks r with r % colors == color */
};
static struct comm split(int colors) {
  struct comm m = {0, 0, 0, rank % colors, colors};
  int key = rank / colors; /* this rank's place among its color's ranks: the new rank (the check's) */
  if (mpi.Comm_split(mpi.COMM_WORLD, m.color, key, &m.c) != 0) {
    printf("FAIL split\n");
    exit(2);
  }
  mpi.Comm_size(m.c, &m.size);
  mpi.Comm_rank(m.c, &m.rank);
  return m;
}
static int world_of(const struct comm *m, int q) { return q * m->colors + m->color; }

static void report(int step, const char *what, int ok, uint64_t h) {
  if (!ok) __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED); /* threads report too */
  printf("STEP %d rank %d: %s %s %016llx\n", step, rank, what, ok ? "exact" : "WRONG", (unsigned long long)h);
}

/* ---- the steps ---- */
static void allreduce(struct rng *g, struct comm *m, int step, char *what, size_t len) {
  int t = (int)pick(g, TYPES), o = (int)pick(g, OPS), in_place = (int)pick(g, 2);
  if (t >= I8 && o == SUM_OP && size > 11) o = MAX_OP; /* a byte's sum of 10s past 11 ranks would wrap */
  long n = some_count(g, type_sizes[t]);
  char *x = must_alloc((size_t)n * type_sizes[t]), *y = must_alloc((size_t)n * type_sizes[t]);
  for (long i = 0; i < n; i++) put(in_place ? y : x, t, i, value(world_of(m, m->rank), step, i));
  mpi.Allreduce(in_place ? mpi.IN_PLACE : x, y, (int)n, type_handle(t), op_handle(o), m->c);
  int ok = 1;
  for (long i = 0; i < n && ok; i++) {
    long want = value(world_of(m, 0), step, i);
    for (int q = 1; q < m->size; q++) want = reduce(o, want, value(world_of(m, q), step, i));
    ok = get(y, t, i) == want;
  }
  snprintf(what, len, "all-reduce %s %s x%ld%s on %d", op_names[o], type_names[t], n, in_place ? " in place" : "",
           m->size);
  report(step, what, ok, hash(y, (size_t)n * type_sizes[t], 14695981039346656037ull));
  free(x);
  free(y);
}

static void allgather(struct rng *g, struct comm *m, int step, char *what, size_t len) {
  int t = (int)pick(g, TYPES), in_place = (int)pick(g, 2);
  long n = some_count(g, type_sizes[t]) / m->size + 1, es = type_sizes[t];
  char *x = must_alloc((size_t)(n * es)), *y = must_alloc((size_t)(n * es * m->size));
  char *mine = in_place ? y + n * es * m->rank : x;
  for (long i = 0; i < n; i++) put(mine, t, i, value(world_of(m, m->rank), step, i));
  mpi.Allgather(in_place ? mpi.IN_PLACE : x, (int)n, type_handle(t), y, (int)n, type_handle(t), m->c);
  int ok = 1;
  for (int q = 0; q < m->size && ok; q++)
    for (long i = 0; i < n && ok; i++) ok = get(y + q * n * es, t, i) == value(world_of(m, q), step, i);
  snprintf(what, len, "all-gather %s x%ld%s on %d", type_names[t], n, in_place ? " in place" : "", m->size);
  report(step, what, ok, hash(y, (size_t)(n * es * m->size), 14695981039346656037ull));
  free(x);
  free(y);
}

static void reduce_scatter(struct rng *g, struct comm *m, int step, char *what, size_t len) {
  int t = (int)pick(g, TYPES), o = (int)pick(g, OPS);
  if (t >= I8 && o == SUM_OP && size > 11) o = MAX_OP;
  long base = some_count(g, type_sizes[t]) / m->size + 1, es = type_sizes[t], total = 0, before = 0;
  int *counts = must_alloc(sizeof(int) * (size_t)m->size);
  for (int q = 0; q < m->size; q++) {
    counts[q] = (int)(base + (q % 2) * pick(g, 5)); /* unequal parts, the same on every rank */
    if (q < m->rank) before += counts[q];
    total += counts[q];
  }
  char *x = must_alloc((size_t)(total * es)), *y = must_alloc((size_t)(counts[m->rank] * es));
  for (long i = 0; i < total; i++) put(x, t, i, value(world_of(m, m->rank), step, i));
  mpi.Reduce_scatter(x, y, counts, type_handle(t), op_handle(o), m->c);
  int ok = 1;
  for (long i = 0; i < counts[m->rank] && ok; i++) {
    long want = value(world_of(m, 0), step, before + i);
    for (int q = 1; q < m->size; q++) want = reduce(o, want, value(world_of(m, q), step, before + i));
    ok = get(y, t, i) == want;
  }
  snprintf(what, len, "reduce-scatter %s %s x%ld on %d", op_names[o], type_names[t], total, m->size);
  report(step, what, ok, hash(y, (size_t)(counts[m->rank] * es), 14695981039346656037ull));
  free(counts);
  free(x);
  free(y);
}

/* XLA's all-to-all: one MPI_Sendrecv with each peer in turn (to rank + d, from rank - d). */
static void all_to_all(struct rng *g, struct comm *m, int step, char *what, size_t len) {
  long n = some_count(g, 4) / m->size + 1;
  float *x = must_alloc(sizeof(float) * (size_t)n), *y = must_alloc(sizeof(float) * (size_t)n);
  int ok = 1;
  uint64_t h = 14695981039346656037ull;
  for (int d = 1; d < m->size; d++) {
    int to = (m->rank + d) % m->size, from = (m->rank - d + m->size) % m->size;
    for (long i = 0; i < n; i++) x[i] = (float)value(world_of(m, m->rank), step + to, i);
    mpi.Sendrecv(x, (int)n, mpi.FLOAT, to, 5, y, (int)n, mpi.FLOAT, from, 5, m->c, mpi.STATUS_IGNORE);
    for (long i = 0; i < n && ok; i++) ok = y[i] == (float)value(world_of(m, from), step + m->rank, i);
    h = hash(y, sizeof(float) * (size_t)n, h);
  }
  snprintf(what, len, "all-to-all f32 x%ld a peer on %d", n, m->size);
  report(step, what, ok, h);
  free(x);
  free(y);
}

/* Ranks 0 and 1 of m exchange; the others do not (a program's own point-to-point). */
static void pair(struct rng *g, struct comm *m, int step, char *what, size_t len) {
  long n = some_count(g, 4);
  int ok = 1;
  uint64_t h = 14695981039346656037ull;
  if (m->size >= 2 && m->rank < 2) {
    float *x = must_alloc(sizeof(float) * (size_t)n), *y = must_alloc(sizeof(float) * (size_t)n);
    for (long i = 0; i < n; i++) x[i] = (float)value(world_of(m, m->rank), step, i);
    int peer = 1 - m->rank;
    mpi.Sendrecv(x, (int)n, mpi.FLOAT, peer, 6, y, (int)n, mpi.FLOAT, peer, 6, m->c, mpi.STATUS_IGNORE);
    for (long i = 0; i < n && ok; i++) ok = y[i] == (float)value(world_of(m, peer), step, i);
    h = hash(y, sizeof(float) * (size_t)n, h);
    free(x);
    free(y);
  }
  snprintf(what, len, "exchange f32 x%ld between 2 of %d", n, m->size);
  report(step, what, ok, h);
}

/* World rank 0 sends world rank 1 a large message left outstanding across a collective on m (which holds
 * both): rank 1 receives it before the collective, or posts its receive and waits after. */
static void outstanding(struct rng *g, struct comm *m, int step, char *what, size_t len) {
  int before = (int)pick(g, 2);
  size_t bytes = (size_t)(1 + pick(g, 16)) << 20;
  char *buf = must_alloc(bytes);
  MPIABI_Request req;
  int ok = 1;
  if (rank == 0) {
    memset(buf, step & 0x7f, bytes);
    mpi.Isend(buf, (int)bytes, mpi.BYTE, 1, 9, mpi.COMM_WORLD, &req);
  } else if (rank == 1) {
    if (before) mpi.Recv(buf, (int)bytes, mpi.BYTE, 0, 9, mpi.COMM_WORLD, mpi.STATUS_IGNORE);
    else mpi.Irecv(buf, (int)bytes, mpi.BYTE, 0, 9, mpi.COMM_WORLD, &req);
  }
  char inner[200];
  allreduce(g, m, step, inner, sizeof inner);
  if (rank == 0 || (rank == 1 && !before)) mpi.Wait(&req, mpi.STATUS_IGNORE);
  if (rank == 1) ok = buf[0] == (char)(step & 0x7f) && buf[bytes - 1] == (char)(step & 0x7f);
  snprintf(what, len, "%zu MiB from rank 0 to 1 %s, across the step's all-reduce", bytes >> 20,
           before ? "received before" : "waited for after");
  report(step, what, ok, 0);
  free(buf);
}

/* Two threads, each on a communicator of its own: a few all-reduces each. */
struct thread_job {
  struct comm *m;
  int step, seed;
  char what[200];
};
static void *thread_body(void *arg) {
  struct thread_job *j = arg;
  struct rng g = {(uint64_t)j->seed * 1000003u + (uint64_t)j->step};
  for (int k = 0; k < 3; k++) allreduce(&g, j->m, j->step, j->what, sizeof j->what);
  return NULL;
}
static void two_threads(struct comm *a, struct comm *b, int step, int seed, char *what, size_t len) {
  struct thread_job jobs[2] = {{a, step, seed, ""}, {b, step, seed + 1, ""}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, thread_body, &jobs[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  snprintf(what, len, "two threads, three all-reduces each on a communicator of its own");
}

int main(int argc, char **argv) {
  if (argc < 4) {
    printf("usage: node_path_fuzz WRAPPER.so SEED STEPS\n");
    return 2;
  }
  void *w = dlopen(argv[1], RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!w) {
    printf("FAIL load: %s\n", dlerror());
    return 2;
  }
#define LOAD_FUNCTION(name)                                                                             \
  if (!(*(void **)&mpi.name = dlsym(w, "MPIABI_" #name))) return printf("FAIL load: " #name "\n"), 2;
  FUNCTIONS(LOAD_FUNCTION)
#define LOAD_CONSTANT(name)                                                                             \
  {                                                                                                     \
    void *p = dlsym(w, "MPIABI_" #name);                                                                \
    if (!p) return printf("FAIL load: " #name "\n"), 2;                                                 \
    mpi.name = *(__typeof__(MPIABI_##name) *)p;                                                         \
  }
  CONSTANTS(LOAD_CONSTANT)
  int seed = atoi(argv[2]), steps = atoi(argv[3]), provided;
  mpi.Init_thread(&argc, &argv, mpi.THREAD_MULTIPLE, &provided);
  mpi.Comm_rank(mpi.COMM_WORLD, &rank);
  mpi.Comm_size(mpi.COMM_WORLD, &size);
  struct rng g = {(uint64_t)seed};
  /* every rank's communicators: the whole world (made in the order XLA would: the first use), halves
   * by parity where there are 4 or more ranks, and two for the threads */
  struct comm comms[4];
  int ncomms = 0;
  comms[ncomms++] = split(1);
  if (size >= 4) comms[ncomms++] = split(2);
  struct comm ta = split(1), tb = split(1);
  char what[256];
  for (int step = 0; step < steps; step++) {
    struct comm *m = &comms[pick(&g, ncomms)];
    long kind = pick(&g, 100);
    if (kind < 40) allreduce(&g, m, step, what, sizeof what);
    else if (kind < 52) allgather(&g, m, step, what, sizeof what);
    else if (kind < 64) reduce_scatter(&g, m, step, what, sizeof what);
    else if (kind < 74) all_to_all(&g, m, step, what, sizeof what);
    else if (kind < 82) pair(&g, &comms[0], step, what, sizeof what);
    else if (kind < 88 && size >= 2) outstanding(&g, &comms[0], step, what, sizeof what);
    else if (kind < 94) two_threads(&ta, &tb, step, seed, what, sizeof what);
    else { /* a communicator freed and split again (a mesh per test) */
      int k = (int)pick(&g, ncomms), colors = comms[k].colors;
      mpi.Comm_free(&comms[k].c);
      comms[k] = split(colors);
      report(step, "a communicator freed and split again", 1, 0);
    }
    fflush(stdout);
  }
  mpi.Barrier(mpi.COMM_WORLD);
  printf("FUZZ rank %d: seed %d, %d steps, %d wrong\n", rank, seed, steps, failures);
  fflush(stdout);
  mpi.Finalize();
  printf("DONE rank %d\n", rank);
  fflush(stdout);
  return failures ? 1 : 0;
}

/*
 * Conformance harness for the MPIABI wrapper.
 *
 *     mpiexec -n <N> ./harness <path/to/wrapper.so> <scratch-dir>
 *
 * The harness includes no MPI header and does not link against the wrapper.
 * It loads the wrapper the way MPItrampoline does -- dlopen() with
 * RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND -- and obtains every MPIABI_*
 * function and constant it uses with dlsym().  The prototypes and constant
 * types come from the generated mpiabi.h via __typeof__, so a mismatch
 * between that header and what the test does is a compile error.
 *
 * Every check group is run by all ranks (any N >= 2).  A failed check prints
 *     FAIL <group>: rank <r>: <detail> (harness.c:<line>)
 * and is counted; after each group rank 0 prints "PASS <group>" or
 * "FAIL <group>: ...".  At the end rank 0 prints
 *     conformance: <N> checks passed
 * and the exit status is 0 only if nothing failed.
 *
 * Groups: init misc constants p2p probe collectives nbcollectives requests
 * persistent datatypes comms intercomm topology userop info attributes
 * errhandlers rma io grequest threads.  Set CONFORMANCE_GROUPS=p2p,rma,... to
 * run only some of them (debugging).  The harness splits communicators with
 * reversed keys, so run it with MPI_COLLECTIVES_CHECK_SPLITS=0 (the wrapper's
 * XLA-only split check); tests/native/test_conformance.py does.
 *
 * Where the MPI standard leaves a choice, the checks accept what MPICH and
 * Intel MPI do (noted where it matters), and only that.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#include "mpiabi.h"

/* ------------------------------------------------------------------------ */
/* The MPIABI symbols the harness uses.                                     */

#define MPI_FUNCTIONS(X)                                                                           \
  X(Abort) X(Accumulate) X(Add_error_class) X(Add_error_code) X(Add_error_string) X(Aint_add)      \
  X(Aint_diff) X(Allgather) X(Allgatherv) X(Allreduce) X(Alltoall) X(Alltoallv) X(Alltoallw)       \
  X(Barrier) X(Bcast) X(Bsend) X(Buffer_attach) X(Buffer_detach) X(Cancel) X(Cart_coords)          \
  X(Cart_create) X(Cart_shift) X(Comm_c2f) X(Comm_call_errhandler) X(Comm_compare)                 \
  X(Comm_create) X(Comm_create_errhandler) X(Comm_create_group) X(Comm_create_keyval)              \
  X(Comm_delete_attr) X(Comm_dup) X(Comm_f2c) X(Comm_free) X(Comm_free_keyval)                     \
  X(Comm_get_attr) X(Comm_get_errhandler) X(Comm_get_name) X(Comm_group) X(Comm_idup)              \
  X(Comm_rank) X(Comm_remote_size) X(Comm_set_attr) X(Comm_set_errhandler) X(Comm_set_name)        \
  X(Comm_size) X(Comm_split) X(Comm_split_type) X(Comm_test_inter) X(Compare_and_swap)             \
  X(Dims_create) X(Errhandler_free) X(Error_class) X(Error_string) X(Exscan) X(Fetch_and_op)       \
  X(File_close) X(File_delete) X(File_get_amode) X(File_get_errhandler) X(File_get_position)       \
  X(File_get_size) X(File_get_view) X(File_iread_at) X(File_iwrite_at) X(File_open)                \
  X(File_read_all) X(File_read_at) X(File_seek) X(File_set_size) X(File_set_view) X(File_sync)     \
  X(File_write_all) X(File_write_at) X(Finalize) X(Finalized) X(Free_mem) X(Alloc_mem)             \
  X(Gather) X(Gatherv) X(Get) X(Get_address) X(Get_count) X(Get_elements) X(Get_library_version)   \
  X(Get_processor_name) X(Get_version) X(Grequest_complete) X(Grequest_start)                      \
  X(Group_compare) X(Group_difference) X(Group_excl) X(Group_free) X(Group_incl)                   \
  X(Group_intersection) X(Group_range_incl) X(Group_rank) X(Group_size)                            \
  X(Group_translate_ranks) X(Group_union) X(Iallgather) X(Iallgatherv) X(Iallreduce)               \
  X(Ialltoall) X(Ialltoallv) X(Ialltoallw) X(Ibarrier) X(Ibcast) X(Iexscan) X(Igather)             \
  X(Igatherv) X(Improbe) X(Imrecv) X(Info_create) X(Info_delete) X(Info_dup) X(Info_free)          \
  X(Info_get) X(Info_get_nkeys) X(Info_get_nthkey) X(Info_get_valuelen) X(Info_set)                \
  X(Init_thread) X(Initialized) X(Intercomm_create) X(Intercomm_merge) X(Iprobe) X(Irecv)          \
  X(Ireduce) X(Ireduce_scatter) X(Ireduce_scatter_block) X(Is_thread_main) X(Iscan)                \
  X(Iscatter) X(Iscatterv) X(Isend) X(Issend) X(Mprobe) X(Mrecv) X(Op_commutative)                 \
  X(Op_create) X(Op_free) X(Pack) X(Pack_external) X(Pack_external_size) X(Pack_size)              \
  X(Probe) X(Put) X(Query_thread) X(Recv) X(Recv_init) X(Reduce) X(Reduce_local)                   \
  X(Reduce_scatter) X(Reduce_scatter_block) X(Request_free) X(Request_get_status) X(Rsend)         \
  X(Scan) X(Scatter) X(Scatterv) X(Send) X(Send_init) X(Sendrecv) X(Sendrecv_replace)              \
  X(Ssend) X(Start) X(Startall) X(Status_set_cancelled) X(Status_set_elements) X(Test)             \
  X(Test_cancelled) X(Testall) X(Testany) X(Testsome) X(Topo_test) X(Type_c2f) X(Type_commit)      \
  X(Type_contiguous) X(Type_create_keyval) X(Type_create_resized) X(Type_create_struct)            \
  X(Type_create_subarray) X(Type_dup) X(Type_f2c) X(Type_free) X(Type_free_keyval)                 \
  X(Type_get_attr) X(Type_get_contents) X(Type_get_envelope) X(Type_get_extent)                    \
  X(Type_get_name) X(Type_get_true_extent) X(Type_indexed) X(Type_set_attr) X(Type_size)           \
  X(Type_vector) X(Unpack) X(Wait) X(Waitall) X(Waitany) X(Waitsome) X(Win_allocate)               \
  X(Win_create) X(Win_fence) X(Win_flush) X(Win_free) X(Win_get_attr) X(Win_get_group)             \
  X(Win_lock) X(Win_unlock) X(Wtick) X(Wtime) X(Dist_graph_create_adjacent)                        \
  X(Dist_graph_neighbors) X(Dist_graph_neighbors_count) X(Neighbor_allgather)                      \
  X(Neighbor_alltoallw) X(Ineighbor_alltoallw) X(Win_create_errhandler) X(Win_set_errhandler)      \
  X(Win_call_errhandler) X(File_create_errhandler) X(File_set_errhandler)                          \
  X(File_call_errhandler) X(Win_create_keyval) X(Win_set_attr) X(Win_delete_attr)                  \
  X(Win_free_keyval) X(Type_delete_attr)

/* X(field in struct mpi, symbol suffix): MPIABI_2INT cannot be a field name,
 * and SEEK_SET is a <stdio.h> macro. */
#define MPI_CONSTANTS(X)                                                                           \
  X(TWOINT, 2INT) X(AINT, AINT) X(ANY_SOURCE, ANY_SOURCE) X(ANY_TAG, ANY_TAG) X(BAND, BAND)        \
  X(BOR, BOR) X(BOTTOM, BOTTOM) X(BSEND_OVERHEAD, BSEND_OVERHEAD) X(BXOR, BXOR) X(BYTE, BYTE)      \
  X(CART, CART) X(CHAR, CHAR) X(COMBINER_CONTIGUOUS, COMBINER_CONTIGUOUS)                          \
  X(COMBINER_DUP, COMBINER_DUP) X(COMBINER_INDEXED, COMBINER_INDEXED)                              \
  X(COMBINER_NAMED, COMBINER_NAMED) X(COMBINER_RESIZED, COMBINER_RESIZED)                          \
  X(COMBINER_STRUCT, COMBINER_STRUCT) X(COMBINER_SUBARRAY, COMBINER_SUBARRAY)                      \
  X(COMBINER_VECTOR, COMBINER_VECTOR) X(COMM_DUP_FN, COMM_DUP_FN) X(COMM_NULL, COMM_NULL)          \
  X(COMM_NULL_COPY_FN, COMM_NULL_COPY_FN) X(COMM_NULL_DELETE_FN, COMM_NULL_DELETE_FN)              \
  X(COMM_SELF, COMM_SELF) X(COMM_TYPE_SHARED, COMM_TYPE_SHARED) X(COMM_WORLD, COMM_WORLD)          \
  X(CONGRUENT, CONGRUENT) X(COUNT, COUNT) X(C_BOOL, C_BOOL) X(C_DOUBLE_COMPLEX, C_DOUBLE_COMPLEX)  \
  X(C_FLOAT_COMPLEX, C_FLOAT_COMPLEX) X(DATATYPE_NULL, DATATYPE_NULL) X(DOUBLE, DOUBLE)            \
  X(DOUBLE_INT, DOUBLE_INT) X(ERRHANDLER_NULL, ERRHANDLER_NULL)                                    \
  X(ERRORS_ARE_FATAL, ERRORS_ARE_FATAL) X(ERRORS_RETURN, ERRORS_RETURN) X(ERR_ARG, ERR_ARG)        \
  X(ERR_COUNT, ERR_COUNT) X(ERR_IN_STATUS, ERR_IN_STATUS) X(ERR_LASTCODE, ERR_LASTCODE)            \
  X(ERR_NO_SUCH_FILE, ERR_NO_SUCH_FILE) X(ERR_OTHER, ERR_OTHER) X(ERR_RANK, ERR_RANK)              \
  X(ERR_PENDING, ERR_PENDING)                                                                      \
  X(ERR_ROOT, ERR_ROOT) X(ERR_TAG, ERR_TAG) X(ERR_TRUNCATE, ERR_TRUNCATE) X(ERR_TYPE, ERR_TYPE)    \
  X(FILE_NULL, FILE_NULL) X(FLOAT, FLOAT) X(FLOAT_INT, FLOAT_INT) X(GROUP_EMPTY, GROUP_EMPTY)      \
  X(GROUP_NULL, GROUP_NULL) X(IDENT, IDENT) X(INFO_ENV, INFO_ENV) X(INFO_NULL, INFO_NULL)          \
  X(INT, INT) X(INT16_T, INT16_T) X(INT32_T, INT32_T) X(INT64_T, INT64_T) X(INT8_T, INT8_T)        \
  X(IN_PLACE, IN_PLACE) X(KEYVAL_INVALID, KEYVAL_INVALID) X(LAND, LAND)                            \
  X(LASTUSEDCODE, LASTUSEDCODE) X(LOCK_EXCLUSIVE, LOCK_EXCLUSIVE) X(LOCK_SHARED, LOCK_SHARED)      \
  X(LONG, LONG) X(LONG_DOUBLE, LONG_DOUBLE) X(LONG_INT, LONG_INT) X(LONG_LONG, LONG_LONG)          \
  X(LOR, LOR) X(LXOR, LXOR) X(MAX, MAX) X(MAXLOC, MAXLOC) X(MESSAGE_NO_PROC, MESSAGE_NO_PROC)      \
  X(MESSAGE_NULL, MESSAGE_NULL) X(MIN, MIN) X(MINLOC, MINLOC) X(MODE_CREATE, MODE_CREATE)          \
  X(MODE_RDONLY, MODE_RDONLY) X(MODE_RDWR, MODE_RDWR) X(OFFSET, OFFSET) X(OP_NULL, OP_NULL)        \
  X(ORDER_C, ORDER_C) X(ORDER_FORTRAN, ORDER_FORTRAN)                                              \
  X(PACKED, PACKED) X(PROC_NULL, PROC_NULL) X(PROD, PROD) X(REQUEST_NULL, REQUEST_NULL)            \
  X(SEEK_SET_, SEEK_SET) X(SHORT, SHORT) X(SHORT_INT, SHORT_INT) X(SIGNED_CHAR, SIGNED_CHAR)       \
  X(SIMILAR, SIMILAR) X(STATUSES_IGNORE, STATUSES_IGNORE) X(STATUS_IGNORE, STATUS_IGNORE)          \
  X(SUCCESS, SUCCESS) X(SUM, SUM) X(TAG_UB, TAG_UB) X(THREAD_FUNNELED, THREAD_FUNNELED)            \
  X(THREAD_MULTIPLE, THREAD_MULTIPLE) X(THREAD_SERIALIZED, THREAD_SERIALIZED)                      \
  X(THREAD_SINGLE, THREAD_SINGLE)                                                                  \
  X(TYPE_DUP_FN, TYPE_DUP_FN) X(TYPE_NULL_DELETE_FN, TYPE_NULL_DELETE_FN) X(UINT16_T, UINT16_T)    \
  X(UINT64_T, UINT64_T) X(UINT8_T, UINT8_T) X(UNDEFINED, UNDEFINED) X(UNEQUAL, UNEQUAL)            \
  X(UNSIGNED, UNSIGNED) X(UNSIGNED_CHAR, UNSIGNED_CHAR) X(UNSIGNED_LONG, UNSIGNED_LONG)            \
  X(UNSIGNED_LONG_LONG, UNSIGNED_LONG_LONG) X(UNSIGNED_SHORT, UNSIGNED_SHORT) X(WCHAR, WCHAR)      \
  X(WIN_BASE, WIN_BASE) X(WIN_CREATE_FLAVOR, WIN_CREATE_FLAVOR) X(WIN_DISP_UNIT, WIN_DISP_UNIT)    \
  X(WIN_FLAVOR_ALLOCATE, WIN_FLAVOR_ALLOCATE) X(WIN_FLAVOR_CREATE, WIN_FLAVOR_CREATE)              \
  X(WIN_MODEL, WIN_MODEL) X(WIN_NULL, WIN_NULL) X(WIN_SEPARATE, WIN_SEPARATE)                      \
  X(WIN_SIZE, WIN_SIZE) X(WIN_UNIFIED, WIN_UNIFIED) X(WTIME_IS_GLOBAL, WTIME_IS_GLOBAL)            \
  X(ROOT, ROOT) X(UNWEIGHTED, UNWEIGHTED) X(DIST_GRAPH, DIST_GRAPH)

/* Functions are pointers with the header's prototypes; constants are values
 * (the comma operator drops the header's const qualifier).  Test code says
 * mpi.Send(buf, 1, mpi.INT, dest, tag, mpi.COMM_WORLD). */
static struct {
#define DECLARE_FUNCTION(name) __typeof__(MPIABI_##name) *name;
  MPI_FUNCTIONS(DECLARE_FUNCTION)
#define DECLARE_CONSTANT(field, sym) __typeof__((void)0, MPIABI_##sym) field;
  MPI_CONSTANTS(DECLARE_CONSTANT)
} mpi;

static void *wrapper_handle;

static void *must_dlsym(const char *name) {
  dlerror();
  void *p = dlsym(wrapper_handle, name);
  if (p == NULL) {
    const char *err = dlerror();
    printf("FAIL load: wrapper does not export %s (%s)\n", name, err ? err : "null address");
    fflush(stdout);
    exit(2);
  }
  return p;
}

static void load_wrapper(const char *path) {
  /* Exactly MPItrampoline's flags. */
  wrapper_handle = dlopen(path, RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND);
  if (wrapper_handle == NULL) {
    printf("FAIL load: dlopen(%s): %s\n", path, dlerror());
    fflush(stdout);
    exit(2);
  }
  /* POSIX-sanctioned way to store a dlsym result in a function pointer. */
#define LOAD_FUNCTION(name) *(void **)&mpi.name = must_dlsym("MPIABI_" #name);
  MPI_FUNCTIONS(LOAD_FUNCTION)
  /* Constants are filled in by the wrapper's constructor, which has run by
   * the time dlopen returns: read them now, as MPItrampoline does. */
#define LOAD_CONSTANT(field, sym) mpi.field = *(__typeof__(MPIABI_##sym) *)must_dlsym("MPIABI_" #sym);
  MPI_CONSTANTS(LOAD_CONSTANT)
}

/* ------------------------------------------------------------------------ */
/* Checking.                                                                */

static int world_rank = -1, world_size = 0;
static long n_checks;         /* checks run by this rank */
static int group_failures;    /* failed checks of this rank in the current group */
static int total_failures;    /* groups that failed anywhere (rank 0's view) */
static const char *volatile current_group = "load";

static void failf(int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("FAIL %s: rank %d: %s (harness.c:%d)\n", current_group, world_rank, msg, line);
  fflush(stdout);
  group_failures++;
}

#define CHECK(cond, ...)                          \
  do {                                            \
    n_checks++;                                   \
    if (!(cond)) failf(__LINE__, __VA_ARGS__);    \
  } while (0)

#define CHECK_EQ(a, b)                                                                        \
  do {                                                                                        \
    long long a_ = (long long)(a), b_ = (long long)(b);                                       \
    n_checks++;                                                                               \
    if (a_ != b_) failf(__LINE__, "%s is %lld, expected %s = %lld", #a, a_, #b, b_);          \
  } while (0)

#define CHECK_STR(a, b)                                                                       \
  do {                                                                                        \
    const char *a_ = (a), *b_ = (b);                                                          \
    n_checks++;                                                                               \
    if (strcmp(a_, b_) != 0) failf(__LINE__, "%s is \"%s\", expected \"%s\"", #a, a_, b_);    \
  } while (0)

/* An MPI call that must return MPIABI_SUCCESS. */
#define OK(call)                                                                              \
  do {                                                                                        \
    int rc_ = (call);                                                                         \
    n_checks++;                                                                               \
    if (rc_ != mpi.SUCCESS) failf(__LINE__, "%s returned %d", #call, rc_);                    \
  } while (0)

/* MPI_ERROR of a status is only written by the multiple-completion calls; we
 * preset a sentinel and accept it unchanged or MPI_SUCCESS, never garbage. */
#define ERROR_SENTINEL 0x5eed

static void status_preset(MPIABI_Status *st, int n) {
  for (int i = 0; i < n; i++) {
    memset(&st[i], 0xa5, sizeof st[i]);
    st[i].MPI_ERROR = ERROR_SENTINEL;
  }
}

#define CHECK_STATUS(st, src, tag, dtype, count) check_status(__LINE__, #st, &(st), src, tag, dtype, count)

static void check_status(int line, const char *what, const MPIABI_Status *st, int src, int tag,
                         MPIABI_Datatype dtype, int count) {
  int got = -12345;
  n_checks += 4;
  if (st->MPI_SOURCE != src) failf(line, "%s.MPI_SOURCE is %d, expected %d", what, st->MPI_SOURCE, src);
  if (st->MPI_TAG != tag) failf(line, "%s.MPI_TAG is %d, expected %d", what, st->MPI_TAG, tag);
  if (st->MPI_ERROR != ERROR_SENTINEL && st->MPI_ERROR != mpi.SUCCESS)
    failf(line, "%s.MPI_ERROR is %d, expected MPI_SUCCESS or left unchanged", what, st->MPI_ERROR);
  int rc = mpi.Get_count(st, dtype, &got);
  if (rc != mpi.SUCCESS || got != count)
    failf(line, "Get_count(%s) is %d (rc %d), expected %d", what, got, rc, count);
}

/* An "empty" status (MPI-4.1 3.7.3): source ANY_SOURCE, tag ANY_TAG, count 0. */
#define CHECK_EMPTY_STATUS(st) check_status(__LINE__, #st, &(st), mpi.ANY_SOURCE, mpi.ANY_TAG, mpi.INT, 0)

static int left(void) { return (world_rank + world_size - 1) % world_size; }
static int right(void) { return (world_rank + 1) % world_size; }

static void *xmalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (!p) abort();
  return p;
}

static void on_alarm(int sig) {
  (void)sig;
  char buf[256];
  int n = snprintf(buf, sizeof buf, "FAIL %s: rank %d: timed out (hang?)\n", current_group, world_rank);
  if (write(1, buf, (size_t)n) < 0) { /* nothing to do */ }
  _exit(3);
}

/* ------------------------------------------------------------------------ */
/* Groups.                                                                  */

static int provided_level;
static int initialized_before_init = -1; /* MPI_Initialized, called before MPI_Init_thread */

static void test_init(void) {
  int flag = -1, level = -1;
  CHECK_EQ(initialized_before_init, 0);
  OK(mpi.Initialized(&flag));
  CHECK_EQ(flag, 1);
  OK(mpi.Finalized(&flag));
  CHECK_EQ(flag, 0);
  /* MPI requires SINGLE < FUNNELED < SERIALIZED < MULTIPLE. */
  CHECK(mpi.THREAD_SINGLE < mpi.THREAD_FUNNELED && mpi.THREAD_FUNNELED < mpi.THREAD_SERIALIZED &&
            mpi.THREAD_SERIALIZED < mpi.THREAD_MULTIPLE,
        "thread level constants not ordered: %d %d %d %d", mpi.THREAD_SINGLE, mpi.THREAD_FUNNELED,
        mpi.THREAD_SERIALIZED, mpi.THREAD_MULTIPLE);
  /* MPICH and Intel MPI both provide MPI_THREAD_MULTIPLE. */
  CHECK_EQ(provided_level, mpi.THREAD_MULTIPLE);
  OK(mpi.Query_thread(&level));
  CHECK_EQ(level, provided_level);
  OK(mpi.Is_thread_main(&flag));
  CHECK_EQ(flag, 1);
  CHECK(world_size >= 2, "needs at least 2 ranks, have %d", world_size);
  int r = -1, s = -1;
  OK(mpi.Comm_rank(mpi.COMM_SELF, &r));
  OK(mpi.Comm_size(mpi.COMM_SELF, &s));
  CHECK_EQ(r, 0);
  CHECK_EQ(s, 1);
}

static void test_misc(void) {
  char version[8192];
  int len = -1;
  memset(version, 0, sizeof version);
  OK(mpi.Get_library_version(version, &len));
  /* Open MPI counts the terminating NUL in len; MPICH does not. */
  CHECK(len > 0 && ((size_t)len == strlen(version) || (size_t)len == strlen(version) + 1),
        "Get_library_version: len %d, strlen %zu", len, strlen(version));
  int v = -1, sv = -1;
  OK(mpi.Get_version(&v, &sv));
  CHECK(v >= 3 && sv >= 0, "Get_version gave %d.%d", v, sv);
  char name[4096];
  memset(name, 0, sizeof name);
  OK(mpi.Get_processor_name(name, &len));
  CHECK(len > 0 && (size_t)len == strlen(name), "Get_processor_name: len %d, \"%s\"", len, name);
  double t0 = mpi.Wtime(), prev = t0, tick = mpi.Wtick();
  CHECK(tick > 0.0 && tick < 1.0, "Wtick is %g", tick);
  int monotone = 1;
  for (int i = 0; i < 1000; i++) {
    double t = mpi.Wtime();
    if (t < prev) monotone = 0;
    prev = t;
  }
  usleep(20000);
  double t1 = mpi.Wtime();
  CHECK(monotone, "Wtime went backwards");
  CHECK(t1 - t0 >= 0.015 && t1 - t0 < 10.0, "Wtime advanced %g s over a 20 ms sleep", t1 - t0);
  void *mem = NULL;
  OK(mpi.Alloc_mem(4096, mpi.INFO_NULL, &mem));
  CHECK(mem != NULL, "Alloc_mem gave NULL");
  if (mem) {
    memset(mem, 1, 4096);
    OK(mpi.Free_mem(mem));
  }
}

static void test_constants(void) {
  /* Each constant read at dlopen time must equal its value now (after Init):
   * the wrapper must fill them in its constructor, not in MPI_Init. */
#define RECHECK_CONSTANT(field, sym)                                                 \
  {                                                                                  \
    __typeof__(mpi.field) now_ = *(__typeof__(MPIABI_##sym) *)must_dlsym("MPIABI_" #sym); \
    n_checks++;                                                                      \
    if (memcmp(&now_, &mpi.field, sizeof now_) != 0)                                 \
      failf(__LINE__, "MPIABI_" #sym " changed between dlopen and MPI_Init");        \
  }
  MPI_CONSTANTS(RECHECK_CONSTANT)

  CHECK_EQ(mpi.SUCCESS, 0);
  /* Handles of distinct objects must differ (all-equal means "never filled"). */
  MPIABI_Comm comms[] = {mpi.COMM_WORLD, mpi.COMM_SELF, mpi.COMM_NULL};
  MPIABI_Datatype types[] = {mpi.INT, mpi.DOUBLE, mpi.FLOAT, mpi.CHAR, mpi.BYTE, mpi.SHORT,
                             mpi.LONG, mpi.LONG_LONG, mpi.UNSIGNED, mpi.INT8_T, mpi.INT16_T,
                             mpi.INT64_T, mpi.UINT64_T, mpi.PACKED, mpi.TWOINT, mpi.DOUBLE_INT,
                             mpi.DATATYPE_NULL, mpi.C_BOOL, mpi.AINT, mpi.COUNT, mpi.OFFSET};
  MPIABI_Op ops[] = {mpi.SUM, mpi.MAX, mpi.MIN, mpi.PROD, mpi.LAND, mpi.LOR, mpi.LXOR,
                     mpi.BAND, mpi.BOR, mpi.BXOR, mpi.MAXLOC, mpi.MINLOC, mpi.OP_NULL};
  int errs[] = {mpi.SUCCESS, mpi.ERR_RANK, mpi.ERR_TAG, mpi.ERR_COUNT, mpi.ERR_TYPE,
                mpi.ERR_ROOT, mpi.ERR_ARG, mpi.ERR_OTHER, mpi.ERR_TRUNCATE, mpi.ERR_IN_STATUS,
                mpi.ERR_NO_SUCH_FILE};
  int specials[] = {mpi.ANY_SOURCE, mpi.PROC_NULL, mpi.UNDEFINED};
#define ALL_DISTINCT(arr)                                                               \
  for (size_t i_ = 0; i_ < sizeof(arr) / sizeof(arr[0]); i_++)                          \
    for (size_t j_ = i_ + 1; j_ < sizeof(arr) / sizeof(arr[0]); j_++)                   \
      CHECK(arr[i_] != arr[j_], #arr "[%zu] == " #arr "[%zu] (0x%llx)", i_, j_,          \
            (unsigned long long)arr[i_]);
  ALL_DISTINCT(comms)
  ALL_DISTINCT(types)
  ALL_DISTINCT(ops)
  ALL_DISTINCT(errs)
  ALL_DISTINCT(specials)
  for (size_t i = 1; i < sizeof errs / sizeof errs[0]; i++)
    CHECK(errs[i] > 0 && errs[i] <= mpi.ERR_LASTCODE, "error class %d outside (0, ERR_LASTCODE=%d]",
          errs[i], mpi.ERR_LASTCODE);
  CHECK(mpi.IN_PLACE != NULL, "MPIABI_IN_PLACE is NULL");
  /* MPIABI_STATUS_IGNORE may be NULL: it is Open MPI's and the standard ABI's value. */
  CHECK(mpi.IN_PLACE != mpi.BOTTOM, "MPIABI_IN_PLACE == MPIABI_BOTTOM");

  /* Fortran handle round trips. */
  CHECK_EQ(mpi.Comm_f2c(mpi.Comm_c2f(mpi.COMM_WORLD)), mpi.COMM_WORLD);
  CHECK_EQ(mpi.Comm_f2c(mpi.Comm_c2f(mpi.COMM_SELF)), mpi.COMM_SELF);
  CHECK_EQ(mpi.Type_f2c(mpi.Type_c2f(mpi.DOUBLE)), mpi.DOUBLE);

  /* Predefined names (MPI-4.1 7.8: the default name is the handle's name). */
  char name[256];
  int len = -1;
  struct { const char *name; MPIABI_Datatype t; } named[] = {
      {"MPI_INT", mpi.INT},         {"MPI_DOUBLE", mpi.DOUBLE},   {"MPI_FLOAT", mpi.FLOAT},
      {"MPI_CHAR", mpi.CHAR},       {"MPI_BYTE", mpi.BYTE},       {"MPI_SHORT", mpi.SHORT},
      {"MPI_UNSIGNED", mpi.UNSIGNED}, {"MPI_INT8_T", mpi.INT8_T}, {"MPI_INT32_T", mpi.INT32_T},
      {"MPI_INT64_T", mpi.INT64_T}, {"MPI_UINT64_T", mpi.UINT64_T}, {"MPI_PACKED", mpi.PACKED},
      {"MPI_2INT", mpi.TWOINT},     {"MPI_DOUBLE_INT", mpi.DOUBLE_INT}, {"MPI_C_BOOL", mpi.C_BOOL},
      {"MPI_UNSIGNED_CHAR", mpi.UNSIGNED_CHAR}, {"MPI_LONG_DOUBLE", mpi.LONG_DOUBLE},
  };
  for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
    memset(name, 0, sizeof name);
    OK(mpi.Type_get_name(named[i].t, name, &len));
    CHECK_STR(name, named[i].name);
    CHECK_EQ(len, strlen(named[i].name));
  }
  memset(name, 0, sizeof name);
  OK(mpi.Comm_get_name(mpi.COMM_WORLD, name, &len));
  CHECK_STR(name, "MPI_COMM_WORLD");
  memset(name, 0, sizeof name);
  OK(mpi.Comm_get_name(mpi.COMM_SELF, name, &len));
  CHECK_STR(name, "MPI_COMM_SELF");

  /* Sizes and extents of predefined types. */
  struct { const char *name; MPIABI_Datatype t; int size; long extent; } sizes[] = {
      {"INT", mpi.INT, sizeof(int), sizeof(int)},
      {"DOUBLE", mpi.DOUBLE, sizeof(double), sizeof(double)},
      {"FLOAT", mpi.FLOAT, sizeof(float), sizeof(float)},
      {"CHAR", mpi.CHAR, 1, 1},
      {"SIGNED_CHAR", mpi.SIGNED_CHAR, 1, 1},
      {"UNSIGNED_CHAR", mpi.UNSIGNED_CHAR, 1, 1},
      {"BYTE", mpi.BYTE, 1, 1},
      {"SHORT", mpi.SHORT, sizeof(short), sizeof(short)},
      {"UNSIGNED_SHORT", mpi.UNSIGNED_SHORT, sizeof(short), sizeof(short)},
      {"LONG", mpi.LONG, sizeof(long), sizeof(long)},
      {"UNSIGNED_LONG", mpi.UNSIGNED_LONG, sizeof(long), sizeof(long)},
      {"LONG_LONG", mpi.LONG_LONG, sizeof(long long), sizeof(long long)},
      {"UNSIGNED_LONG_LONG", mpi.UNSIGNED_LONG_LONG, sizeof(long long), sizeof(long long)},
      {"UNSIGNED", mpi.UNSIGNED, sizeof(unsigned), sizeof(unsigned)},
      {"LONG_DOUBLE", mpi.LONG_DOUBLE, sizeof(long double), sizeof(long double)},
      {"WCHAR", mpi.WCHAR, sizeof(wchar_t), sizeof(wchar_t)},
      {"C_BOOL", mpi.C_BOOL, sizeof(_Bool), sizeof(_Bool)},
      {"INT8_T", mpi.INT8_T, 1, 1},
      {"UINT8_T", mpi.UINT8_T, 1, 1},
      {"INT16_T", mpi.INT16_T, 2, 2},
      {"UINT16_T", mpi.UINT16_T, 2, 2},
      {"INT32_T", mpi.INT32_T, 4, 4},
      {"INT64_T", mpi.INT64_T, 8, 8},
      {"UINT64_T", mpi.UINT64_T, 8, 8},
      {"AINT", mpi.AINT, sizeof(MPIABI_Aint), sizeof(MPIABI_Aint)},
      {"OFFSET", mpi.OFFSET, sizeof(MPIABI_Offset), sizeof(MPIABI_Offset)},
      {"COUNT", mpi.COUNT, sizeof(MPIABI_Count), sizeof(MPIABI_Count)},
      {"C_FLOAT_COMPLEX", mpi.C_FLOAT_COMPLEX, 2 * sizeof(float), 2 * sizeof(float)},
      {"C_DOUBLE_COMPLEX", mpi.C_DOUBLE_COMPLEX, 2 * sizeof(double), 2 * sizeof(double)},
      {"2INT", mpi.TWOINT, 2 * sizeof(int), sizeof(struct { int a, b; })},
      {"FLOAT_INT", mpi.FLOAT_INT, sizeof(float) + sizeof(int), sizeof(struct { float a; int b; })},
      {"DOUBLE_INT", mpi.DOUBLE_INT, sizeof(double) + sizeof(int), sizeof(struct { double a; int b; })},
      {"LONG_INT", mpi.LONG_INT, sizeof(long) + sizeof(int), sizeof(struct { long a; int b; })},
      {"SHORT_INT", mpi.SHORT_INT, sizeof(short) + sizeof(int), sizeof(struct { short a; int b; })},
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    int sz = -1;
    MPIABI_Aint lb = -1, ext = -1;
    OK(mpi.Type_size(sizes[i].t, &sz));
    CHECK(sz == sizes[i].size, "Type_size(MPIABI_%s) is %d, expected %d", sizes[i].name, sz, sizes[i].size);
    OK(mpi.Type_get_extent(sizes[i].t, &lb, &ext));
    CHECK(lb == 0 && ext == sizes[i].extent, "Type_get_extent(MPIABI_%s) is lb %ld extent %ld, expected 0, %ld",
          sizes[i].name, (long)lb, (long)ext, sizes[i].extent);
  }
}

static void test_p2p(void) {
  int me = world_rank, l = left(), r = right();
  int sbuf[8], rbuf[16];
  MPIABI_Status st;

  /* Chain around the ring with wildcards. */
  for (int i = 0; i < 8; i++) sbuf[i] = me * 100 + i;
  memset(rbuf, 0xff, sizeof rbuf);
  status_preset(&st, 1);
  if (me == 0) {
    OK(mpi.Send(sbuf, 5, mpi.INT, r, 100 + me, mpi.COMM_WORLD));
    OK(mpi.Recv(rbuf, 16, mpi.INT, mpi.ANY_SOURCE, mpi.ANY_TAG, mpi.COMM_WORLD, &st));
  } else {
    OK(mpi.Recv(rbuf, 16, mpi.INT, mpi.ANY_SOURCE, mpi.ANY_TAG, mpi.COMM_WORLD, &st));
    OK(mpi.Send(sbuf, 5, mpi.INT, r, 100 + me, mpi.COMM_WORLD));
  }
  CHECK_STATUS(st, l, 100 + l, mpi.INT, 5);
  int cnt = -1;
  OK(mpi.Get_count(&st, mpi.BYTE, &cnt));
  CHECK_EQ(cnt, 5 * sizeof(int));
  OK(mpi.Get_elements(&st, mpi.INT, &cnt));
  CHECK_EQ(cnt, 5);
  for (int i = 0; i < 5; i++) CHECK_EQ(rbuf[i], l * 100 + i);
  CHECK_EQ(rbuf[5], -1);

  /* Explicit source and tag; a byte count that is not a whole number of ints. */
  unsigned char bytes[6] = {1, 2, 3, 4, 5, 6}, rbytes[16];
  MPIABI_Request req;
  OK(mpi.Irecv(rbytes, 16, mpi.BYTE, l, 101, mpi.COMM_WORLD, &req));
  OK(mpi.Send(bytes, 6, mpi.BYTE, r, 101, mpi.COMM_WORLD));
  status_preset(&st, 1);
  OK(mpi.Wait(&req, &st));
  CHECK_EQ(req, mpi.REQUEST_NULL);
  CHECK_STATUS(st, l, 101, mpi.BYTE, 6);
  OK(mpi.Get_count(&st, mpi.INT, &cnt));
  CHECK_EQ(cnt, mpi.UNDEFINED);
  CHECK(memcmp(rbytes, bytes, 6) == 0, "byte payload differs");

  /* STATUS_IGNORE. */
  OK(mpi.Irecv(rbuf, 16, mpi.INT, l, 102, mpi.COMM_WORLD, &req));
  OK(mpi.Send(sbuf, 3, mpi.INT, r, 102, mpi.COMM_WORLD));
  OK(mpi.Wait(&req, mpi.STATUS_IGNORE));
  for (int i = 0; i < 3; i++) CHECK_EQ(rbuf[i], l * 100 + i);
  OK(mpi.Irecv(rbuf, 16, mpi.INT, l, 103, mpi.COMM_WORLD, &req));
  OK(mpi.Send(sbuf, 2, mpi.INT, r, 103, mpi.COMM_WORLD));
  OK(mpi.Wait(&req, mpi.STATUS_IGNORE));

  /* PROC_NULL. */
  OK(mpi.Send(sbuf, 3, mpi.INT, mpi.PROC_NULL, 104, mpi.COMM_WORLD));
  status_preset(&st, 1);
  OK(mpi.Recv(rbuf, 16, mpi.INT, mpi.PROC_NULL, 104, mpi.COMM_WORLD, &st));
  CHECK_STATUS(st, mpi.PROC_NULL, mpi.ANY_TAG, mpi.INT, 0);

  /* Sendrecv and Sendrecv_replace. */
  memset(rbuf, 0xff, sizeof rbuf);
  status_preset(&st, 1);
  OK(mpi.Sendrecv(sbuf, 4, mpi.INT, r, 200 + me, rbuf, 16, mpi.INT, l, 200 + l, mpi.COMM_WORLD, &st));
  CHECK_STATUS(st, l, 200 + l, mpi.INT, 4);
  for (int i = 0; i < 4; i++) CHECK_EQ(rbuf[i], l * 100 + i);
  int rep[4] = {me, me + 1, me + 2, me + 3};
  status_preset(&st, 1);
  OK(mpi.Sendrecv_replace(rep, 4, mpi.INT, r, 201, l, mpi.ANY_TAG, mpi.COMM_WORLD, &st));
  CHECK_STATUS(st, l, 201, mpi.INT, 4);
  for (int i = 0; i < 4; i++) CHECK_EQ(rep[i], l + i);

  /* Isend/Irecv both ways (left == right when N == 2, so the tags differ). */
  int to_r[3] = {me, 1, 2}, to_l[3] = {me, 3, 4}, from_l[3], from_r[3];
  MPIABI_Request reqs[4];
  OK(mpi.Irecv(from_l, 3, mpi.INT, l, 300, mpi.COMM_WORLD, &reqs[0]));
  OK(mpi.Irecv(from_r, 3, mpi.INT, r, 301, mpi.COMM_WORLD, &reqs[1]));
  OK(mpi.Isend(to_r, 3, mpi.INT, r, 300, mpi.COMM_WORLD, &reqs[2]));
  OK(mpi.Isend(to_l, 3, mpi.INT, l, 301, mpi.COMM_WORLD, &reqs[3]));
  for (int i = 0; i < 4; i++) CHECK(reqs[i] != mpi.REQUEST_NULL, "Isend/Irecv gave REQUEST_NULL");
  MPIABI_Status st2;
  status_preset(&st, 1);
  status_preset(&st2, 1);
  OK(mpi.Wait(&reqs[1], &st2));
  OK(mpi.Wait(&reqs[0], &st));
  OK(mpi.Wait(&reqs[2], mpi.STATUS_IGNORE));
  OK(mpi.Wait(&reqs[3], mpi.STATUS_IGNORE));
  for (int i = 0; i < 4; i++) CHECK_EQ(reqs[i], mpi.REQUEST_NULL);
  CHECK_STATUS(st, l, 300, mpi.INT, 3);
  CHECK_STATUS(st2, r, 301, mpi.INT, 3);
  CHECK(from_l[0] == l && from_l[1] == 1 && from_l[2] == 2, "Irecv from left: %d %d %d", from_l[0],
        from_l[1], from_l[2]);
  CHECK(from_r[0] == r && from_r[1] == 3 && from_r[2] == 4, "Irecv from right: %d %d %d", from_r[0],
        from_r[1], from_r[2]);

  /* Ssend and Issend + Test. */
  OK(mpi.Irecv(rbuf, 16, mpi.INT, l, 302, mpi.COMM_WORLD, &req));
  OK(mpi.Ssend(sbuf, 2, mpi.INT, r, 302, mpi.COMM_WORLD));
  status_preset(&st, 1);
  OK(mpi.Wait(&req, &st));
  CHECK_STATUS(st, l, 302, mpi.INT, 2);
  OK(mpi.Irecv(rbuf, 16, mpi.INT, l, 303, mpi.COMM_WORLD, &reqs[0]));
  OK(mpi.Issend(sbuf, 7, mpi.INT, r, 303, mpi.COMM_WORLD, &reqs[1]));
  int flag = 0, spins = 0;
  status_preset(&st, 1);
  while (!flag && spins++ < 100000000) {
    int rc = mpi.Test(&reqs[0], &flag, &st);
    if (rc != mpi.SUCCESS) {
      failf(__LINE__, "Test returned %d", rc);
      break;
    }
  }
  CHECK_EQ(flag, 1);
  CHECK_EQ(reqs[0], mpi.REQUEST_NULL);
  CHECK_STATUS(st, l, 303, mpi.INT, 7);
  OK(mpi.Wait(&reqs[1], mpi.STATUS_IGNORE));
  for (int i = 0; i < 7; i++) CHECK_EQ(rbuf[i], l * 100 + i);

  /* Rsend: the matching receive is posted before the barrier. */
  OK(mpi.Irecv(rbuf, 16, mpi.INT, l, 304, mpi.COMM_WORLD, &req));
  OK(mpi.Barrier(mpi.COMM_WORLD));
  OK(mpi.Rsend(sbuf, 3, mpi.INT, r, 304, mpi.COMM_WORLD));
  status_preset(&st, 1);
  OK(mpi.Wait(&req, &st));
  CHECK_STATUS(st, l, 304, mpi.INT, 3);

  /* Bsend with an attached buffer. */
  int bsize = 0;
  OK(mpi.Pack_size(4, mpi.INT, mpi.COMM_WORLD, &bsize));
  bsize += mpi.BSEND_OVERHEAD;
  char *bbuf = xmalloc((size_t)bsize);
  OK(mpi.Buffer_attach(bbuf, bsize));
  OK(mpi.Bsend(sbuf, 4, mpi.INT, r, 305, mpi.COMM_WORLD));
  status_preset(&st, 1);
  OK(mpi.Recv(rbuf, 16, mpi.INT, l, 305, mpi.COMM_WORLD, &st));
  CHECK_STATUS(st, l, 305, mpi.INT, 4);
  void *detached = NULL;
  int dsize = -1;
  OK(mpi.Buffer_detach(&detached, &dsize));
  CHECK(detached == bbuf, "Buffer_detach returned %p, expected %p", detached, (void *)bbuf);
  CHECK_EQ(dsize, bsize);
  free(bbuf);
}

static void test_probe(void) {
  int me = world_rank, l = left(), r = right();
  int s3[3] = {me, 1, 2}, s4[4] = {me, 1, 2, 3}, s5[5] = {me, 1, 2, 3, 4}, s6[6] = {me, 1, 2, 3, 4, 5};
  int rb[8];
  MPIABI_Request sreq[4];
  MPIABI_Status st;
  OK(mpi.Isend(s3, 3, mpi.INT, r, 500, mpi.COMM_WORLD, &sreq[0]));
  OK(mpi.Isend(s4, 4, mpi.INT, r, 501, mpi.COMM_WORLD, &sreq[1]));
  OK(mpi.Isend(s5, 5, mpi.INT, r, 502, mpi.COMM_WORLD, &sreq[2]));
  OK(mpi.Isend(s6, 6, mpi.INT, r, 503, mpi.COMM_WORLD, &sreq[3]));

  status_preset(&st, 1);
  OK(mpi.Probe(l, 500, mpi.COMM_WORLD, &st));
  CHECK_STATUS(st, l, 500, mpi.INT, 3);
  OK(mpi.Recv(rb, 8, mpi.INT, l, 500, mpi.COMM_WORLD, mpi.STATUS_IGNORE));
  CHECK_EQ(rb[0], l);

  int flag = 0;
  status_preset(&st, 1);
  for (long spins = 0; !flag && spins < 100000000; spins++) {
    int rc = mpi.Iprobe(mpi.ANY_SOURCE, 501, mpi.COMM_WORLD, &flag, &st);
    if (rc != mpi.SUCCESS) { failf(__LINE__, "Iprobe returned %d", rc); break; }
  }
  CHECK_EQ(flag, 1);
  CHECK_STATUS(st, l, 501, mpi.INT, 4);
  OK(mpi.Recv(rb, 8, mpi.INT, l, 501, mpi.COMM_WORLD, mpi.STATUS_IGNORE));
  CHECK_EQ(rb[3], 3);

  MPIABI_Message msg = mpi.MESSAGE_NULL;
  status_preset(&st, 1);
  OK(mpi.Mprobe(mpi.ANY_SOURCE, 502, mpi.COMM_WORLD, &msg, &st));
  CHECK(msg != mpi.MESSAGE_NULL && msg != mpi.MESSAGE_NO_PROC, "Mprobe returned message 0x%llx",
        (unsigned long long)msg);
  CHECK_STATUS(st, l, 502, mpi.INT, 5);
  memset(rb, 0xff, sizeof rb);
  status_preset(&st, 1);
  OK(mpi.Mrecv(rb, 8, mpi.INT, &msg, &st));
  CHECK_EQ(msg, mpi.MESSAGE_NULL);
  CHECK_STATUS(st, l, 502, mpi.INT, 5);
  CHECK(rb[0] == l && rb[4] == 4 && rb[5] == -1, "Mrecv data %d %d %d", rb[0], rb[4], rb[5]);

  flag = 0;
  msg = mpi.MESSAGE_NULL;
  status_preset(&st, 1);
  for (long spins = 0; !flag && spins < 100000000; spins++) {
    int rc = mpi.Improbe(l, 503, mpi.COMM_WORLD, &flag, &msg, &st);
    if (rc != mpi.SUCCESS) { failf(__LINE__, "Improbe returned %d", rc); break; }
  }
  CHECK_EQ(flag, 1);
  CHECK_STATUS(st, l, 503, mpi.INT, 6);
  MPIABI_Request req = mpi.REQUEST_NULL;
  memset(rb, 0xff, sizeof rb);
  OK(mpi.Imrecv(rb, 8, mpi.INT, &msg, &req));
  CHECK_EQ(msg, mpi.MESSAGE_NULL);
  status_preset(&st, 1);
  OK(mpi.Wait(&req, &st));
  CHECK_STATUS(st, l, 503, mpi.INT, 6);
  CHECK(rb[0] == l && rb[5] == 5 && rb[6] == -1, "Imrecv data %d %d %d", rb[0], rb[5], rb[6]);

  /* Nothing is ever sent with tag 599. */
  flag = -1;
  OK(mpi.Iprobe(l, 599, mpi.COMM_WORLD, &flag, mpi.STATUS_IGNORE));
  CHECK_EQ(flag, 0);
  flag = -1;
  OK(mpi.Improbe(l, 599, mpi.COMM_WORLD, &flag, &msg, mpi.STATUS_IGNORE));
  CHECK_EQ(flag, 0);

  /* PROC_NULL probes: MPI_MESSAGE_NO_PROC and a PROC_NULL status. */
  status_preset(&st, 1);
  OK(mpi.Probe(mpi.PROC_NULL, 504, mpi.COMM_WORLD, &st));
  CHECK_STATUS(st, mpi.PROC_NULL, mpi.ANY_TAG, mpi.INT, 0);
  flag = 0;
  msg = mpi.MESSAGE_NULL;
  status_preset(&st, 1);
  OK(mpi.Improbe(mpi.PROC_NULL, 504, mpi.COMM_WORLD, &flag, &msg, &st));
  CHECK_EQ(flag, 1);
  CHECK_EQ(msg, mpi.MESSAGE_NO_PROC);
  CHECK_STATUS(st, mpi.PROC_NULL, mpi.ANY_TAG, mpi.INT, 0);
  status_preset(&st, 1);
  OK(mpi.Mrecv(rb, 8, mpi.INT, &msg, &st));
  CHECK_EQ(msg, mpi.MESSAGE_NULL);
  CHECK_STATUS(st, mpi.PROC_NULL, mpi.ANY_TAG, mpi.INT, 0);

  OK(mpi.Waitall(4, sreq, mpi.STATUSES_IGNORE));
  for (int i = 0; i < 4; i++) CHECK_EQ(sreq[i], mpi.REQUEST_NULL);
}

/* Blocks of i+1 elements laid out in reverse rank order with one-element gaps.
 * Returns the total buffer length. */
static int reversed_layout(int n, int *counts, int *displs) {
  int pos = 0;
  for (int i = n - 1; i >= 0; i--) {
    counts[i] = i + 1;
    displs[i] = pos;
    pos += counts[i] + 1;
  }
  return pos;
}

static void test_collectives(void) {
  int n = world_size, me = world_rank;
  MPIABI_Comm w = mpi.COMM_WORLD;
  int *counts = xmalloc(sizeof(int) * n), *displs = xmalloc(sizeof(int) * n);
  int *big = xmalloc(sizeof(int) * (8 * n * n + 64)), *big2 = xmalloc(sizeof(int) * (8 * n * n + 64));

  OK(mpi.Barrier(w));

  /* Bcast from the last rank. */
  int b[4] = {-1, -1, -1, -1};
  if (me == n - 1) { b[0] = 7; b[1] = 8; b[2] = 9; b[3] = 10 + me; }
  OK(mpi.Bcast(b, 4, mpi.INT, n - 1, w));
  CHECK(b[0] == 7 && b[1] == 8 && b[2] == 9 && b[3] == 10 + n - 1, "Bcast got %d %d %d %d", b[0], b[1], b[2], b[3]);
  double bd = me == 0 ? 3.25 : 0.0;
  OK(mpi.Bcast(&bd, 1, mpi.DOUBLE, 0, w));
  CHECK(bd == 3.25, "Bcast double got %g", bd);

  /* Gather to 0. */
  int g2[2] = {me, me * 10};
  for (int i = 0; i < 2 * n + 2; i++) big[i] = -1;
  OK(mpi.Gather(g2, 2, mpi.INT, big, 2, mpi.INT, 0, w));
  if (me == 0)
    for (int i = 0; i < n; i++) {
      CHECK_EQ(big[2 * i], i);
      CHECK_EQ(big[2 * i + 1], i * 10);
    }

  /* Gatherv to rank 1: rank i sends i+1 ints, placed in reverse order with gaps. */
  int total = reversed_layout(n, counts, displs);
  int mine[64];
  for (int j = 0; j <= me; j++) mine[j] = 1000 * me + j;
  for (int i = 0; i < total; i++) big[i] = -1;
  OK(mpi.Gatherv(mine, me + 1, mpi.INT, big, counts, displs, mpi.INT, 1, w));
  if (me == 1) {
    for (int i = 0; i < n; i++) {
      for (int j = 0; j <= i; j++) CHECK_EQ(big[displs[i] + j], 1000 * i + j);
      CHECK_EQ(big[displs[i] + i + 1], -1);
    }
  }

  /* Scatter from 0. */
  for (int i = 0; i < 2 * n; i++) big[i] = (i / 2) * 10 + i % 2;
  int sc[2] = {-1, -1};
  OK(mpi.Scatter(big, 2, mpi.INT, sc, 2, mpi.INT, 0, w));
  CHECK(sc[0] == me * 10 && sc[1] == me * 10 + 1, "Scatter got %d %d", sc[0], sc[1]);

  /* Scatterv from the last rank with the reversed layout. */
  for (int i = 0; i < n; i++)
    for (int j = 0; j < counts[i]; j++) big[displs[i] + j] = 1000 * i + j;
  for (int j = 0; j < 64; j++) mine[j] = -1;
  OK(mpi.Scatterv(big, counts, displs, mpi.INT, mine, me + 1, mpi.INT, n - 1, w));
  for (int j = 0; j <= me; j++) CHECK_EQ(mine[j], 1000 * me + j);
  CHECK_EQ(mine[me + 1], -1);

  /* Allgather. */
  int ag[3] = {me * 3, me * 3 + 1, me * 3 + 2};
  for (int i = 0; i < 3 * n; i++) big[i] = -1;
  OK(mpi.Allgather(ag, 3, mpi.INT, big, 3, mpi.INT, w));
  for (int i = 0; i < 3 * n; i++) CHECK_EQ(big[i], i);

  /* Allgatherv with the reversed layout. */
  for (int j = 0; j <= me; j++) mine[j] = 1000 * me + j;
  for (int i = 0; i < total; i++) big[i] = -1;
  OK(mpi.Allgatherv(mine, me + 1, mpi.INT, big, counts, displs, mpi.INT, w));
  for (int i = 0; i < n; i++) {
    for (int j = 0; j <= i; j++) CHECK_EQ(big[displs[i] + j], 1000 * i + j);
    CHECK_EQ(big[displs[i] + i + 1], -1);
  }

  /* Alltoall. */
  for (int i = 0; i < n; i++)
    for (int j = 0; j < 2; j++) big[2 * i + j] = me * 1000 + i * 10 + j;
  for (int i = 0; i < 2 * n; i++) big2[i] = -1;
  OK(mpi.Alltoall(big, 2, mpi.INT, big2, 2, mpi.INT, w));
  for (int i = 0; i < n; i++)
    for (int j = 0; j < 2; j++) CHECK_EQ(big2[2 * i + j], i * 1000 + me * 10 + j);

  /* Alltoallv: me sends (me+i)%3+1 ints to i, at stride 4 (send) and 5 (receive). */
  int *scounts = xmalloc(sizeof(int) * n), *sdispls = xmalloc(sizeof(int) * n);
  int *rcounts = xmalloc(sizeof(int) * n), *rdispls = xmalloc(sizeof(int) * n);
  for (int i = 0; i < n; i++) {
    scounts[i] = (me + i) % 3 + 1;
    sdispls[i] = 4 * i;
    rcounts[i] = (i + me) % 3 + 1;
    rdispls[i] = 5 * (n - 1 - i);
    for (int j = 0; j < scounts[i]; j++) big[sdispls[i] + j] = me * 1000 + i * 10 + j;
  }
  for (int i = 0; i < 5 * n; i++) big2[i] = -1;
  OK(mpi.Alltoallv(big, scounts, sdispls, mpi.INT, big2, rcounts, rdispls, mpi.INT, w));
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < rcounts[i]; j++) CHECK_EQ(big2[rdispls[i] + j], i * 1000 + me * 10 + j);
    CHECK_EQ(big2[rdispls[i] + rcounts[i]], -1);
  }

  /* Alltoallw: the pair (me, i) exchanges 2 ints or 2 doubles (by parity of
   * me+i); the receiver takes them as one contiguous(2) element. */
  MPIABI_Datatype c2int, c2dbl;
  OK(mpi.Type_contiguous(2, mpi.INT, &c2int));
  OK(mpi.Type_commit(&c2int));
  OK(mpi.Type_contiguous(2, mpi.DOUBLE, &c2dbl));
  OK(mpi.Type_commit(&c2dbl));
  MPIABI_Datatype *stypes = xmalloc(sizeof(MPIABI_Datatype) * n), *rtypes = xmalloc(sizeof(MPIABI_Datatype) * n);
  char *wsend = xmalloc(16 * (size_t)n), *wrecv = xmalloc(16 * (size_t)n);
  memset(wrecv, 0xff, 16 * (size_t)n);
  for (int i = 0; i < n; i++) {
    int dbl = (me + i) % 2;
    scounts[i] = 2;
    sdispls[i] = 16 * i;
    stypes[i] = dbl ? mpi.DOUBLE : mpi.INT;
    rcounts[i] = 1;
    rdispls[i] = 16 * (n - 1 - i);
    rtypes[i] = dbl ? c2dbl : c2int;
    if (dbl) {
      double v[2] = {me + i / 8.0, -(double)me};
      memcpy(wsend + sdispls[i], v, sizeof v);
    } else {
      int v[2] = {me * 1000 + i, -me};
      memcpy(wsend + sdispls[i], v, sizeof v);
    }
  }
  OK(mpi.Alltoallw(wsend, scounts, sdispls, stypes, wrecv, rcounts, rdispls, rtypes, w));
  for (int i = 0; i < n; i++) {
    if ((me + i) % 2) {
      double v[2];
      memcpy(v, wrecv + rdispls[i], sizeof v);
      CHECK(v[0] == i + me / 8.0 && v[1] == -(double)i, "Alltoallw doubles from %d: %g %g", i, v[0], v[1]);
    } else {
      int v[2];
      memcpy(v, wrecv + rdispls[i], sizeof v);
      CHECK(v[0] == i * 1000 + me && v[1] == -i, "Alltoallw ints from %d: %d %d", i, v[0], v[1]);
    }
  }

  /* Reduce / Allreduce with every predefined arithmetic and logical op. */
  int rs[3] = {me + 1, me * 2, -me}, rr[3] = {-7, -7, -7};
  OK(mpi.Reduce(rs, rr, 3, mpi.INT, mpi.SUM, 0, w));
  if (me == 0) {
    CHECK_EQ(rr[0], n * (n + 1) / 2);
    CHECK_EQ(rr[1], n * (n - 1));
    CHECK_EQ(rr[2], -n * (n - 1) / 2);
  } else {
    CHECK(rr[0] == -7 && rr[1] == -7, "Reduce wrote the receive buffer of a non-root rank");
  }
  int inpl[2] = {me, 1};
  if (me == n - 1)
    OK(mpi.Reduce(mpi.IN_PLACE, inpl, 2, mpi.INT, mpi.SUM, n - 1, w));
  else
    OK(mpi.Reduce(inpl, NULL, 2, mpi.INT, mpi.SUM, n - 1, w));
  if (me == n - 1) {
    CHECK_EQ(inpl[0], n * (n - 1) / 2);
    CHECK_EQ(inpl[1], n);
  }
  long long fact = 1;
  for (int i = 1; i <= n && i <= 3; i++) fact *= i;
  struct { MPIABI_Op op; const char *name; int in; long long expect; } opt[] = {
      {mpi.SUM, "SUM", me + 1, (long long)n * (n + 1) / 2},
      {mpi.PROD, "PROD", me < 3 ? me + 1 : 1, fact},
      {mpi.MAX, "MAX", n - 1 - me, n - 1},
      {mpi.MIN, "MIN", me + 5, 5},
      {mpi.LAND, "LAND", 1, 1},
      {mpi.LOR, "LOR", me == n - 1, 1},
      {mpi.LXOR, "LXOR", 1, n % 2},
      {mpi.BAND, "BAND", 0xff ^ (1 << (me % 8)), n >= 8 ? 0 : (0xff & ~((1 << n) - 1))},
      {mpi.BOR, "BOR", 1 << (me % 16), n >= 16 ? 0xffff : ((1 << n) - 1)},
      {mpi.BXOR, "BXOR", 3, (n % 2) ? 3 : 0},
  };
  for (size_t k = 0; k < sizeof opt / sizeof opt[0]; k++) {
    int out = -99;
    OK(mpi.Allreduce(&opt[k].in, &out, 1, mpi.INT, opt[k].op, w));
    CHECK(out == opt[k].expect, "Allreduce(MPIABI_%s) is %d, expected %lld", opt[k].name, out, opt[k].expect);
  }
  /* Other element types. */
  double dsum = -1, din = me + 0.5;
  OK(mpi.Allreduce(&din, &dsum, 1, mpi.DOUBLE, mpi.SUM, w));
  CHECK(dsum == n * n / 2.0, "Allreduce DOUBLE SUM %g", dsum);
  float fmx = -1, fin = (float)me * 0.25f;
  OK(mpi.Allreduce(&fin, &fmx, 1, mpi.FLOAT, mpi.MAX, w));
  CHECK(fmx == (float)(n - 1) * 0.25f, "Allreduce FLOAT MAX %g", fmx);
  long long lin = (1LL << 40) + me, lout = 0;
  OK(mpi.Allreduce(&lin, &lout, 1, mpi.LONG_LONG, mpi.SUM, w));
  CHECK_EQ(lout, n * (1LL << 40) + (long long)n * (n - 1) / 2);
  int64_t i64in = -(int64_t)me, i64out = 1;
  OK(mpi.Allreduce(&i64in, &i64out, 1, mpi.INT64_T, mpi.MIN, w));
  CHECK_EQ(i64out, -(n - 1));
  uint64_t u64in = (uint64_t)1 << (me % 64), u64out = 0;
  OK(mpi.Allreduce(&u64in, &u64out, 1, mpi.UINT64_T, mpi.BOR, w));
  CHECK_EQ(u64out, n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1));
  unsigned char ucin = (unsigned char)(me + 1), ucout = 0;
  OK(mpi.Allreduce(&ucin, &ucout, 1, mpi.UNSIGNED_CHAR, mpi.MAX, w));
  CHECK_EQ(ucout, n);
  short shin = (short)-me, shout = 0;
  OK(mpi.Allreduce(&shin, &shout, 1, mpi.SHORT, mpi.SUM, w));
  CHECK_EQ(shout, -n * (n - 1) / 2);
  double cin[2] = {1.0, (double)me}, cout[2] = {0, 0};
  OK(mpi.Allreduce(cin, cout, 1, mpi.C_DOUBLE_COMPLEX, mpi.SUM, w));
  CHECK(cout[0] == n && cout[1] == n * (n - 1) / 2.0, "Allreduce C_DOUBLE_COMPLEX %g%+gi", cout[0], cout[1]);

  /* MAXLOC / MINLOC. */
  struct { int v, loc; } p2in = {me % 2, me}, p2out = {-1, -1};
  OK(mpi.Allreduce(&p2in, &p2out, 1, mpi.TWOINT, mpi.MAXLOC, w));
  CHECK(p2out.v == 1 && p2out.loc == 1, "MAXLOC 2INT gave (%d, %d)", p2out.v, p2out.loc);
  OK(mpi.Allreduce(&p2in, &p2out, 1, mpi.TWOINT, mpi.MINLOC, w));
  CHECK(p2out.v == 0 && p2out.loc == 0, "MINLOC 2INT gave (%d, %d)", p2out.v, p2out.loc);
  struct { double v; int loc; } pdin = {-(double)me, me}, pdout = {1, -1};
  OK(mpi.Allreduce(&pdin, &pdout, 1, mpi.DOUBLE_INT, mpi.MINLOC, w));
  CHECK(pdout.v == -(double)(n - 1) && pdout.loc == n - 1, "MINLOC DOUBLE_INT gave (%g, %d)", pdout.v, pdout.loc);
  OK(mpi.Allreduce(&pdin, &pdout, 1, mpi.DOUBLE_INT, mpi.MAXLOC, w));
  CHECK(pdout.v == 0 && pdout.loc == 0, "MAXLOC DOUBLE_INT gave (%g, %d)", pdout.v, pdout.loc);

  /* Allreduce IN_PLACE. */
  int ip[3] = {me, 1, 2 * me};
  OK(mpi.Allreduce(mpi.IN_PLACE, ip, 3, mpi.INT, mpi.SUM, w));
  CHECK(ip[0] == n * (n - 1) / 2 && ip[1] == n && ip[2] == n * (n - 1), "Allreduce IN_PLACE gave %d %d %d",
        ip[0], ip[1], ip[2]);

  /* Reduce_scatter: rank i gets i+1 elements. */
  int rtotal = 0, myoff = 0;
  for (int i = 0; i < n; i++) {
    counts[i] = i + 1;
    if (i < me) myoff += counts[i];
    rtotal += counts[i];
  }
  for (int k = 0; k < rtotal; k++) big[k] = me + k;
  for (int k = 0; k < 64; k++) mine[k] = -1;
  OK(mpi.Reduce_scatter(big, mine, counts, mpi.INT, mpi.SUM, w));
  for (int j = 0; j <= me; j++) CHECK_EQ(mine[j], n * (myoff + j) + n * (n - 1) / 2);
  CHECK_EQ(mine[me + 1], -1);

  /* Reduce_scatter_block: 2 each. */
  for (int k = 0; k < 2 * n; k++) big[k] = k * (me + 1);
  int rsb[3] = {-1, -1, -1};
  OK(mpi.Reduce_scatter_block(big, rsb, 2, mpi.INT, mpi.SUM, w));
  CHECK_EQ(rsb[0], (2 * me) * n * (n + 1) / 2);
  CHECK_EQ(rsb[1], (2 * me + 1) * n * (n + 1) / 2);
  CHECK_EQ(rsb[2], -1);

  /* Scan / Exscan. */
  int sv = me + 1, so = -1;
  OK(mpi.Scan(&sv, &so, 1, mpi.INT, mpi.SUM, w));
  CHECK_EQ(so, (me + 1) * (me + 2) / 2);
  int eo = -12345;
  OK(mpi.Exscan(&sv, &eo, 1, mpi.INT, mpi.SUM, w));
  if (me > 0) CHECK_EQ(eo, me * (me + 1) / 2);
  int sip = me + 1;
  OK(mpi.Scan(mpi.IN_PLACE, &sip, 1, mpi.INT, mpi.MAX, w));
  CHECK_EQ(sip, me + 1);

  /* Reduce_local. */
  int lin3[3] = {1, 2, 3}, lio3[3] = {10, 20, 30};
  OK(mpi.Reduce_local(lin3, lio3, 3, mpi.INT, mpi.SUM));
  CHECK(lio3[0] == 11 && lio3[1] == 22 && lio3[2] == 33, "Reduce_local gave %d %d %d", lio3[0], lio3[1], lio3[2]);
  OK(mpi.Reduce_local(lin3, lio3, 3, mpi.INT, mpi.PROD));
  CHECK(lio3[0] == 11 && lio3[1] == 44 && lio3[2] == 99, "Reduce_local PROD gave %d %d %d", lio3[0], lio3[1], lio3[2]);

  OK(mpi.Type_free(&c2int));
  OK(mpi.Type_free(&c2dbl));
  free(stypes); free(rtypes); free(wsend); free(wrecv);
  free(scounts); free(sdispls); free(rcounts); free(rdispls);
  free(counts); free(displs); free(big); free(big2);
}

static void test_nbcollectives(void) {
  int n = world_size, me = world_rank;
  MPIABI_Comm w = mpi.COMM_WORLD;
  enum { NREQ = 17 };
  MPIABI_Request req[NREQ];
  int k = 0;
  int *counts = xmalloc(sizeof(int) * n), *displs = xmalloc(sizeof(int) * n);
  int total = reversed_layout(n, counts, displs);

  int bc[2] = {-1, -1};
  if (me == 0) { bc[0] = 42; bc[1] = 43; }
  OK(mpi.Ibarrier(w, &req[k++]));
  OK(mpi.Ibcast(bc, 2, mpi.INT, 0, w, &req[k++]));
  int ar_in[2] = {me, 1}, ar_out[2] = {-1, -1};
  OK(mpi.Iallreduce(ar_in, ar_out, 2, mpi.INT, mpi.SUM, w, &req[k++]));
  int ag_in = me * 5, *ag_out = xmalloc(sizeof(int) * n);
  OK(mpi.Iallgather(&ag_in, 1, mpi.INT, ag_out, 1, mpi.INT, w, &req[k++]));
  int *a2a_in = xmalloc(sizeof(int) * n), *a2a_out = xmalloc(sizeof(int) * n);
  for (int i = 0; i < n; i++) { a2a_in[i] = me * 100 + i; a2a_out[i] = -1; }
  OK(mpi.Ialltoall(a2a_in, 1, mpi.INT, a2a_out, 1, mpi.INT, w, &req[k++]));
  int *ones = xmalloc(sizeof(int) * n), *idisp = xmalloc(sizeof(int) * n), *rdisp = xmalloc(sizeof(int) * n);
  MPIABI_Datatype *types = xmalloc(sizeof(MPIABI_Datatype) * n);
  int *w_in = xmalloc(sizeof(int) * n), *w_out = xmalloc(sizeof(int) * n);
  for (int i = 0; i < n; i++) {
    ones[i] = 1;
    idisp[i] = (int)sizeof(int) * i;
    rdisp[i] = (int)sizeof(int) * (n - 1 - i);
    types[i] = mpi.INT;
    w_in[i] = me * 1000 + i;
    w_out[i] = -1;
  }
  OK(mpi.Ialltoallw(w_in, ones, idisp, types, w_out, ones, rdisp, types, w, &req[k++]));
  int rd_in = me + 1, rd_out = -1;
  OK(mpi.Ireduce(&rd_in, &rd_out, 1, mpi.INT, mpi.MAX, n - 1, w, &req[k++]));
  int sc_in = me + 1, sc_out = -1;
  OK(mpi.Iscan(&sc_in, &sc_out, 1, mpi.INT, mpi.SUM, w, &req[k++]));
  int ex_out = -1;
  OK(mpi.Iexscan(&sc_in, &ex_out, 1, mpi.INT, mpi.SUM, w, &req[k++]));
  int ga_in[2] = {me, -me}, *ga_out = xmalloc(sizeof(int) * 2 * n);
  OK(mpi.Igather(ga_in, 2, mpi.INT, ga_out, 2, mpi.INT, 1, w, &req[k++]));
  int gv_in[64], *gv_out = xmalloc(sizeof(int) * (size_t)total);
  for (int j = 0; j <= me; j++) gv_in[j] = me * 10 + j;
  for (int i = 0; i < total; i++) gv_out[i] = -1;
  OK(mpi.Igatherv(gv_in, me + 1, mpi.INT, gv_out, counts, displs, mpi.INT, 0, w, &req[k++]));
  int *scat_in = xmalloc(sizeof(int) * n), scat_out = -1;
  for (int i = 0; i < n; i++) scat_in[i] = 77 * i;
  OK(mpi.Iscatter(scat_in, 1, mpi.INT, &scat_out, 1, mpi.INT, 0, w, &req[k++]));
  int *sv_in = xmalloc(sizeof(int) * (size_t)total), sv_out[64];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < counts[i]; j++) sv_in[displs[i] + j] = i * 10 + j;
  OK(mpi.Iscatterv(sv_in, counts, displs, mpi.INT, sv_out, me + 1, mpi.INT, n - 1, w, &req[k++]));
  int *agv_out = xmalloc(sizeof(int) * (size_t)total);
  for (int i = 0; i < total; i++) agv_out[i] = -1;
  OK(mpi.Iallgatherv(gv_in, me + 1, mpi.INT, agv_out, counts, displs, mpi.INT, w, &req[k++]));
  /* Ialltoallv displacements are in elements (Ialltoallw's above are bytes). */
  int *a2av_out = xmalloc(sizeof(int) * n), *edisp = xmalloc(sizeof(int) * n), *erdisp = xmalloc(sizeof(int) * n);
  for (int i = 0; i < n; i++) {
    a2av_out[i] = -1;
    edisp[i] = i;
    erdisp[i] = n - 1 - i;
  }
  OK(mpi.Ialltoallv(a2a_in, ones, edisp, mpi.INT, a2av_out, ones, erdisp, mpi.INT, w, &req[k++]));
  int *rsc_in = xmalloc(sizeof(int) * 2 * n), rsc_out[2] = {-1, -1};
  for (int i = 0; i < 2 * n; i++) rsc_in[i] = i + me;
  OK(mpi.Ireduce_scatter_block(rsc_in, rsc_out, 2, mpi.INT, mpi.SUM, w, &req[k++]));
  int rsv_out[64];
  int *rsv_in = xmalloc(sizeof(int) * (size_t)(n * (n + 1) / 2));
  int *rsv_counts = xmalloc(sizeof(int) * n), myoff = 0;
  for (int i = 0; i < n; i++) {
    rsv_counts[i] = i + 1;
    if (i < me) myoff += i + 1;
  }
  for (int i = 0; i < n * (n + 1) / 2; i++) rsv_in[i] = i;
  OK(mpi.Ireduce_scatter(rsv_in, rsv_out, rsv_counts, mpi.INT, mpi.SUM, w, &req[k++]));
  CHECK_EQ(k, NREQ);

  MPIABI_Status *sts = xmalloc(sizeof(MPIABI_Status) * NREQ);
  OK(mpi.Waitall(NREQ, req, sts));
  for (int i = 0; i < NREQ; i++) CHECK_EQ(req[i], mpi.REQUEST_NULL);

  CHECK(bc[0] == 42 && bc[1] == 43, "Ibcast gave %d %d", bc[0], bc[1]);
  CHECK(ar_out[0] == n * (n - 1) / 2 && ar_out[1] == n, "Iallreduce gave %d %d", ar_out[0], ar_out[1]);
  for (int i = 0; i < n; i++) CHECK_EQ(ag_out[i], i * 5);
  for (int i = 0; i < n; i++) CHECK_EQ(a2a_out[i], i * 100 + me);
  for (int i = 0; i < n; i++) CHECK_EQ(w_out[n - 1 - i], i * 1000 + me);
  if (me == n - 1) CHECK_EQ(rd_out, n);
  CHECK_EQ(sc_out, (me + 1) * (me + 2) / 2);
  if (me > 0) CHECK_EQ(ex_out, me * (me + 1) / 2);
  if (me == 1)
    for (int i = 0; i < n; i++) {
      CHECK_EQ(ga_out[2 * i], i);
      CHECK_EQ(ga_out[2 * i + 1], -i);
    }
  if (me == 0)
    for (int i = 0; i < n; i++)
      for (int j = 0; j <= i; j++) CHECK_EQ(gv_out[displs[i] + j], i * 10 + j);
  CHECK_EQ(scat_out, 77 * me);
  for (int j = 0; j <= me; j++) CHECK_EQ(sv_out[j], me * 10 + j);
  for (int i = 0; i < n; i++) {
    for (int j = 0; j <= i; j++) CHECK_EQ(agv_out[displs[i] + j], i * 10 + j);
    CHECK_EQ(agv_out[displs[i] + i + 1], -1);
  }
  for (int i = 0; i < n; i++) CHECK_EQ(a2av_out[n - 1 - i], i * 100 + me);
  CHECK_EQ(rsc_out[0], n * (2 * me) + n * (n - 1) / 2);
  CHECK_EQ(rsc_out[1], n * (2 * me + 1) + n * (n - 1) / 2);
  for (int j = 0; j <= me; j++) CHECK_EQ(rsv_out[j], n * (myoff + j));

  free(sts);
  free(counts); free(displs); free(ag_out); free(a2a_in); free(a2a_out); free(ones); free(idisp);
  free(rdisp); free(types); free(w_in); free(w_out); free(ga_out); free(gv_out); free(scat_in);
  free(sv_in); free(agv_out); free(a2av_out); free(edisp); free(erdisp); free(rsc_in); free(rsv_in); free(rsv_counts);
}

/* Post K receives from the left (tags base..base+K-1) and K sends to the right
 * (in reverse tag order). */
enum { K = 4 };
static void post_k(int base, int *rb, MPIABI_Request *rreq, int *sb, MPIABI_Request *sreq) {
  int l = left(), r = right();
  for (int k = 0; k < K; k++) {
    rb[k] = -1;
    OK(mpi.Irecv(&rb[k], 1, mpi.INT, l, base + k, mpi.COMM_WORLD, &rreq[k]));
  }
  for (int k = K - 1; k >= 0; k--) {
    sb[k] = world_rank * 10 + k;
    OK(mpi.Isend(&sb[k], 1, mpi.INT, r, base + k, mpi.COMM_WORLD, &sreq[k]));
  }
}

static void test_requests(void) {
  int l = left();
  int rb[K], sb[K], idx[K], seen[K], outc, flag, done;
  MPIABI_Request rreq[K], sreq[K];
  MPIABI_Status sts[K], st;

  /* Waitall. */
  post_k(600, rb, rreq, sb, sreq);
  status_preset(sts, K);
  OK(mpi.Waitall(K, rreq, sts));
  for (int k = 0; k < K; k++) {
    CHECK_EQ(rreq[k], mpi.REQUEST_NULL);
    CHECK_STATUS(sts[k], l, 600 + k, mpi.INT, 1);
    CHECK_EQ(rb[k], l * 10 + k);
  }
  OK(mpi.Waitall(K, sreq, mpi.STATUSES_IGNORE));
  for (int k = 0; k < K; k++) CHECK_EQ(sreq[k], mpi.REQUEST_NULL);

  /* Waitany. */
  post_k(610, rb, rreq, sb, sreq);
  memset(seen, 0, sizeof seen);
  for (int it = 0; it < K; it++) {
    int i = -1;
    status_preset(&st, 1);
    OK(mpi.Waitany(K, rreq, &i, &st));
    CHECK(i >= 0 && i < K && !seen[i], "Waitany returned index %d", i);
    if (i < 0 || i >= K) break;
    seen[i] = 1;
    CHECK_EQ(rreq[i], mpi.REQUEST_NULL);
    CHECK_STATUS(st, l, 610 + i, mpi.INT, 1);
    CHECK_EQ(rb[i], l * 10 + i);
  }
  int i = -1;
  status_preset(&st, 1);
  OK(mpi.Waitany(K, rreq, &i, &st));
  CHECK_EQ(i, mpi.UNDEFINED);
  CHECK_EMPTY_STATUS(st);
  OK(mpi.Waitall(K, sreq, mpi.STATUSES_IGNORE));

  /* Waitsome. */
  post_k(620, rb, rreq, sb, sreq);
  memset(seen, 0, sizeof seen);
  done = 0;
  for (int it = 0; done < K && it < 100; it++) {
    outc = -1;
    status_preset(sts, K);
    OK(mpi.Waitsome(K, rreq, &outc, idx, sts));
    CHECK(outc >= 1 && outc <= K - done, "Waitsome outcount %d with %d pending", outc, K - done);
    if (outc < 1 || outc > K - done) break;
    for (int j = 0; j < outc; j++) {
      int x = idx[j];
      CHECK(x >= 0 && x < K && !seen[x], "Waitsome index %d", x);
      if (x < 0 || x >= K) continue;
      seen[x] = 1;
      CHECK_EQ(rreq[x], mpi.REQUEST_NULL);
      CHECK_STATUS(sts[j], l, 620 + x, mpi.INT, 1);
      CHECK_EQ(rb[x], l * 10 + x);
    }
    done += outc;
  }
  CHECK_EQ(done, K);
  OK(mpi.Waitsome(K, rreq, &outc, idx, sts));
  CHECK_EQ(outc, mpi.UNDEFINED);
  OK(mpi.Waitall(K, sreq, mpi.STATUSES_IGNORE));

  /* Testall. */
  post_k(630, rb, rreq, sb, sreq);
  flag = 0;
  status_preset(sts, K);
  for (long spins = 0; !flag && spins < 100000000; spins++) {
    int rc = mpi.Testall(K, rreq, &flag, sts);
    if (rc != mpi.SUCCESS) { failf(__LINE__, "Testall returned %d", rc); break; }
  }
  CHECK_EQ(flag, 1);
  for (int k = 0; k < K; k++) {
    CHECK_EQ(rreq[k], mpi.REQUEST_NULL);
    CHECK_STATUS(sts[k], l, 630 + k, mpi.INT, 1);
    CHECK_EQ(rb[k], l * 10 + k);
  }
  OK(mpi.Waitall(K, sreq, mpi.STATUSES_IGNORE));

  /* Testany. */
  int bad_idx = mpi.UNDEFINED;
  post_k(640, rb, rreq, sb, sreq);
  memset(seen, 0, sizeof seen);
  done = 0;
  for (long spins = 0; done < K && spins < 100000000; spins++) {
    int x = -7;
    flag = -1;
    status_preset(&st, 1);
    int rc = mpi.Testany(K, rreq, &x, &flag, &st);
    if (rc != mpi.SUCCESS) { failf(__LINE__, "Testany returned %d", rc); break; }
    if (!flag) {
      if (x != mpi.UNDEFINED) bad_idx = x;
      continue;
    }
    CHECK(x >= 0 && x < K && !seen[x], "Testany index %d", x);
    if (x < 0 || x >= K) break;
    seen[x] = 1;
    done++;
    CHECK_EQ(rreq[x], mpi.REQUEST_NULL);
    CHECK_STATUS(st, l, 640 + x, mpi.INT, 1);
    CHECK_EQ(rb[x], l * 10 + x);
  }
  CHECK_EQ(done, K);
  CHECK(bad_idx == mpi.UNDEFINED, "Testany with flag 0 set index %d, expected MPI_UNDEFINED", bad_idx);
  flag = -1;
  i = -1;
  status_preset(&st, 1);
  OK(mpi.Testany(K, rreq, &i, &flag, &st));
  CHECK_EQ(flag, 1);
  CHECK_EQ(i, mpi.UNDEFINED);
  CHECK_EMPTY_STATUS(st);
  OK(mpi.Waitall(K, sreq, mpi.STATUSES_IGNORE));

  /* Testsome. */
  post_k(650, rb, rreq, sb, sreq);
  memset(seen, 0, sizeof seen);
  done = 0;
  for (long spins = 0; done < K && spins < 100000000; spins++) {
    outc = -1;
    status_preset(sts, K);
    int rc = mpi.Testsome(K, rreq, &outc, idx, sts);
    if (rc != mpi.SUCCESS) { failf(__LINE__, "Testsome returned %d", rc); break; }
    if (outc < 0 || outc > K - done) {
      failf(__LINE__, "Testsome outcount %d with %d pending", outc, K - done);
      break;
    }
    for (int j = 0; j < outc; j++) {
      int x = idx[j];
      CHECK(x >= 0 && x < K && !seen[x], "Testsome index %d", x);
      if (x < 0 || x >= K) continue;
      seen[x] = 1;
      CHECK_EQ(rreq[x], mpi.REQUEST_NULL);
      CHECK_STATUS(sts[j], l, 650 + x, mpi.INT, 1);
      CHECK_EQ(rb[x], l * 10 + x);
    }
    done += outc;
  }
  CHECK_EQ(done, K);
  OK(mpi.Testsome(K, rreq, &outc, idx, sts));
  CHECK_EQ(outc, mpi.UNDEFINED);
  OK(mpi.Waitall(K, sreq, mpi.STATUSES_IGNORE));

  /* REQUEST_NULL entries get empty statuses; Wait/Test on REQUEST_NULL. */
  post_k(660, rb, rreq, sb, sreq);
  MPIABI_Request mix[3] = {mpi.REQUEST_NULL, rreq[2], mpi.REQUEST_NULL};
  status_preset(sts, 3);
  OK(mpi.Waitall(3, mix, sts));
  CHECK_EMPTY_STATUS(sts[0]);
  CHECK_STATUS(sts[1], l, 662, mpi.INT, 1);
  CHECK_EMPTY_STATUS(sts[2]);
  rreq[2] = mpi.REQUEST_NULL;
  OK(mpi.Waitall(K, rreq, mpi.STATUSES_IGNORE));
  OK(mpi.Waitall(K, sreq, mpi.STATUSES_IGNORE));
  MPIABI_Request nul = mpi.REQUEST_NULL;
  status_preset(&st, 1);
  OK(mpi.Wait(&nul, &st));
  CHECK_EMPTY_STATUS(st);
  flag = 0;
  status_preset(&st, 1);
  OK(mpi.Test(&nul, &flag, &st));
  CHECK_EQ(flag, 1);
  CHECK_EMPTY_STATUS(st);

  /* Request_get_status leaves the request alive. */
  post_k(670, rb, rreq, sb, sreq);
  OK(mpi.Waitall(K, sreq, mpi.STATUSES_IGNORE));
  flag = 0;
  MPIABI_Request keep = rreq[0];
  for (long spins = 0; !flag && spins < 100000000; spins++) {
    status_preset(&st, 1);
    int rc = mpi.Request_get_status(rreq[0], &flag, &st);
    if (rc != mpi.SUCCESS) { failf(__LINE__, "Request_get_status returned %d", rc); break; }
  }
  CHECK_EQ(flag, 1);
  CHECK_EQ(rreq[0], keep);
  CHECK_STATUS(st, l, 670, mpi.INT, 1);
  status_preset(sts, K);
  OK(mpi.Waitall(K, rreq, sts));
  CHECK_STATUS(sts[0], l, 670, mpi.INT, 1);
  CHECK_STATUS(sts[3], l, 673, mpi.INT, 1);

  /* Cancel a receive that can never match. */
  MPIABI_Request creq;
  int dummy;
  OK(mpi.Irecv(&dummy, 1, mpi.INT, l, 699, mpi.COMM_WORLD, &creq));
  OK(mpi.Cancel(&creq));
  status_preset(&st, 1);
  OK(mpi.Wait(&creq, &st));
  flag = -1;
  OK(mpi.Test_cancelled(&st, &flag));
  CHECK_EQ(flag, 1);
  CHECK_EQ(creq, mpi.REQUEST_NULL);
  OK(mpi.Barrier(mpi.COMM_WORLD));
}

static void test_persistent(void) {
  int l = left(), r = right(), me = world_rank;
  int sb[3] = {0, 0, 0}, rb[3] = {0, 0, 0};
  MPIABI_Request sreq, rreq;
  OK(mpi.Send_init(sb, 3, mpi.INT, r, 700, mpi.COMM_WORLD, &sreq));
  OK(mpi.Recv_init(rb, 3, mpi.INT, l, 700, mpi.COMM_WORLD, &rreq));
  CHECK(sreq != mpi.REQUEST_NULL && rreq != mpi.REQUEST_NULL, "Send_init/Recv_init gave REQUEST_NULL");
  for (int it = 0; it < 3; it++) {
    for (int j = 0; j < 3; j++) { sb[j] = me * 100 + it * 10 + j; rb[j] = -1; }
    MPIABI_Request reqs[2] = {rreq, sreq};
    MPIABI_Status sts[2];
    status_preset(sts, 2);
    OK(mpi.Startall(2, reqs));
    OK(mpi.Waitall(2, reqs, sts));
    /* Persistent requests become inactive, not REQUEST_NULL. */
    CHECK_EQ(reqs[0], rreq);
    CHECK_EQ(reqs[1], sreq);
    CHECK_STATUS(sts[0], l, 700, mpi.INT, 3);
    for (int j = 0; j < 3; j++) CHECK_EQ(rb[j], l * 100 + it * 10 + j);
  }
  for (int j = 0; j < 3; j++) { sb[j] = -me - j; rb[j] = -1; }
  OK(mpi.Start(&rreq));
  OK(mpi.Start(&sreq));
  MPIABI_Request keep = rreq;
  MPIABI_Status st;
  status_preset(&st, 1);
  OK(mpi.Wait(&rreq, &st));
  OK(mpi.Wait(&sreq, mpi.STATUS_IGNORE));
  CHECK_EQ(rreq, keep);
  CHECK_STATUS(st, l, 700, mpi.INT, 3);
  for (int j = 0; j < 3; j++) CHECK_EQ(rb[j], -l - j);
  /* Wait on an inactive persistent request returns at once with an empty status. */
  status_preset(&st, 1);
  OK(mpi.Wait(&rreq, &st));
  CHECK_EMPTY_STATUS(st);
  OK(mpi.Request_free(&sreq));
  OK(mpi.Request_free(&rreq));
  CHECK_EQ(sreq, mpi.REQUEST_NULL);
  CHECK_EQ(rreq, mpi.REQUEST_NULL);
}

/* Window and file error handlers, window and type attribute callbacks: each
 * must be handed MPIABI handles. */
static struct {
  int calls, code;
  uintptr_t handle;
} obj_eh;

static void user_win_errhandler(MPIABI_Win *win, int *code, ...) {
  obj_eh.calls++;
  obj_eh.handle = *win;
  obj_eh.code = *code;
}

static void user_file_errhandler(MPIABI_File *file, int *code, ...) {
  obj_eh.calls++;
  obj_eh.handle = *file;
  obj_eh.code = *code;
}

static struct {
  int copy_calls, delete_calls, bad;
  uintptr_t handle;
  void *val;
} obj_attr;
static int obj_attr_extra;

static int win_attr_copy(MPIABI_Win w, int kv, void *extra, void *in, void *out, int *flag) {
  (void)w; (void)kv; (void)extra; (void)in; (void)out;
  obj_attr.copy_calls++; /* windows cannot be duplicated: never called */
  *flag = 0;
  return mpi.SUCCESS;
}

static int win_attr_delete(MPIABI_Win w, int kv, void *val, void *extra) {
  (void)kv;
  obj_attr.delete_calls++;
  obj_attr.handle = w;
  obj_attr.val = val;
  if (extra != &obj_attr_extra) obj_attr.bad |= 1;
  return mpi.SUCCESS;
}

static int type_attr_copy(MPIABI_Datatype t, int kv, void *extra, void *in, void *out, int *flag) {
  int sz = -1;
  (void)kv;
  obj_attr.copy_calls++;
  obj_attr.handle = t;
  if (extra != &obj_attr_extra) obj_attr.bad |= 2;
  if (mpi.Type_size(t, &sz) != mpi.SUCCESS || sz != 12) obj_attr.bad |= 4;
  *(void **)out = (char *)in + 1;
  *flag = 1;
  return mpi.SUCCESS;
}

static int type_attr_delete(MPIABI_Datatype t, int kv, void *val, void *extra) {
  (void)kv;
  obj_attr.delete_calls++;
  obj_attr.handle = t;
  obj_attr.val = val;
  if (extra != &obj_attr_extra) obj_attr.bad |= 8;
  return mpi.SUCCESS;
}

static void check_envelope(int line, MPIABI_Datatype t, int ni, int na, int nd, int combiner) {
  int gi = -1, ga = -1, gd = -1, gc = -1;
  n_checks += 2;
  int rc = mpi.Type_get_envelope(t, &gi, &ga, &gd, &gc);
  if (rc != mpi.SUCCESS) failf(line, "Type_get_envelope returned %d", rc);
  if (gi != ni || ga != na || gd != nd || gc != combiner)
    failf(line, "Type_get_envelope gave (%d, %d, %d, combiner %d), expected (%d, %d, %d, combiner %d)", gi, ga,
          gd, gc, ni, na, nd, combiner);
}

struct S {
  int a;
  double b;
  char c[3];
};

static void test_datatypes(void) {
  int me = world_rank, l = left(), r = right();
  MPIABI_Comm w = mpi.COMM_WORLD;
  MPIABI_Aint lb, ext;
  int sz, ints[16];
  MPIABI_Aint addrs[16];
  MPIABI_Datatype dts[16];
  MPIABI_Status st;

  check_envelope(__LINE__, mpi.INT, 0, 0, 0, mpi.COMBINER_NAMED);

  /* Contiguous. */
  MPIABI_Datatype contig;
  OK(mpi.Type_contiguous(3, mpi.INT, &contig));
  OK(mpi.Type_commit(&contig));
  OK(mpi.Type_size(contig, &sz));
  CHECK_EQ(sz, 12);
  OK(mpi.Type_get_extent(contig, &lb, &ext));
  CHECK(lb == 0 && ext == 12, "contiguous lb %ld extent %ld", (long)lb, (long)ext);
  check_envelope(__LINE__, contig, 1, 0, 1, mpi.COMBINER_CONTIGUOUS);
  OK(mpi.Type_get_contents(contig, 1, 0, 1, ints, addrs, dts));
  CHECK_EQ(ints[0], 3);
  CHECK_EQ(dts[0], mpi.INT);

  /* Vector 3 x 2 with stride 4. */
  MPIABI_Datatype vec;
  OK(mpi.Type_vector(3, 2, 4, mpi.INT, &vec));
  OK(mpi.Type_commit(&vec));
  OK(mpi.Type_size(vec, &sz));
  CHECK_EQ(sz, 24);
  OK(mpi.Type_get_extent(vec, &lb, &ext));
  CHECK(lb == 0 && ext == 40, "vector lb %ld extent %ld", (long)lb, (long)ext);
  check_envelope(__LINE__, vec, 3, 0, 1, mpi.COMBINER_VECTOR);
  memset(ints, 0, sizeof ints);
  dts[0] = mpi.DATATYPE_NULL;
  OK(mpi.Type_get_contents(vec, 3, 0, 1, ints, addrs, dts));
  CHECK(ints[0] == 3 && ints[1] == 2 && ints[2] == 4, "vector contents %d %d %d", ints[0], ints[1], ints[2]);
  CHECK_EQ(dts[0], mpi.INT);
  int src[20], dst[20];
  for (int i = 0; i < 20; i++) { src[i] = me * 100 + i; dst[i] = -1; }
  status_preset(&st, 1);
  OK(mpi.Sendrecv(src, 1, vec, r, 800, dst, 20, mpi.INT, l, 800, w, &st));
  CHECK_STATUS(st, l, 800, mpi.INT, 6);
  int vexp[6] = {0, 1, 4, 5, 8, 9};
  for (int i = 0; i < 6; i++) CHECK_EQ(dst[i], l * 100 + vexp[i]);
  CHECK_EQ(dst[6], -1);
  /* ... and receiving into the vector. */
  for (int i = 0; i < 20; i++) dst[i] = -1;
  status_preset(&st, 1);
  OK(mpi.Sendrecv(src, 6, mpi.INT, r, 801, dst, 1, vec, l, 801, w, &st));
  CHECK_STATUS(st, l, 801, vec, 1);
  OK(mpi.Get_elements(&st, mpi.INT, &sz));
  CHECK_EQ(sz, 6);
  for (int i = 0; i < 12; i++) {
    int k = (i % 4 < 2) ? (i / 4) * 2 + i % 4 : -1;
    CHECK_EQ(dst[i], k < 0 ? -1 : l * 100 + k);
  }

  /* Indexed. */
  MPIABI_Datatype idx;
  int bl[3] = {1, 2, 3}, dp[3] = {0, 3, 7};
  OK(mpi.Type_indexed(3, bl, dp, mpi.INT, &idx));
  OK(mpi.Type_commit(&idx));
  OK(mpi.Type_size(idx, &sz));
  CHECK_EQ(sz, 24);
  OK(mpi.Type_get_extent(idx, &lb, &ext));
  CHECK(lb == 0 && ext == 40, "indexed lb %ld extent %ld", (long)lb, (long)ext);
  check_envelope(__LINE__, idx, 7, 0, 1, mpi.COMBINER_INDEXED);
  memset(ints, 0, sizeof ints);
  OK(mpi.Type_get_contents(idx, 7, 0, 1, ints, addrs, dts));
  int iexp_c[7] = {3, 1, 2, 3, 0, 3, 7};
  for (int i = 0; i < 7; i++) CHECK_EQ(ints[i], iexp_c[i]);
  CHECK_EQ(dts[0], mpi.INT);
  for (int i = 0; i < 20; i++) dst[i] = -1;
  OK(mpi.Sendrecv(src, 1, idx, r, 802, dst, 20, mpi.INT, l, 802, w, &st));
  int iexp[6] = {0, 3, 4, 7, 8, 9};
  for (int i = 0; i < 6; i++) CHECK_EQ(dst[i], l * 100 + iexp[i]);

  /* Struct {int; double; char[3]} resized to sizeof(struct S). */
  int sbl[3] = {1, 1, 3};
  MPIABI_Aint sdp[3] = {offsetof(struct S, a), offsetof(struct S, b), offsetof(struct S, c)};
  MPIABI_Datatype stypes[3] = {mpi.INT, mpi.DOUBLE, mpi.CHAR}, stru, sres;
  OK(mpi.Type_create_struct(3, sbl, sdp, stypes, &stru));
  OK(mpi.Type_size(stru, &sz));
  CHECK_EQ(sz, 4 + 8 + 3);
  OK(mpi.Type_get_true_extent(stru, &lb, &ext));
  CHECK(lb == 0 && ext == (MPIABI_Aint)offsetof(struct S, c) + 3, "struct true lb %ld true extent %ld", (long)lb, (long)ext);
  check_envelope(__LINE__, stru, 4, 3, 3, mpi.COMBINER_STRUCT);
  memset(ints, 0, sizeof ints);
  memset(addrs, 0, sizeof addrs);
  for (int i = 0; i < 3; i++) dts[i] = mpi.DATATYPE_NULL;
  OK(mpi.Type_get_contents(stru, 4, 3, 3, ints, addrs, dts));
  CHECK(ints[0] == 3 && ints[1] == 1 && ints[2] == 1 && ints[3] == 3, "struct contents ints %d %d %d %d", ints[0],
        ints[1], ints[2], ints[3]);
  for (int i = 0; i < 3; i++) {
    CHECK_EQ(addrs[i], sdp[i]);
    CHECK_EQ(dts[i], stypes[i]);
  }
  OK(mpi.Type_create_resized(stru, 0, sizeof(struct S), &sres));
  OK(mpi.Type_commit(&sres));
  OK(mpi.Type_get_extent(sres, &lb, &ext));
  CHECK(lb == 0 && ext == sizeof(struct S), "resized struct lb %ld extent %ld", (long)lb, (long)ext);
  check_envelope(__LINE__, sres, 0, 2, 1, mpi.COMBINER_RESIZED);
  OK(mpi.Type_get_contents(sres, 0, 2, 1, ints, addrs, dts));
  CHECK(addrs[0] == 0 && addrs[1] == sizeof(struct S), "resized contents %ld %ld", (long)addrs[0], (long)addrs[1]);
  /* dts[0] is the (derived) struct type: inspect, then free it. */
  check_envelope(__LINE__, dts[0], 4, 3, 3, mpi.COMBINER_STRUCT);
  OK(mpi.Type_free(&dts[0]));
  struct S ss[2], rs[2];
  memset(ss, 0, sizeof ss);
  memset(rs, 0xff, sizeof rs);
  for (int i = 0; i < 2; i++) {
    ss[i].a = me * 10 + i;
    ss[i].b = me + i * 0.5;
    memcpy(ss[i].c, i ? "xyz" : "abc", 3);
  }
  status_preset(&st, 1);
  OK(mpi.Sendrecv(ss, 2, sres, r, 803, rs, 2, sres, l, 803, w, &st));
  CHECK_STATUS(st, l, 803, sres, 2);
  OK(mpi.Get_count(&st, mpi.BYTE, &sz));
  CHECK_EQ(sz, 30);
  for (int i = 0; i < 2; i++) {
    CHECK_EQ(rs[i].a, l * 10 + i);
    CHECK(rs[i].b == l + i * 0.5, "struct double %g", rs[i].b);
    CHECK(memcmp(rs[i].c, i ? "xyz" : "abc", 3) == 0, "struct chars differ");
  }

  /* Subarrays, C and Fortran order. */
  MPIABI_Datatype subc, subf;
  int sizes[2] = {4, 5}, subs[2] = {2, 3}, starts[2] = {1, 2};
  OK(mpi.Type_create_subarray(2, sizes, subs, starts, mpi.ORDER_C, mpi.INT, &subc));
  OK(mpi.Type_commit(&subc));
  OK(mpi.Type_create_subarray(2, sizes, subs, starts, mpi.ORDER_FORTRAN, mpi.INT, &subf));
  OK(mpi.Type_commit(&subf));
  OK(mpi.Type_size(subc, &sz));
  CHECK_EQ(sz, 24);
  OK(mpi.Type_get_extent(subc, &lb, &ext));
  CHECK(lb == 0 && ext == 80, "subarray lb %ld extent %ld", (long)lb, (long)ext);
  check_envelope(__LINE__, subc, 8, 0, 1, mpi.COMBINER_SUBARRAY);
  memset(ints, 0, sizeof ints);
  OK(mpi.Type_get_contents(subc, 8, 0, 1, ints, addrs, dts));
  int sub_c[8] = {2, 4, 5, 2, 3, 1, 2, mpi.ORDER_C};
  for (int i = 0; i < 8; i++) CHECK_EQ(ints[i], sub_c[i]);
  CHECK_EQ(dts[0], mpi.INT);
  for (int i = 0; i < 20; i++) dst[i] = -1;
  OK(mpi.Sendrecv(src, 1, subc, r, 805, dst, 20, mpi.INT, l, 805, w, mpi.STATUS_IGNORE));
  int cexp[6] = {7, 8, 9, 12, 13, 14};
  for (int i = 0; i < 6; i++) CHECK_EQ(dst[i], l * 100 + cexp[i]);
  for (int i = 0; i < 20; i++) dst[i] = -1;
  OK(mpi.Sendrecv(src, 1, subf, r, 806, dst, 20, mpi.INT, l, 806, w, mpi.STATUS_IGNORE));
  int fexp[6] = {9, 10, 13, 14, 17, 18};
  for (int i = 0; i < 6; i++) CHECK_EQ(dst[i], l * 100 + fexp[i]);

  /* Resized INT: extent 8 takes every other int. */
  MPIABI_Datatype rint, rneg;
  OK(mpi.Type_create_resized(mpi.INT, 0, 8, &rint));
  OK(mpi.Type_commit(&rint));
  OK(mpi.Type_get_extent(rint, &lb, &ext));
  CHECK(lb == 0 && ext == 8, "resized int lb %ld extent %ld", (long)lb, (long)ext);
  for (int i = 0; i < 20; i++) dst[i] = -1;
  OK(mpi.Sendrecv(src, 3, rint, r, 807, dst, 20, mpi.INT, l, 807, w, mpi.STATUS_IGNORE));
  CHECK(dst[0] == l * 100 && dst[1] == l * 100 + 2 && dst[2] == l * 100 + 4 && dst[3] == -1,
        "resized send gave %d %d %d %d", dst[0], dst[1], dst[2], dst[3]);
  OK(mpi.Type_create_resized(mpi.INT, -4, 12, &rneg));
  OK(mpi.Type_get_extent(rneg, &lb, &ext));
  CHECK(lb == -4 && ext == 12, "resized(-4, 12) lb %ld extent %ld", (long)lb, (long)ext);
  OK(mpi.Type_free(&rneg));

  /* Pack / Unpack / Pack_size, sent as MPI_PACKED. */
  int four[4] = {me, me + 1, me + 2, me + 3}, four_out[4] = {-1, -1, -1, -1};
  int s1 = -1, s2 = -1, pos = 0;
  OK(mpi.Pack_size(4, mpi.INT, w, &s1));
  OK(mpi.Pack_size(1, vec, w, &s2));
  CHECK(s1 >= 16 && s2 >= 24, "Pack_size gave %d and %d", s1, s2);
  char pbuf[1024], prbuf[1024];
  OK(mpi.Pack(four, 4, mpi.INT, pbuf, (int)sizeof pbuf, &pos, w));
  CHECK(pos >= 16 && pos <= s1, "Pack of 4 ints: position %d (Pack_size %d)", pos, s1);
  OK(mpi.Pack(src, 1, vec, pbuf, (int)sizeof pbuf, &pos, w));
  CHECK(pos <= s1 + s2, "Pack position %d beyond Pack_size total %d", pos, s1 + s2);
  status_preset(&st, 1);
  OK(mpi.Sendrecv(pbuf, pos, mpi.PACKED, r, 808, prbuf, (int)sizeof prbuf, mpi.PACKED, l, 808, w, &st));
  CHECK_STATUS(st, l, 808, mpi.PACKED, pos);
  int upos = 0;
  for (int i = 0; i < 20; i++) dst[i] = -1;
  OK(mpi.Unpack(prbuf, pos, &upos, four_out, 4, mpi.INT, w));
  OK(mpi.Unpack(prbuf, pos, &upos, dst, 1, vec, w));
  CHECK_EQ(upos, pos);
  for (int i = 0; i < 4; i++) CHECK_EQ(four_out[i], l + i);
  for (int i = 0; i < 12; i++) {
    int k = (i % 4 < 2) ? (i / 4) * 4 + i % 4 : -1;
    CHECK_EQ(dst[i], k < 0 ? -1 : l * 100 + k);
  }
  /* external32 is big-endian two's complement. */
  int ext_in[2] = {0x01020304, -2};
  unsigned char ext_out[16];
  MPIABI_Aint esz = -1, epos = 0;
  OK(mpi.Pack_external_size("external32", 2, mpi.INT, &esz));
  CHECK_EQ(esz, 8);
  OK(mpi.Pack_external("external32", ext_in, 2, mpi.INT, ext_out, sizeof ext_out, &epos));
  CHECK_EQ(epos, 8);
  static const unsigned char ext_expect[8] = {1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe};
  CHECK(memcmp(ext_out, ext_expect, 8) == 0, "external32 bytes %02x%02x%02x%02x %02x%02x%02x%02x", ext_out[0],
        ext_out[1], ext_out[2], ext_out[3], ext_out[4], ext_out[5], ext_out[6], ext_out[7]);

  /* Type_dup, and a type attribute copied by MPIABI_TYPE_DUP_FN. */
  int kv = -1;
  static int type_marker;
  OK(mpi.Type_create_keyval(mpi.TYPE_DUP_FN, mpi.TYPE_NULL_DELETE_FN, &kv, NULL));
  OK(mpi.Type_set_attr(contig, kv, &type_marker));
  MPIABI_Datatype dup;
  OK(mpi.Type_dup(contig, &dup));
  check_envelope(__LINE__, dup, 0, 0, 1, mpi.COMBINER_DUP);
  OK(mpi.Type_get_contents(dup, 0, 0, 1, ints, addrs, dts));
  check_envelope(__LINE__, dts[0], 1, 0, 1, mpi.COMBINER_CONTIGUOUS);
  OK(mpi.Type_free(&dts[0]));
  void *aval = NULL;
  int flag = 0;
  OK(mpi.Type_get_attr(dup, kv, &aval, &flag));
  CHECK_EQ(flag, 1);
  CHECK(aval == &type_marker, "Type attribute copied as %p, expected %p", aval, (void *)&type_marker);
  OK(mpi.Type_size(dup, &sz));
  CHECK_EQ(sz, 12);
  OK(mpi.Type_free(&dup));
  OK(mpi.Type_free_keyval(&kv));
  CHECK_EQ(kv, mpi.KEYVAL_INVALID);

  /* User type-attribute callbacks see the MPIABI datatype handle. */
  static char tvals[2];
  memset(&obj_attr, 0, sizeof obj_attr);
  OK(mpi.Type_create_keyval(type_attr_copy, type_attr_delete, &kv, &obj_attr_extra));
  OK(mpi.Type_set_attr(contig, kv, &tvals[0]));
  OK(mpi.Type_dup(contig, &dup));
  CHECK_EQ(obj_attr.copy_calls, 1);
  CHECK_EQ(obj_attr.handle, contig);
  aval = NULL;
  OK(mpi.Type_get_attr(dup, kv, &aval, &flag));
  CHECK_EQ(flag, 1);
  CHECK(aval == &tvals[1], "user type copy callback result %p, expected %p", aval, (void *)&tvals[1]);
  MPIABI_Datatype dup_handle = dup;
  OK(mpi.Type_free(&dup));
  CHECK_EQ(obj_attr.delete_calls, 1);
  CHECK_EQ(obj_attr.handle, dup_handle);
  CHECK(obj_attr.val == &tvals[1], "type delete callback got %p", obj_attr.val);
  OK(mpi.Type_delete_attr(contig, kv));
  CHECK_EQ(obj_attr.delete_calls, 2);
  CHECK_EQ(obj_attr.handle, contig);
  CHECK(obj_attr.bad == 0, "type attribute callbacks saw wrong arguments (mask 0x%x)", obj_attr.bad);
  OK(mpi.Type_free_keyval(&kv));

  /* Addresses. */
  MPIABI_Aint a0 = 0, a5 = 0;
  OK(mpi.Get_address(&src[0], &a0));
  OK(mpi.Get_address(&src[5], &a5));
  CHECK_EQ(a5 - a0, 5 * sizeof(int));
  CHECK_EQ(mpi.Aint_diff(a5, a0), 5 * sizeof(int));
  CHECK_EQ(mpi.Aint_add(a0, 5 * sizeof(int)), a5);

  MPIABI_Datatype *all[] = {&contig, &vec, &idx, &stru, &sres, &subc, &subf, &rint};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    OK(mpi.Type_free(all[i]));
    CHECK_EQ(*all[i], mpi.DATATYPE_NULL);
  }
}

static void test_comms(void) {
  int n = world_size, me = world_rank, res = -1, sz = -1, rk = -1;
  MPIABI_Comm w = mpi.COMM_WORLD;
  MPIABI_Group g, ge, godd, gtmp, grev;
  int neven = (n + 1) / 2, nodd = n / 2;
  int *ranks = xmalloc(sizeof(int) * n), *out = xmalloc(sizeof(int) * n);

  OK(mpi.Comm_group(w, &g));
  OK(mpi.Group_size(g, &sz));
  CHECK_EQ(sz, n);
  OK(mpi.Group_rank(g, &rk));
  CHECK_EQ(rk, me);
  for (int i = 0; i < neven; i++) ranks[i] = 2 * i;
  OK(mpi.Group_incl(g, neven, ranks, &ge));
  OK(mpi.Group_size(ge, &sz));
  CHECK_EQ(sz, neven);
  OK(mpi.Group_rank(ge, &rk));
  CHECK_EQ(rk, me % 2 ? mpi.UNDEFINED : me / 2);
  OK(mpi.Group_excl(g, neven, ranks, &godd));
  OK(mpi.Group_size(godd, &sz));
  CHECK_EQ(sz, nodd);

  /* Translate ranks: ge -> g, and g -> ge (odd ranks are not in ge). */
  for (int i = 0; i < neven; i++) { ranks[i] = i; out[i] = -7; }
  ranks[neven] = mpi.PROC_NULL;
  OK(mpi.Group_translate_ranks(ge, neven + (neven < n ? 1 : 0), ranks, g, out));
  for (int i = 0; i < neven; i++) CHECK_EQ(out[i], 2 * i);
  if (neven < n) CHECK_EQ(out[neven], mpi.PROC_NULL);
  for (int i = 0; i < n; i++) ranks[i] = i;
  OK(mpi.Group_translate_ranks(g, n, ranks, ge, out));
  for (int i = 0; i < n; i++) CHECK_EQ(out[i], i % 2 ? mpi.UNDEFINED : i / 2);

  /* Group set operations and comparison. */
  int range[1][3] = {{0, n - 1, 2}};
  OK(mpi.Group_range_incl(g, 1, range, &gtmp));
  OK(mpi.Group_compare(gtmp, ge, &res));
  CHECK_EQ(res, mpi.IDENT);
  OK(mpi.Group_free(&gtmp));
  CHECK_EQ(gtmp, mpi.GROUP_NULL);
  OK(mpi.Group_union(ge, godd, &gtmp));
  OK(mpi.Group_compare(gtmp, g, &res));
  CHECK_EQ(res, n <= 2 ? mpi.IDENT : mpi.SIMILAR);
  OK(mpi.Group_free(&gtmp));
  OK(mpi.Group_intersection(g, ge, &gtmp));
  OK(mpi.Group_compare(gtmp, ge, &res));
  CHECK_EQ(res, mpi.IDENT);
  OK(mpi.Group_free(&gtmp));
  OK(mpi.Group_difference(g, ge, &gtmp));
  OK(mpi.Group_compare(gtmp, godd, &res));
  CHECK_EQ(res, mpi.IDENT);
  OK(mpi.Group_free(&gtmp));
  for (int i = 0; i < n; i++) ranks[i] = n - 1 - i;
  OK(mpi.Group_incl(g, n, ranks, &grev));
  OK(mpi.Group_compare(g, grev, &res));
  CHECK_EQ(res, mpi.SIMILAR);
  OK(mpi.Group_compare(g, ge, &res));
  CHECK_EQ(res, mpi.UNEQUAL);
  OK(mpi.Group_compare(g, g, &res));
  CHECK_EQ(res, mpi.IDENT);
  OK(mpi.Group_size(mpi.GROUP_EMPTY, &sz));
  CHECK_EQ(sz, 0);

  /* Comm_create with the even group. */
  MPIABI_Comm ce = mpi.COMM_NULL;
  OK(mpi.Comm_create(w, ge, &ce));
  if (me % 2) {
    CHECK_EQ(ce, mpi.COMM_NULL);
  } else {
    CHECK(ce != mpi.COMM_NULL, "Comm_create gave COMM_NULL to a member");
    OK(mpi.Comm_rank(ce, &rk));
    OK(mpi.Comm_size(ce, &sz));
    CHECK_EQ(rk, me / 2);
    CHECK_EQ(sz, neven);
    int v = me, s = -1;
    OK(mpi.Allreduce(&v, &s, 1, mpi.INT, mpi.SUM, ce));
    CHECK_EQ(s, 2 * (neven * (neven - 1) / 2));
    OK(mpi.Comm_free(&ce));
    CHECK_EQ(ce, mpi.COMM_NULL);
    /* Comm_create_group: only members call it. */
    MPIABI_Comm cg = mpi.COMM_NULL;
    OK(mpi.Comm_create_group(w, ge, 5, &cg));
    OK(mpi.Comm_rank(cg, &rk));
    CHECK_EQ(rk, me / 2);
    OK(mpi.Comm_free(&cg));
  }

  /* Comm_split by parity with reversed keys. */
  MPIABI_Comm cs;
  int color = me % 2, members = color ? nodd : neven;
  OK(mpi.Comm_split(w, color, -me, &cs));
  OK(mpi.Comm_size(cs, &sz));
  OK(mpi.Comm_rank(cs, &rk));
  CHECK_EQ(sz, members);
  CHECK_EQ(rk, members - 1 - me / 2);
  int wr = -1;
  OK(mpi.Allreduce(&me, &wr, 1, mpi.INT, mpi.MAX, cs)); /* highest world rank is new rank 0 */
  int first = -1, mine_first = rk == 0 ? me : -1;
  OK(mpi.Allreduce(&mine_first, &first, 1, mpi.INT, mpi.MAX, cs));
  CHECK_EQ(first, wr);

  /* Intercommunicator between the parity halves, then merged. */
  MPIABI_Comm inter, merged;
  int flag = -1;
  OK(mpi.Comm_split(w, color, me, &ce));
  OK(mpi.Intercomm_create(ce, 0, w, color ? 0 : 1, 77, &inter));
  OK(mpi.Comm_test_inter(inter, &flag));
  CHECK_EQ(flag, 1);
  OK(mpi.Comm_remote_size(inter, &sz));
  CHECK_EQ(sz, color ? neven : nodd);
  OK(mpi.Intercomm_merge(inter, color, &merged));
  OK(mpi.Comm_size(merged, &sz));
  OK(mpi.Comm_rank(merged, &rk));
  CHECK_EQ(sz, n);
  CHECK_EQ(rk, color ? neven + me / 2 : me / 2);
  OK(mpi.Comm_test_inter(merged, &flag));
  CHECK_EQ(flag, 0);
  OK(mpi.Comm_free(&merged));
  OK(mpi.Comm_free(&inter));
  OK(mpi.Comm_free(&ce));

  /* Split with UNDEFINED color gives COMM_NULL. */
  MPIABI_Comm cu;
  OK(mpi.Comm_split(w, me == 0 ? mpi.UNDEFINED : 1, 0, &cu));
  if (me == 0) {
    CHECK_EQ(cu, mpi.COMM_NULL);
  } else {
    OK(mpi.Comm_size(cu, &sz));
    CHECK_EQ(sz, n - 1);
    OK(mpi.Comm_free(&cu));
  }

  /* Comm_compare. */
  MPIABI_Comm d, rev, di;
  OK(mpi.Comm_dup(w, &d));
  OK(mpi.Comm_compare(w, d, &res));
  CHECK_EQ(res, mpi.CONGRUENT);
  OK(mpi.Comm_compare(w, w, &res));
  CHECK_EQ(res, mpi.IDENT);
  OK(mpi.Comm_compare(w, mpi.COMM_SELF, &res));
  CHECK_EQ(res, mpi.UNEQUAL);
  OK(mpi.Comm_split(w, 0, n - me, &rev));
  OK(mpi.Comm_compare(w, rev, &res));
  CHECK_EQ(res, mpi.SIMILAR);
  OK(mpi.Comm_compare(cs, w, &res));
  CHECK_EQ(res, mpi.UNEQUAL);
  MPIABI_Request req;
  OK(mpi.Comm_idup(w, &di, &req));
  OK(mpi.Wait(&req, mpi.STATUS_IGNORE));
  OK(mpi.Comm_compare(di, d, &res));
  CHECK_EQ(res, mpi.CONGRUENT);
  OK(mpi.Comm_rank(di, &rk));
  CHECK_EQ(rk, me);

  /* Names. */
  char name[256];
  int len = -1;
  OK(mpi.Comm_set_name(d, "conformance-dup"));
  memset(name, 0, sizeof name);
  OK(mpi.Comm_get_name(d, name, &len));
  CHECK_STR(name, "conformance-dup");
  CHECK_EQ(len, strlen("conformance-dup"));

  /* A dup is a separate communication context. */
  int a = me, bb = -1;
  MPIABI_Request rq;
  OK(mpi.Irecv(&bb, 1, mpi.INT, left(), 900, d, &rq));
  OK(mpi.Send(&a, 1, mpi.INT, right(), 900, d));
  flag = -1;
  OK(mpi.Iprobe(left(), 900, w, &flag, mpi.STATUS_IGNORE));
  CHECK_EQ(flag, 0);
  OK(mpi.Wait(&rq, mpi.STATUS_IGNORE));
  CHECK_EQ(bb, left());

  /* Comm_split_type(SHARED): exactly the ranks on my host, in world order. */
  char host[256], *hosts = xmalloc(256 * (size_t)n);
  memset(host, 0, sizeof host);
  OK(mpi.Get_processor_name(host, &len));
  OK(mpi.Allgather(host, 256, mpi.CHAR, hosts, 256, mpi.CHAR, w));
  int same = 0, before = 0;
  for (int i = 0; i < n; i++)
    if (strcmp(hosts + 256 * i, host) == 0) {
      same++;
      if (i < me) before++;
    }
  MPIABI_Comm shm;
  OK(mpi.Comm_split_type(w, mpi.COMM_TYPE_SHARED, me, mpi.INFO_NULL, &shm));
  CHECK(shm != mpi.COMM_NULL, "Comm_split_type(SHARED) gave COMM_NULL");
  OK(mpi.Comm_size(shm, &sz));
  OK(mpi.Comm_rank(shm, &rk));
  CHECK_EQ(sz, same);
  CHECK_EQ(rk, before);
  MPIABI_Comm none;
  OK(mpi.Comm_split_type(w, mpi.UNDEFINED, me, mpi.INFO_NULL, &none));
  CHECK_EQ(none, mpi.COMM_NULL);

  /* Cartesian topology: a periodic ring. */
  int dims[1] = {0}, periods[1] = {1}, src = -1, dst = -1, coords[1] = {-1}, topo = -1;
  OK(mpi.Dims_create(n, 1, dims));
  CHECK_EQ(dims[0], n);
  MPIABI_Comm cart;
  OK(mpi.Cart_create(w, 1, dims, periods, 0, &cart));
  OK(mpi.Topo_test(cart, &topo));
  CHECK_EQ(topo, mpi.CART);
  OK(mpi.Cart_shift(cart, 0, 1, &src, &dst));
  CHECK_EQ(src, left());
  CHECK_EQ(dst, right());
  OK(mpi.Cart_coords(cart, me, 1, coords));
  CHECK_EQ(coords[0], me);

  MPIABI_Comm *comms[] = {&d, &rev, &di, &cs, &shm, &cart};
  for (size_t i = 0; i < sizeof comms / sizeof comms[0]; i++) {
    OK(mpi.Comm_free(comms[i]));
    CHECK_EQ(*comms[i], mpi.COMM_NULL);
  }
  MPIABI_Group *groups[] = {&g, &ge, &godd, &grev};
  for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
    OK(mpi.Group_free(groups[i]));
    CHECK_EQ(*groups[i], mpi.GROUP_NULL);
  }
  free(ranks);
  free(out);
  free(hosts);
}

/* ---- intercommunicators: root constants, arrays sized by the remote group ---- */
static void test_intercomm(void) {
  int n = world_size, me = world_rank, lsize = -1, rsize = -1, lrank = -1;
  MPIABI_Comm w = mpi.COMM_WORLD, local, ic;
  /* Group A = {0}, group B = {1 .. n-1}: unequal sizes for n >= 3. */
  int inA = me == 0;
  OK(mpi.Comm_split(w, inA ? 0 : 1, me, &local));
  OK(mpi.Intercomm_create(local, 0, w, inA ? 1 : 0, 78, &ic));
  OK(mpi.Comm_size(ic, &lsize));
  OK(mpi.Comm_remote_size(ic, &rsize));
  OK(mpi.Comm_rank(ic, &lrank));
  CHECK_EQ(lsize, inA ? 1 : n - 1);
  CHECK_EQ(rsize, inA ? n - 1 : 1);
  CHECK_EQ(lrank, inA ? 0 : me - 1);

  /* Bcast from A's rank 0: MPI_ROOT there, the root's rank on the other side. */
  int v = inA ? 4242 : -1;
  OK(mpi.Bcast(&v, 1, mpi.INT, inA ? mpi.ROOT : 0, ic));
  CHECK_EQ(v, 4242);
  /* Gather to A's rank 0. */
  int *g = xmalloc(sizeof(int) * (size_t)n), gv = me * 3;
  for (int i = 0; i < n; i++) g[i] = -1;
  OK(mpi.Gather(&gv, 1, mpi.INT, g, 1, mpi.INT, inA ? mpi.ROOT : 0, ic));
  if (inA)
    for (int j = 0; j < n - 1; j++) CHECK_EQ(g[j], (j + 1) * 3);
  /* Allreduce: each side gets the reduction over the other side. */
  int in = me + 1, out = -1;
  OK(mpi.Allreduce(&in, &out, 1, mpi.INT, mpi.SUM, ic));
  CHECK_EQ(out, inA ? n * (n + 1) / 2 - 1 : 1);

  /* Alltoallw / Ialltoallw: the arrays have one entry per REMOTE process. */
  int *sc = xmalloc(sizeof(int) * (size_t)rsize), *sd = xmalloc(sizeof(int) * (size_t)rsize);
  int *sb = xmalloc(sizeof(int) * (size_t)rsize), *rb = xmalloc(sizeof(int) * (size_t)rsize);
  int *rd = xmalloc(sizeof(int) * (size_t)rsize);
  MPIABI_Datatype *st = xmalloc(sizeof(MPIABI_Datatype) * (size_t)rsize);
  for (int pass = 0; pass < 2; pass++) {
    for (int j = 0; j < rsize; j++) {
      sc[j] = 1;
      sd[j] = (int)sizeof(int) * j;
      rd[j] = (int)sizeof(int) * (rsize - 1 - j);
      st[j] = mpi.INT;
      sb[j] = me * 100 + j + pass;
      rb[j] = -1;
    }
    if (pass == 0) {
      OK(mpi.Alltoallw(sb, sc, sd, st, rb, sc, rd, st, ic));
    } else {
      MPIABI_Request req;
      OK(mpi.Ialltoallw(sb, sc, sd, st, rb, sc, rd, st, ic, &req));
      OK(mpi.Wait(&req, mpi.STATUS_IGNORE));
    }
    for (int j = 0; j < rsize; j++) {
      /* remote local rank j is world rank j (in A) or j + 1 (in B) */
      int remote_world = inA ? j + 1 : 0;
      CHECK_EQ(rb[rsize - 1 - j], remote_world * 100 + lrank + pass);
    }
  }
  OK(mpi.Comm_free(&ic));
  OK(mpi.Comm_free(&local));
  free(g); free(sc); free(sd); free(sb); free(rb); free(rd); free(st);
}

/* ---- neighbourhood collectives: arrays sized by in/out degree ---- */
static void test_topology(void) {
  int n = world_size, me = world_rank;
  MPIABI_Comm w = mpi.COMM_WORLD, dg, cart;
  /* Rank 0 sends to everyone else; nobody sends to rank 0. */
  int indeg = me == 0 ? 0 : 1, outdeg = me == 0 ? n - 1 : 0;
  int *dests = xmalloc(sizeof(int) * (size_t)n), srcs[1] = {0};
  for (int j = 0; j < n - 1; j++) dests[j] = j + 1;
  OK(mpi.Dist_graph_create_adjacent(w, indeg, srcs, mpi.UNWEIGHTED, outdeg, dests, mpi.UNWEIGHTED, mpi.INFO_NULL, 0,
                                    &dg));
  int topo = -1, gi = -1, go = -1, weighted = -1;
  OK(mpi.Topo_test(dg, &topo));
  CHECK_EQ(topo, mpi.DIST_GRAPH);
  OK(mpi.Dist_graph_neighbors_count(dg, &gi, &go, &weighted));
  CHECK_EQ(gi, indeg);
  CHECK_EQ(go, outdeg);
  CHECK_EQ(weighted, 0);
  int *gs = xmalloc(sizeof(int) * (size_t)n), *gd = xmalloc(sizeof(int) * (size_t)n), ws[1], wd[1];
  OK(mpi.Dist_graph_neighbors(dg, indeg, gs, ws, outdeg, gd, wd));
  if (indeg) CHECK_EQ(gs[0], 0);
  for (int j = 0; j < outdeg; j++) CHECK_EQ(gd[j], j + 1);

  int *scount = xmalloc(sizeof(int) * (size_t)n), *sbuf = xmalloc(sizeof(int) * (size_t)n);
  MPIABI_Aint *sdisp = xmalloc(sizeof(MPIABI_Aint) * (size_t)n);
  MPIABI_Datatype *stype = xmalloc(sizeof(MPIABI_Datatype) * (size_t)n);
  for (int j = 0; j < n; j++) {
    scount[j] = 1;
    sdisp[j] = (MPIABI_Aint)sizeof(int) * j;
    stype[j] = mpi.INT;
    sbuf[j] = 500 + j + 1;
  }
  int rcount[1] = {1}, rbuf[2] = {-1, -1};
  MPIABI_Aint rdisp[1] = {0};
  MPIABI_Datatype rtype[1] = {mpi.INT};
  OK(mpi.Neighbor_alltoallw(sbuf, scount, sdisp, stype, rbuf, rcount, rdisp, rtype, dg));
  if (me != 0) CHECK_EQ(rbuf[0], 500 + me);
  rbuf[0] = -1;
  for (int j = 0; j < n; j++) sbuf[j] += 1000;
  MPIABI_Request req;
  OK(mpi.Ineighbor_alltoallw(sbuf, scount, sdisp, stype, rbuf, rcount, rdisp, rtype, dg, &req));
  OK(mpi.Wait(&req, mpi.STATUS_IGNORE));
  if (me != 0) CHECK_EQ(rbuf[0], 1500 + me);
  OK(mpi.Comm_free(&dg));

  /* Periodic ring: neighbours are (left, right). */
  int dims[1] = {n}, periods[1] = {1}, nb[2] = {-1, -1};
  OK(mpi.Cart_create(w, 1, dims, periods, 0, &cart));
  OK(mpi.Neighbor_allgather(&me, 1, mpi.INT, nb, 1, mpi.INT, cart));
  CHECK_EQ(nb[0], left());
  CHECK_EQ(nb[1], right());
  OK(mpi.Comm_free(&cart));
  free(dests); free(gs); free(gd); free(scount); free(sbuf); free(sdisp); free(stype);
}

/* ---- user-defined operations ---- */
static int op_calls, op_bad_dtype, op_last_len;
static MPIABI_Datatype op_expect_dtype, op_seen_dtype;

static void user_sum(void *in, void *inout, int *len, MPIABI_Datatype *dtype) {
  op_calls++;
  op_last_len = *len;
  if (*dtype != op_expect_dtype) {
    op_bad_dtype++;
    op_seen_dtype = *dtype;
  }
  const int *a = in;
  int *b = inout;
  for (int i = 0; i < *len; i++) b[i] += a[i];
}

/* Non-commutative: an element (d, m) is a string of digits d in base-m
 * positional form; inout = in . inout (concatenation), modulo 2^64. */
static void concat(const uint64_t *a, uint64_t *b) {
  uint64_t d = a[0] * b[1] + b[0], m = a[1] * b[1];
  b[0] = d;
  b[1] = m;
}

static void user_concat(void *in, void *inout, int *len, MPIABI_Datatype *dtype) {
  op_calls++;
  if (*dtype != op_expect_dtype) {
    op_bad_dtype++;
    op_seen_dtype = *dtype;
  }
  for (int i = 0; i < *len; i++) concat((const uint64_t *)in + 2 * i, (uint64_t *)inout + 2 * i);
}

static void test_userop(void) {
  int n = world_size, me = world_rank, commute = -1;
  MPIABI_Comm w = mpi.COMM_WORLD;
  MPIABI_Op op = mpi.OP_NULL, nc = mpi.OP_NULL;
  OK(mpi.Op_commutative(mpi.SUM, &commute));
  CHECK_EQ(commute, 1);
  OK(mpi.Op_create(user_sum, 1, &op));
  CHECK(op != mpi.OP_NULL, "Op_create gave OP_NULL");
  OK(mpi.Op_commutative(op, &commute));
  CHECK_EQ(commute, 1);

  op_expect_dtype = mpi.INT;
  op_calls = op_bad_dtype = 0;
  int in[3] = {me, 1, 2 * me}, out[3] = {-1, -1, -1};
  OK(mpi.Allreduce(in, out, 3, mpi.INT, op, w));
  CHECK(out[0] == n * (n - 1) / 2 && out[1] == n && out[2] == n * (n - 1), "user-op Allreduce gave %d %d %d", out[0],
        out[1], out[2]);
  CHECK(op_bad_dtype == 0, "user op called with datatype 0x%llx, expected MPIABI_INT = 0x%llx",
        (unsigned long long)op_seen_dtype, (unsigned long long)mpi.INT);
  int calls = 0;
  OK(mpi.Allreduce(&op_calls, &calls, 1, mpi.INT, mpi.SUM, w));
  CHECK(calls >= 1, "user op never called during Allreduce");
  int iob[3] = {10, 20, 30};
  op_calls = 0;
  op_last_len = -1;
  OK(mpi.Reduce_local(in, iob, 3, mpi.INT, op));
  CHECK(iob[0] == 10 + me && iob[1] == 21 && iob[2] == 30 + 2 * me, "user-op Reduce_local gave %d %d %d", iob[0],
        iob[1], iob[2]);
  CHECK_EQ(op_calls, 1);
  CHECK_EQ(op_last_len, 3);
  CHECK_EQ(op_bad_dtype, 0);

  /* Non-commutative op on a derived type: results must be in rank order. */
  MPIABI_Datatype pair;
  OK(mpi.Type_contiguous(2, mpi.UINT64_T, &pair));
  OK(mpi.Type_commit(&pair));
  OK(mpi.Op_create(user_concat, 0, &nc));
  OK(mpi.Op_commutative(nc, &commute));
  CHECK_EQ(commute, 0);
  op_expect_dtype = pair;
  op_bad_dtype = 0;
  uint64_t x[4] = {(uint64_t)me + 1, 1000, (uint64_t)me + 7, 1000}, y[4], expect[4], prefix[4];
  for (int r = 0; r < n; r++) {
    uint64_t xr[4] = {(uint64_t)r + 1, 1000, (uint64_t)r + 7, 1000};
    if (r == 0) {
      memcpy(expect, xr, sizeof xr);
    } else {
      /* expect = expect . xr, i.e. concat(expect, xr) stored in xr */
      concat(expect, xr);
      concat(expect + 2, xr + 2);
      memcpy(expect, xr, sizeof xr);
    }
    if (r == me) memcpy(prefix, expect, sizeof expect);
  }
  memset(y, 0, sizeof y);
  OK(mpi.Reduce(x, y, 2, pair, nc, 0, w));
  if (me == 0)
    CHECK(memcmp(y, expect, sizeof y) == 0, "non-commutative Reduce gave (%llu, %llu), expected (%llu, %llu)",
          (unsigned long long)y[0], (unsigned long long)y[2], (unsigned long long)expect[0],
          (unsigned long long)expect[2]);
  memset(y, 0, sizeof y);
  OK(mpi.Allreduce(x, y, 2, pair, nc, w));
  CHECK(memcmp(y, expect, sizeof y) == 0, "non-commutative Allreduce gave %llu, expected %llu",
        (unsigned long long)y[0], (unsigned long long)expect[0]);
  memset(y, 0, sizeof y);
  OK(mpi.Scan(x, y, 2, pair, nc, w));
  CHECK(memcmp(y, prefix, sizeof y) == 0, "non-commutative Scan gave %llu, expected %llu", (unsigned long long)y[0],
        (unsigned long long)prefix[0]);
  CHECK(op_bad_dtype == 0, "user op called with datatype 0x%llx, expected the derived pair type 0x%llx",
        (unsigned long long)op_seen_dtype, (unsigned long long)pair);

  /* An op freed while a nonblocking reduction with it is pending: the reduction completes normally
   * (MPI 4.1, 6.9.5). MPICH's coll/nonblocking2 found the wrapper clearing the op's function in
   * MPI_Op_free, and the library calling NULL in the wait; an op created in between must not take
   * the freed one's place either. */
  MPIABI_Op freed = mpi.OP_NULL, later = mpi.OP_NULL;
  MPIABI_Request req = mpi.REQUEST_NULL;
  int fin[3] = {me, 1, 2 * me}, fout[3] = {-1, -1, -1};
  op_expect_dtype = mpi.INT;
  OK(mpi.Op_create(user_sum, 1, &freed));
  OK(mpi.Iallreduce(fin, fout, 3, mpi.INT, freed, w, &req));
  OK(mpi.Op_free(&freed));
  OK(mpi.Op_create(user_concat, 0, &later));
  OK(mpi.Wait(&req, mpi.STATUS_IGNORE));
  CHECK(fout[0] == n * (n - 1) / 2 && fout[1] == n && fout[2] == n * (n - 1),
        "Iallreduce with its op freed before the wait gave %d %d %d", fout[0], fout[1], fout[2]);
  OK(mpi.Op_free(&later));

  OK(mpi.Op_free(&op));
  CHECK_EQ(op, mpi.OP_NULL);
  OK(mpi.Op_free(&nc));
  CHECK_EQ(nc, mpi.OP_NULL);
  OK(mpi.Type_free(&pair));
}

/* Point-to-point on a communicator split as XLA splits the world (the wrapper records it and checks
 * each receive's arrival, as for XLA's permutes): correct programs are not stopped. MPICH's suite
 * found both: pt2pt/dtype_send frees the receive's datatype before the wait (the check asked the
 * library about the freed handle and stopped the job), pt2pt/cancelanysrc cancels a receive (which
 * rightly receives nothing). */
static void test_recorded_p2p(void) {
  int n = world_size, me = world_rank;
  MPIABI_Comm c = mpi.COMM_NULL;
  OK(mpi.Comm_split(mpi.COMM_WORLD, 0, me, &c));
  int peer = (me + 1) % n, from = (me + n - 1) % n;
  MPIABI_Datatype four;
  OK(mpi.Type_contiguous(4, mpi.INT, &four));
  OK(mpi.Type_commit(&four));
  int out[4] = {me, me + 1, me + 2, me + 3}, in[4] = {-1, -1, -1, -1}, flag = -1;
  MPIABI_Request reqs[2];
  MPIABI_Status st;
  OK(mpi.Irecv(in, 1, four, from, 7, c, &reqs[0]));
  OK(mpi.Type_free(&four));
  OK(mpi.Isend(out, 4, mpi.INT, peer, 7, c, &reqs[1]));
  OK(mpi.Wait(&reqs[0], &st));
  OK(mpi.Wait(&reqs[1], mpi.STATUS_IGNORE));
  CHECK(in[0] == from && in[3] == from + 3, "a receive whose type was freed before the wait got %d..%d", in[0],
        in[3]);
  OK(mpi.Irecv(in, 4, mpi.INT, mpi.ANY_SOURCE, 8, c, &reqs[0])); /* never sent */
  OK(mpi.Cancel(&reqs[0]));
  OK(mpi.Wait(&reqs[0], &st));
  OK(mpi.Test_cancelled(&st, &flag));
  CHECK_EQ(flag, 1);
  OK(mpi.Barrier(c));
  OK(mpi.Comm_free(&c));
}

static void test_info(void) {
  MPIABI_Info info = mpi.INFO_NULL, dup = mpi.INFO_NULL;
  char key[256], val[256];
  int n = -1, flag = -1, vlen = -1;
  OK(mpi.Info_create(&info));
  CHECK(info != mpi.INFO_NULL, "Info_create gave INFO_NULL");
  OK(mpi.Info_get_nkeys(info, &n));
  CHECK_EQ(n, 0);
  OK(mpi.Info_set(info, "conformance_key", "value-1"));
  OK(mpi.Info_set(info, "second", "2"));
  OK(mpi.Info_set(info, "conformance_key", "value-A"));
  OK(mpi.Info_get_nkeys(info, &n));
  CHECK_EQ(n, 2);
  memset(key, 0, sizeof key);
  OK(mpi.Info_get_nthkey(info, 0, key));
  CHECK_STR(key, "conformance_key");
  memset(key, 0, sizeof key);
  OK(mpi.Info_get_nthkey(info, 1, key));
  CHECK_STR(key, "second");
  memset(val, 0, sizeof val);
  OK(mpi.Info_get(info, "conformance_key", (int)sizeof val - 1, val, &flag));
  CHECK_EQ(flag, 1);
  CHECK_STR(val, "value-A");
  OK(mpi.Info_get_valuelen(info, "conformance_key", &vlen, &flag));
  CHECK_EQ(flag, 1);
  CHECK_EQ(vlen, 7);
  flag = -1;
  OK(mpi.Info_get(info, "no_such_key", (int)sizeof val - 1, val, &flag));
  CHECK_EQ(flag, 0);
  OK(mpi.Info_dup(info, &dup));
  CHECK(dup != info && dup != mpi.INFO_NULL, "Info_dup gave 0x%llx", (unsigned long long)dup);
  OK(mpi.Info_get_nkeys(dup, &n));
  CHECK_EQ(n, 2);
  memset(val, 0, sizeof val);
  OK(mpi.Info_get(dup, "second", (int)sizeof val - 1, val, &flag));
  CHECK_EQ(flag, 1);
  CHECK_STR(val, "2");
  OK(mpi.Info_delete(dup, "second"));
  OK(mpi.Info_get_nkeys(dup, &n));
  CHECK_EQ(n, 1);
  OK(mpi.Info_get_nkeys(info, &n));
  CHECK_EQ(n, 2);
  OK(mpi.Info_free(&info));
  CHECK_EQ(info, mpi.INFO_NULL);
  OK(mpi.Info_free(&dup));
  CHECK_EQ(dup, mpi.INFO_NULL);
  OK(mpi.Info_get_nkeys(mpi.INFO_ENV, &n));
  CHECK(n >= 0, "Info_get_nkeys(INFO_ENV) gave %d", n);
}

/* ---- attribute caching ---- */
static struct {
  int keyval, copy_calls, delete_calls, bad;
  MPIABI_Comm last_comm;
  void *last_val;
} ac;
static int attr_extra;

static int attr_copy(MPIABI_Comm oldcomm, int keyval, void *extra, void *in, void *out, int *flag) {
  int r = -1;
  ac.copy_calls++;
  ac.last_comm = oldcomm;
  if (extra != &attr_extra) ac.bad |= 1;
  if (keyval != ac.keyval) ac.bad |= 2;
  if (mpi.Comm_rank(oldcomm, &r) != mpi.SUCCESS || r != world_rank) ac.bad |= 4;
  *(void **)out = (char *)in + 1;
  *flag = 1;
  return mpi.SUCCESS;
}

static int attr_delete(MPIABI_Comm comm, int keyval, void *val, void *extra) {
  int r = -1;
  ac.delete_calls++;
  ac.last_comm = comm;
  ac.last_val = val;
  if (extra != &attr_extra) ac.bad |= 8;
  if (keyval != ac.keyval) ac.bad |= 16;
  if (mpi.Comm_rank(comm, &r) != mpi.SUCCESS || r != world_rank) ac.bad |= 32;
  return mpi.SUCCESS;
}

static void test_attributes(void) {
  MPIABI_Comm w = mpi.COMM_WORLD, c1, c2, old;
  static char vals[4][8];
  void *v = NULL;
  int flag = -1;

  /* Predefined attributes. */
  OK(mpi.Comm_get_attr(w, mpi.TAG_UB, &v, &flag));
  CHECK_EQ(flag, 1);
  if (flag == 1 && v) CHECK(*(int *)v >= 32767, "MPI_TAG_UB is %d", *(int *)v);
  flag = -1;
  OK(mpi.Comm_get_attr(w, mpi.WTIME_IS_GLOBAL, &v, &flag));
  if (flag == 1 && v) CHECK(*(int *)v == 0 || *(int *)v == 1, "MPI_WTIME_IS_GLOBAL is %d", *(int *)v);

  memset(&ac, 0, sizeof ac);
  OK(mpi.Comm_create_keyval(attr_copy, attr_delete, &ac.keyval, &attr_extra));
  CHECK(ac.keyval != mpi.KEYVAL_INVALID, "Comm_create_keyval gave KEYVAL_INVALID");
  OK(mpi.Comm_dup(w, &c1));
  OK(mpi.Comm_set_attr(c1, ac.keyval, vals[0]));
  OK(mpi.Comm_get_attr(c1, ac.keyval, &v, &flag));
  CHECK_EQ(flag, 1);
  CHECK(v == vals[0], "Comm_get_attr gave %p, expected %p", v, (void *)vals[0]);
  CHECK_EQ(ac.copy_calls + ac.delete_calls, 0);

  OK(mpi.Comm_dup(c1, &c2));
  CHECK_EQ(ac.copy_calls, 1);
  CHECK_EQ(ac.last_comm, c1);
  v = NULL;
  OK(mpi.Comm_get_attr(c2, ac.keyval, &v, &flag));
  CHECK_EQ(flag, 1);
  CHECK(v == vals[0] + 1, "copied attribute is %p, expected %p", v, (void *)(vals[0] + 1));

  old = c2;
  OK(mpi.Comm_free(&c2));
  CHECK_EQ(ac.delete_calls, 1);
  CHECK_EQ(ac.last_comm, old);
  CHECK(ac.last_val == vals[0] + 1, "delete callback got %p, expected %p", ac.last_val, (void *)(vals[0] + 1));

  OK(mpi.Comm_set_attr(c1, ac.keyval, vals[1])); /* replaces: deletes the old value */
  CHECK_EQ(ac.delete_calls, 2);
  CHECK(ac.last_val == vals[0], "replacing an attribute deleted %p, expected %p", ac.last_val, (void *)vals[0]);
  OK(mpi.Comm_delete_attr(c1, ac.keyval));
  CHECK_EQ(ac.delete_calls, 3);
  CHECK_EQ(ac.last_comm, c1);
  CHECK(ac.last_val == vals[1], "Comm_delete_attr deleted %p, expected %p", ac.last_val, (void *)vals[1]);
  flag = -1;
  OK(mpi.Comm_get_attr(c1, ac.keyval, &v, &flag));
  CHECK_EQ(flag, 0);
  OK(mpi.Comm_set_attr(c1, ac.keyval, vals[2]));
  old = c1;
  OK(mpi.Comm_free(&c1));
  CHECK_EQ(ac.delete_calls, 4);
  CHECK_EQ(ac.last_comm, old);
  CHECK(ac.last_val == vals[2], "Comm_free deleted %p, expected %p", ac.last_val, (void *)vals[2]);
  CHECK(ac.bad == 0, "attribute callbacks saw wrong arguments (mask 0x%x: 1/8 extra_state, 2/16 keyval, "
                     "4/32 comm not usable for Comm_rank)", ac.bad);
  OK(mpi.Comm_free_keyval(&ac.keyval));
  CHECK_EQ(ac.keyval, mpi.KEYVAL_INVALID);

  /* Predefined callbacks. */
  int kd = -1, kn = -1;
  OK(mpi.Comm_create_keyval(mpi.COMM_DUP_FN, mpi.COMM_NULL_DELETE_FN, &kd, NULL));
  OK(mpi.Comm_create_keyval(mpi.COMM_NULL_COPY_FN, mpi.COMM_NULL_DELETE_FN, &kn, NULL));
  OK(mpi.Comm_dup(w, &c1));
  OK(mpi.Comm_set_attr(c1, kd, vals[3]));
  OK(mpi.Comm_set_attr(c1, kn, vals[3] + 2));
  OK(mpi.Comm_dup(c1, &c2));
  v = NULL;
  OK(mpi.Comm_get_attr(c2, kd, &v, &flag));
  CHECK_EQ(flag, 1);
  CHECK(v == vals[3], "COMM_DUP_FN copied %p, expected %p", v, (void *)vals[3]);
  flag = -1;
  OK(mpi.Comm_get_attr(c2, kn, &v, &flag));
  CHECK_EQ(flag, 0);
  OK(mpi.Comm_delete_attr(c1, kd));
  OK(mpi.Comm_free(&c2));
  OK(mpi.Comm_free(&c1));
  OK(mpi.Comm_free_keyval(&kd));
  OK(mpi.Comm_free_keyval(&kn));
}

/* ---- error handling ---- */
static struct {
  int calls, rank_ok, code;
  MPIABI_Comm comm;
} eh_rec;

static void user_errhandler(MPIABI_Comm *comm, int *code, ...) {
  int r = -1;
  eh_rec.calls++;
  eh_rec.comm = *comm;
  eh_rec.code = *code;
  eh_rec.rank_ok = mpi.Comm_rank(*comm, &r) == mpi.SUCCESS && r == world_rank;
}

#define CHECK_CLASS(rc, cls)                                                                         \
  do {                                                                                               \
    int c_ = -1, rc__ = (rc);                                                                        \
    n_checks++;                                                                                      \
    if (rc__ == mpi.SUCCESS || mpi.Error_class(rc__, &c_) != mpi.SUCCESS || c_ != (cls))             \
      failf(__LINE__, "%s: error code %d has class %d, expected %s = %d", #rc, rc__, c_, #cls, (cls)); \
  } while (0)

static void test_errhandlers(void) {
  int n = world_size, me = world_rank, l = left(), r = right(), rc, cls = -1, len = -1;
  MPIABI_Comm w = mpi.COMM_WORLD;
  MPIABI_Errhandler eh = mpi.ERRHANDLER_NULL;
  char str[4096];
  int buf[4] = {me, 1, 2, 3}, rb[4], rb2[4];
  MPIABI_Status st, sts[2];
  MPIABI_Request rq[4];

  OK(mpi.Comm_get_errhandler(w, &eh));
  CHECK_EQ(eh, mpi.ERRORS_ARE_FATAL);
  OK(mpi.Errhandler_free(&eh));
  CHECK_EQ(eh, mpi.ERRHANDLER_NULL);
  OK(mpi.Comm_set_errhandler(w, mpi.ERRORS_RETURN));
  OK(mpi.Comm_get_errhandler(w, &eh));
  CHECK_EQ(eh, mpi.ERRORS_RETURN);
  OK(mpi.Errhandler_free(&eh));

  rc = mpi.Send(buf, 1, mpi.INT, n + 5, 0, w);
  CHECK_CLASS(rc, mpi.ERR_RANK);
  memset(str, 0, sizeof str);
  OK(mpi.Error_string(rc, str, &len));
  CHECK(len > 0 && (size_t)len == strlen(str), "Error_string(ERR_RANK code): len %d \"%s\"", len, str);
  CHECK_CLASS(mpi.Send(buf, 1, mpi.INT, r, -5, w), mpi.ERR_TAG);
  CHECK_CLASS(mpi.Send(buf, -1, mpi.INT, r, 0, w), mpi.ERR_COUNT);
  CHECK_CLASS(mpi.Send(buf, 1, mpi.DATATYPE_NULL, r, 0, w), mpi.ERR_TYPE);
  CHECK_CLASS(mpi.Bcast(buf, 1, mpi.INT, n + 1, w), mpi.ERR_ROOT);
  OK(mpi.Error_class(mpi.SUCCESS, &cls));
  CHECK_EQ(cls, mpi.SUCCESS);
  OK(mpi.Error_class(mpi.ERR_TRUNCATE, &cls));
  CHECK_EQ(cls, mpi.ERR_TRUNCATE);
  memset(str, 0, sizeof str);
  OK(mpi.Error_string(mpi.SUCCESS, str, &len));
  CHECK(len > 0 && (size_t)len == strlen(str), "Error_string(SUCCESS): len %d", len);

  /* Truncation: in Recv, and in Waitall (ERR_IN_STATUS, per-status errors). */
  OK(mpi.Isend(buf, 4, mpi.INT, r, 950, w, &rq[0]));
  status_preset(&st, 1);
  rc = mpi.Recv(rb, 2, mpi.INT, l, 950, w, &st);
  CHECK_CLASS(rc, mpi.ERR_TRUNCATE);
  OK(mpi.Wait(&rq[0], mpi.STATUS_IGNORE));
  rb2[0] = -1;
  OK(mpi.Irecv(rb2, 4, mpi.INT, l, 951, w, &rq[0]));
  OK(mpi.Irecv(rb, 2, mpi.INT, l, 952, w, &rq[1]));
  OK(mpi.Isend(buf, 4, mpi.INT, r, 951, w, &rq[2]));
  OK(mpi.Isend(buf, 4, mpi.INT, r, 952, w, &rq[3]));
  OK(mpi.Waitall(2, &rq[2], mpi.STATUSES_IGNORE));
  OK(mpi.Barrier(w));
  status_preset(sts, 2);
  rc = mpi.Waitall(2, rq, sts);
  CHECK_CLASS(rc, mpi.ERR_IN_STATUS);
  if (sts[0].MPI_ERROR == mpi.ERR_PENDING) {
    /* Allowed: the implementation stopped at the failed request. */
    status_preset(&st, 1);
    OK(mpi.Wait(&rq[0], &st));
    sts[0] = st;
    sts[0].MPI_ERROR = mpi.SUCCESS;
  }
  CHECK_EQ(sts[0].MPI_ERROR, mpi.SUCCESS);
  CHECK_EQ(sts[0].MPI_SOURCE, l);
  CHECK_EQ(sts[0].MPI_TAG, 951);
  CHECK_EQ(rb2[0], l); /* payload of the good receive */
  CHECK_CLASS(sts[1].MPI_ERROR, mpi.ERR_TRUNCATE);
  CHECK_EQ(sts[1].MPI_SOURCE, l);
  CHECK_EQ(sts[1].MPI_TAG, 952);
  OK(mpi.Comm_set_errhandler(w, mpi.ERRORS_ARE_FATAL));

  /* A user error handler sees an MPIABI communicator handle. */
  MPIABI_Errhandler ueh = mpi.ERRHANDLER_NULL, got = mpi.ERRHANDLER_NULL;
  MPIABI_Comm c;
  OK(mpi.Comm_create_errhandler(user_errhandler, &ueh));
  CHECK(ueh != mpi.ERRHANDLER_NULL, "Comm_create_errhandler gave ERRHANDLER_NULL");
  OK(mpi.Comm_dup(w, &c));
  OK(mpi.Comm_set_errhandler(c, ueh));
  OK(mpi.Comm_get_errhandler(c, &got));
  CHECK_EQ(got, ueh);
  OK(mpi.Errhandler_free(&got));
  memset(&eh_rec, 0, sizeof eh_rec);
  OK(mpi.Comm_call_errhandler(c, mpi.ERR_OTHER));
  CHECK_EQ(eh_rec.calls, 1);
  CHECK_EQ(eh_rec.comm, c);
  CHECK_EQ(eh_rec.code, mpi.ERR_OTHER);
  CHECK_EQ(eh_rec.rank_ok, 1);
  rc = mpi.Send(buf, 1, mpi.INT, n + 5, 0, c);
  CHECK_EQ(eh_rec.calls, 2);
  CHECK_EQ(eh_rec.comm, c);
  CHECK_EQ(eh_rec.rank_ok, 1);
  CHECK_CLASS(eh_rec.code, mpi.ERR_RANK);
  /* After a user handler returns, MPICH returns MPI_SUCCESS, others the code. */
  CHECK(rc == mpi.SUCCESS || rc == eh_rec.code, "Send after the user handler returned %d", rc);
  OK(mpi.Errhandler_free(&ueh));
  CHECK_EQ(ueh, mpi.ERRHANDLER_NULL);
  OK(mpi.Comm_free(&c));

  /* User-defined error classes, codes and strings. */
  int uclass = -1, ucode = -1, flag = -1;
  void *v = NULL;
  OK(mpi.Add_error_class(&uclass));
  OK(mpi.Add_error_code(uclass, &ucode));
  OK(mpi.Add_error_string(ucode, "conformance custom error"));
  OK(mpi.Error_class(ucode, &cls));
  CHECK_EQ(cls, uclass);
  memset(str, 0, sizeof str);
  OK(mpi.Error_string(ucode, str, &len));
  CHECK_STR(str, "conformance custom error");
  OK(mpi.Comm_get_attr(w, mpi.LASTUSEDCODE, &v, &flag));
  CHECK_EQ(flag, 1);
  /* MPICH reports the last class here, not the last code. */
  if (flag == 1 && v) CHECK(*(int *)v >= uclass, "MPI_LASTUSEDCODE %d < new class %d", *(int *)v, uclass);

  /* Files default to ERRORS_RETURN. */
  OK(mpi.File_get_errhandler(mpi.FILE_NULL, &eh));
  CHECK_EQ(eh, mpi.ERRORS_RETURN);
  OK(mpi.Errhandler_free(&eh));
}

/* ---- one-sided ---- */
static void test_rma(void) {
  int n = world_size, me = world_rank, l = left(), r = right(), flag = -1, res = -1;
  MPIABI_Comm w = mpi.COMM_WORLD;
  /* [0, n): put targets; [n, 2n): get sources; 2n: accumulate; 2n+1: ticket;
   * 2n+2: fetch-and-op; 2n+3: compare-and-swap. */
  int nslots = 2 * n + 4;
  int *buf = xmalloc(sizeof(int) * (size_t)nslots);
  for (int i = 0; i < n; i++) {
    buf[i] = -1;
    buf[n + i] = me * 100 + i;
  }
  buf[2 * n] = 0;
  buf[2 * n + 1] = 0;
  buf[2 * n + 2] = 0;
  buf[2 * n + 3] = -1;
  MPIABI_Win win = mpi.WIN_NULL;
  OK(mpi.Win_create(buf, (MPIABI_Aint)sizeof(int) * nslots, sizeof(int), mpi.INFO_NULL, w, &win));
  CHECK(win != mpi.WIN_NULL, "Win_create gave WIN_NULL");

  void *v = NULL;
  OK(mpi.Win_get_attr(win, mpi.WIN_BASE, &v, &flag));
  CHECK(flag == 1 && v == buf, "WIN_BASE: flag %d value %p, expected %p", flag, v, (void *)buf);
  OK(mpi.Win_get_attr(win, mpi.WIN_SIZE, &v, &flag));
  CHECK(flag == 1 && v && *(MPIABI_Aint *)v == (MPIABI_Aint)sizeof(int) * nslots, "WIN_SIZE wrong (flag %d)", flag);
  OK(mpi.Win_get_attr(win, mpi.WIN_DISP_UNIT, &v, &flag));
  CHECK(flag == 1 && v && *(int *)v == (int)sizeof(int), "WIN_DISP_UNIT wrong (flag %d)", flag);
  OK(mpi.Win_get_attr(win, mpi.WIN_CREATE_FLAVOR, &v, &flag));
  CHECK(flag == 1 && v && *(int *)v == mpi.WIN_FLAVOR_CREATE, "WIN_CREATE_FLAVOR is %d, expected %d",
        v ? *(int *)v : -1, mpi.WIN_FLAVOR_CREATE);
  OK(mpi.Win_get_attr(win, mpi.WIN_MODEL, &v, &flag));
  CHECK(flag == 1 && v && (*(int *)v == mpi.WIN_UNIFIED || *(int *)v == mpi.WIN_SEPARATE), "WIN_MODEL is %d",
        v ? *(int *)v : -1);
  MPIABI_Group wg, cg;
  OK(mpi.Win_get_group(win, &wg));
  OK(mpi.Comm_group(w, &cg));
  OK(mpi.Group_compare(wg, cg, &res));
  CHECK_EQ(res, mpi.IDENT);
  OK(mpi.Group_free(&wg));
  OK(mpi.Group_free(&cg));

  /* Fence epoch: Put, Get, Accumulate. */
  int pv = me * 7 + 1, gv = -1, av = me + 1;
  OK(mpi.Win_fence(0, win));
  OK(mpi.Put(&pv, 1, mpi.INT, r, me, 1, mpi.INT, win));
  OK(mpi.Get(&gv, 1, mpi.INT, r, n + me, 1, mpi.INT, win));
  OK(mpi.Accumulate(&av, 1, mpi.INT, 0, 2 * n, 1, mpi.INT, mpi.SUM, win));
  OK(mpi.Win_fence(0, win));
  for (int i = 0; i < n; i++) CHECK_EQ(buf[i], i == l ? l * 7 + 1 : -1);
  CHECK_EQ(gv, r * 100 + me);
  if (me == 0) CHECK_EQ(buf[2 * n], n * (n + 1) / 2);
  OK(mpi.Win_fence(0, win));

  /* Exclusive lock: read-modify-write a ticket counter at rank 0. */
  int ticket = -1, next;
  OK(mpi.Win_lock(mpi.LOCK_EXCLUSIVE, 0, 0, win));
  OK(mpi.Get(&ticket, 1, mpi.INT, 0, 2 * n + 1, 1, mpi.INT, win));
  OK(mpi.Win_flush(0, win));
  next = ticket + 1;
  OK(mpi.Put(&next, 1, mpi.INT, 0, 2 * n + 1, 1, mpi.INT, win));
  OK(mpi.Win_unlock(0, win));

  /* Shared locks: fetch-and-op, compare-and-swap. */
  int one = 1, fetched = -1, cas_new = me, cas_cmp = -1, cas_old = -7;
  OK(mpi.Win_lock(mpi.LOCK_SHARED, 0, 0, win));
  OK(mpi.Fetch_and_op(&one, &fetched, mpi.INT, 0, 2 * n + 2, mpi.SUM, win));
  OK(mpi.Compare_and_swap(&cas_new, &cas_cmp, &cas_old, mpi.INT, 0, 2 * n + 3, win));
  OK(mpi.Win_unlock(0, win));
  OK(mpi.Barrier(w));

  int *all = xmalloc(sizeof(int) * 3 * (size_t)n), mine[3] = {ticket, fetched, cas_old};
  OK(mpi.Allgather(mine, 3, mpi.INT, all, 3, mpi.INT, w));
  int *seen_t = xmalloc(sizeof(int) * (size_t)n), *seen_f = xmalloc(sizeof(int) * (size_t)n);
  int winners = 0, winner = -1;
  for (int i = 0; i < n; i++) {
    int t = all[3 * i], f = all[3 * i + 1], c = all[3 * i + 2];
    CHECK(t >= 0 && t < n && !seen_t[t], "exclusive-lock tickets not a permutation: rank %d got %d", i, t);
    CHECK(f >= 0 && f < n && !seen_f[f], "Fetch_and_op results not a permutation: rank %d got %d", i, f);
    if (t >= 0 && t < n) seen_t[t] = 1;
    if (f >= 0 && f < n) seen_f[f] = 1;
    if (c == -1) {
      winners++;
      winner = i;
    }
  }
  CHECK_EQ(winners, 1);
  for (int i = 0; i < n; i++)
    if (all[3 * i + 2] != -1) CHECK_EQ(all[3 * i + 2], winner);
  int final[3] = {-1, -1, -1};
  OK(mpi.Win_lock(mpi.LOCK_SHARED, 0, 0, win));
  OK(mpi.Get(final, 3, mpi.INT, 0, 2 * n + 1, 3, mpi.INT, win));
  OK(mpi.Win_unlock(0, win));
  CHECK_EQ(final[0], n);
  CHECK_EQ(final[1], n);
  CHECK_EQ(final[2], winner);

  /* Shared lock on my right neighbour: read its get-source slots. */
  int *rr = xmalloc(sizeof(int) * (size_t)n);
  OK(mpi.Win_lock(mpi.LOCK_SHARED, r, 0, win));
  OK(mpi.Get(rr, n, mpi.INT, r, n, n, mpi.INT, win));
  OK(mpi.Win_unlock(r, win));
  for (int i = 0; i < n; i++) CHECK_EQ(rr[i], r * 100 + i);
  OK(mpi.Barrier(w));

  /* A user window error handler sees the MPIABI window handle. */
  MPIABI_Errhandler weh = mpi.ERRHANDLER_NULL;
  OK(mpi.Win_create_errhandler(user_win_errhandler, &weh));
  OK(mpi.Win_set_errhandler(win, weh));
  memset(&obj_eh, 0, sizeof obj_eh);
  OK(mpi.Win_call_errhandler(win, mpi.ERR_OTHER));
  CHECK_EQ(obj_eh.calls, 1);
  CHECK_EQ(obj_eh.handle, win);
  CHECK_EQ(obj_eh.code, mpi.ERR_OTHER);
  OK(mpi.Errhandler_free(&weh));
  /* Window attributes: the delete callback sees the window handle. */
  int wkv = -1;
  static char wval;
  memset(&obj_attr, 0, sizeof obj_attr);
  OK(mpi.Win_create_keyval(win_attr_copy, win_attr_delete, &wkv, &obj_attr_extra));
  OK(mpi.Win_set_attr(win, wkv, &wval));
  OK(mpi.Win_get_attr(win, wkv, &v, &flag));
  CHECK(flag == 1 && v == &wval, "Win_get_attr gave flag %d value %p", flag, v);
  OK(mpi.Win_delete_attr(win, wkv));
  CHECK_EQ(obj_attr.delete_calls, 1);
  CHECK_EQ(obj_attr.handle, win);
  CHECK(obj_attr.val == &wval, "window delete callback got %p", obj_attr.val);
  OK(mpi.Win_set_attr(win, wkv, &wval));
  MPIABI_Win win_handle = win;
  OK(mpi.Win_free(&win));
  CHECK_EQ(obj_attr.delete_calls, 2);
  CHECK_EQ(obj_attr.handle, win_handle);
  CHECK_EQ(obj_attr.copy_calls, 0);
  CHECK(obj_attr.bad == 0, "window attribute callbacks saw wrong arguments (mask 0x%x)", obj_attr.bad);
  OK(mpi.Win_free_keyval(&wkv));
  CHECK_EQ(wkv, mpi.KEYVAL_INVALID);
  CHECK_EQ(win, mpi.WIN_NULL);

  /* Win_allocate. */
  int *base = NULL;
  MPIABI_Win win2 = mpi.WIN_NULL;
  OK(mpi.Win_allocate(4 * sizeof(int), sizeof(int), mpi.INFO_NULL, w, &base, &win2));
  CHECK(base != NULL, "Win_allocate gave a NULL base");
  if (base) {
    for (int i = 0; i < 4; i++) base[i] = -1;
    OK(mpi.Win_get_attr(win2, mpi.WIN_CREATE_FLAVOR, &v, &flag));
    CHECK(flag == 1 && v && *(int *)v == mpi.WIN_FLAVOR_ALLOCATE, "Win_allocate flavor %d", v ? *(int *)v : -1);
    OK(mpi.Win_fence(0, win2));
    int vals[2] = {me, me * me};
    OK(mpi.Put(vals, 2, mpi.INT, r, 1, 2, mpi.INT, win2));
    OK(mpi.Win_fence(0, win2));
    CHECK(base[0] == -1 && base[1] == l && base[2] == l * l && base[3] == -1, "Win_allocate put gave %d %d %d %d",
          base[0], base[1], base[2], base[3]);
  }
  OK(mpi.Win_free(&win2));
  free(buf); free(all); free(seen_t); free(seen_f); free(rr);
}

/* ---- MPI-IO ---- */
static const char *scratch_dir = "/tmp";

static void test_io(void) {
  int n = world_size, me = world_rank, l = left(), cnt = -1;
  MPIABI_Comm w = mpi.COMM_WORLD;
  char path[4096];
  snprintf(path, sizeof path, "%s/conformance-io-%d.dat", scratch_dir, n);
  MPIABI_File fh = mpi.FILE_NULL;
  MPIABI_Status st;
  int amode = mpi.MODE_CREATE | mpi.MODE_RDWR;
  OK(mpi.File_open(w, path, amode, mpi.INFO_NULL, &fh));
  CHECK(fh != mpi.FILE_NULL, "File_open gave FILE_NULL");
  int got_amode = -1;
  OK(mpi.File_get_amode(fh, &got_amode));
  CHECK_EQ(got_amode, amode);
  OK(mpi.File_set_size(fh, 0));
  /* The truncation conflicts with the writes below: sync-barrier-sync. */
  OK(mpi.File_sync(fh));
  OK(mpi.Barrier(w));
  OK(mpi.File_sync(fh));

  /* Explicit offsets. */
  int wb[4], rb[8];
  for (int j = 0; j < 4; j++) wb[j] = me * 1000 + j;
  status_preset(&st, 1);
  OK(mpi.File_write_at(fh, (MPIABI_Offset)me * 16, wb, 4, mpi.INT, &st));
  OK(mpi.Get_count(&st, mpi.INT, &cnt));
  CHECK_EQ(cnt, 4);
  OK(mpi.File_sync(fh));
  OK(mpi.Barrier(w));
  OK(mpi.File_sync(fh));
  memset(rb, 0xff, sizeof rb);
  status_preset(&st, 1);
  OK(mpi.File_read_at(fh, (MPIABI_Offset)l * 16, rb, 4, mpi.INT, &st));
  OK(mpi.Get_count(&st, mpi.INT, &cnt));
  CHECK_EQ(cnt, 4);
  for (int j = 0; j < 4; j++) CHECK_EQ(rb[j], l * 1000 + j);
  MPIABI_Offset fsize = -1;
  OK(mpi.File_get_size(fh, &fsize));
  CHECK_EQ(fsize, 16 * n);
  status_preset(&st, 1);
  OK(mpi.File_read_at(fh, (MPIABI_Offset)n * 16, rb, 4, mpi.INT, &st)); /* at EOF */
  OK(mpi.Get_count(&st, mpi.INT, &cnt));
  CHECK_EQ(cnt, 0);
  OK(mpi.Barrier(w)); /* everyone has checked the size before it grows */

  /* Nonblocking explicit offsets. */
  MPIABI_Request req;
  int nb[2] = {-me, me + 5}, nr[2] = {0, 0};
  OK(mpi.File_iwrite_at(fh, 512 + (MPIABI_Offset)me * 8, nb, 2, mpi.INT, &req));
  status_preset(&st, 1);
  OK(mpi.Wait(&req, &st));
  OK(mpi.Get_count(&st, mpi.INT, &cnt));
  CHECK_EQ(cnt, 2);
  OK(mpi.File_iread_at(fh, 512 + (MPIABI_Offset)me * 8, nr, 2, mpi.INT, &req));
  status_preset(&st, 1);
  OK(mpi.Wait(&req, &st));
  OK(mpi.Get_count(&st, mpi.INT, &cnt));
  CHECK_EQ(cnt, 2);
  CHECK(nr[0] == -me && nr[1] == me + 5, "File_iread_at gave %d %d", nr[0], nr[1]);

  /* A strided view: rank me owns ints me, me+n, me+2n after byte 1024. */
  MPIABI_Datatype ftype, etype = mpi.DATATYPE_NULL, gtype = mpi.DATATYPE_NULL;
  OK(mpi.Type_vector(3, 1, n, mpi.INT, &ftype));
  OK(mpi.Type_commit(&ftype));
  OK(mpi.File_set_view(fh, 1024 + (MPIABI_Offset)me * 4, mpi.INT, ftype, "native", mpi.INFO_NULL));
  MPIABI_Offset disp = -1;
  char rep[256];
  memset(rep, 0, sizeof rep);
  OK(mpi.File_get_view(fh, &disp, &etype, &gtype, rep));
  CHECK_EQ(disp, 1024 + me * 4);
  CHECK_EQ(etype, mpi.INT);
  CHECK_STR(rep, "native");
  /* The filetype returned is a new type: the vector, or (ROMIO) dups of it,
   * or (MPICH's standard-ABI build) a contiguous of one of it. */
  int ni = -1, na = -1, nd = -1, comb = -1, vints[3] = {0, 0, 0};
  MPIABI_Aint noaddr[1];
  MPIABI_Datatype inner = mpi.DATATYPE_NULL;
  for (int depth = 0; depth < 4; depth++) {
    OK(mpi.Type_get_envelope(gtype, &ni, &na, &nd, &comb));
    if (comb != mpi.COMBINER_DUP && !(comb == mpi.COMBINER_CONTIGUOUS && ni == 1)) break;
    OK(mpi.Type_get_contents(gtype, ni, 0, 1, vints, noaddr, &inner));
    CHECK(comb == mpi.COMBINER_DUP || vints[0] == 1, "File_get_view filetype is contiguous(%d)", vints[0]);
    OK(mpi.Type_free(&gtype));
    gtype = inner;
  }
  check_envelope(__LINE__, gtype, 3, 0, 1, mpi.COMBINER_VECTOR);
  OK(mpi.Type_get_contents(gtype, 3, 0, 1, vints, noaddr, &inner));
  CHECK(vints[0] == 3 && vints[1] == 1 && vints[2] == n, "File_get_view filetype is vector(%d, %d, %d)", vints[0],
        vints[1], vints[2]);
  CHECK_EQ(inner, mpi.INT);
  if (gtype != mpi.DATATYPE_NULL) OK(mpi.Type_free(&gtype));
  int vb[3] = {me * 100, me * 100 + 1, me * 100 + 2}, vr[3] = {-1, -1, -1};
  status_preset(&st, 1);
  OK(mpi.File_write_all(fh, vb, 3, mpi.INT, &st));
  OK(mpi.Get_count(&st, mpi.INT, &cnt));
  CHECK_EQ(cnt, 3);
  OK(mpi.File_sync(fh));
  OK(mpi.Barrier(w));
  OK(mpi.File_sync(fh));
  OK(mpi.File_seek(fh, 0, mpi.SEEK_SET_));
  status_preset(&st, 1);
  OK(mpi.File_read_all(fh, vr, 3, mpi.INT, &st));
  OK(mpi.Get_count(&st, mpi.INT, &cnt));
  CHECK_EQ(cnt, 3);
  for (int j = 0; j < 3; j++) CHECK_EQ(vr[j], me * 100 + j);
  MPIABI_Offset pos = -1;
  OK(mpi.File_get_position(fh, &pos));
  CHECK_EQ(pos, 3);
  /* Back to a byte view: the interleaving is visible to everyone. */
  OK(mpi.File_set_view(fh, 0, mpi.BYTE, mpi.BYTE, "native", mpi.INFO_NULL));
  int *flat = xmalloc(sizeof(int) * 3 * (size_t)n);
  status_preset(&st, 1);
  OK(mpi.File_read_at(fh, 1024, flat, 3 * n, mpi.INT, &st));
  OK(mpi.Get_count(&st, mpi.INT, &cnt));
  CHECK_EQ(cnt, 3 * n);
  for (int j = 0; j < 3; j++)
    for (int i = 0; i < n; i++) CHECK_EQ(flat[j * n + i], i * 100 + j);
  free(flat);
  OK(mpi.Type_free(&ftype));

  /* A user file error handler sees the MPIABI file handle. */
  MPIABI_Errhandler feh = mpi.ERRHANDLER_NULL;
  OK(mpi.File_create_errhandler(user_file_errhandler, &feh));
  OK(mpi.File_set_errhandler(fh, feh));
  memset(&obj_eh, 0, sizeof obj_eh);
  OK(mpi.File_call_errhandler(fh, mpi.ERR_OTHER));
  CHECK_EQ(obj_eh.calls, 1);
  CHECK_EQ(obj_eh.handle, fh);
  CHECK_EQ(obj_eh.code, mpi.ERR_OTHER);
  OK(mpi.File_set_errhandler(fh, mpi.ERRORS_RETURN));
  OK(mpi.Errhandler_free(&feh));
  OK(mpi.File_close(&fh));
  CHECK_EQ(fh, mpi.FILE_NULL);

  OK(mpi.Barrier(w));
  if (me == 0) OK(mpi.File_delete(path, mpi.INFO_NULL));
  OK(mpi.Barrier(w));
  /* Files default to ERRORS_RETURN: opening the deleted file fails cleanly. */
  int rc = mpi.File_open(mpi.COMM_SELF, path, mpi.MODE_RDONLY, mpi.INFO_NULL, &fh);
  CHECK_CLASS(rc, mpi.ERR_NO_SUCH_FILE);
  if (rc == mpi.SUCCESS) OK(mpi.File_close(&fh));
}

/* ---- generalized requests ---- */
static struct {
  int query_calls, free_calls, cancel_calls, cancel_complete, cancelled, bad;
} gr;
static int gr_extra;

static int gr_query(void *extra, MPIABI_Status *status) {
  gr.query_calls++;
  if (extra != &gr_extra) gr.bad |= 1;
  status->MPI_SOURCE = 3;
  status->MPI_TAG = 42;
  status->MPI_ERROR = mpi.SUCCESS;
  if (mpi.Status_set_elements(status, mpi.INT, 5) != mpi.SUCCESS) gr.bad |= 2;
  if (mpi.Status_set_cancelled(status, gr.cancelled) != mpi.SUCCESS) gr.bad |= 4;
  return mpi.SUCCESS;
}

static int gr_free(void *extra) {
  gr.free_calls++;
  if (extra != &gr_extra) gr.bad |= 8;
  return mpi.SUCCESS;
}

static int gr_cancel(void *extra, int complete) {
  gr.cancel_calls++;
  gr.cancel_complete = complete;
  gr.cancelled = 1;
  if (extra != &gr_extra) gr.bad |= 16;
  return mpi.SUCCESS;
}

static void test_grequest(void) {
  MPIABI_Request req = mpi.REQUEST_NULL;
  MPIABI_Status st;
  int flag = -1, cnt = -1;
  memset(&gr, 0, sizeof gr);
  OK(mpi.Grequest_start(gr_query, gr_free, gr_cancel, &gr_extra, &req));
  CHECK(req != mpi.REQUEST_NULL, "Grequest_start gave REQUEST_NULL");
  OK(mpi.Test(&req, &flag, mpi.STATUS_IGNORE));
  CHECK_EQ(flag, 0);
  OK(mpi.Grequest_complete(req));
  status_preset(&st, 1);
  OK(mpi.Wait(&req, &st));
  CHECK_EQ(req, mpi.REQUEST_NULL);
  CHECK_EQ(st.MPI_SOURCE, 3);
  CHECK_EQ(st.MPI_TAG, 42);
  CHECK_EQ(st.MPI_ERROR == mpi.SUCCESS || st.MPI_ERROR == ERROR_SENTINEL, 1);
  OK(mpi.Get_count(&st, mpi.INT, &cnt));
  CHECK_EQ(cnt, 5);
  OK(mpi.Test_cancelled(&st, &flag));
  CHECK_EQ(flag, 0);
  CHECK(gr.query_calls >= 1, "query callback not called");
  CHECK_EQ(gr.free_calls, 1);
  CHECK_EQ(gr.cancel_calls, 0);

  /* Cancel before completion. */
  memset(&gr, 0, sizeof gr);
  OK(mpi.Grequest_start(gr_query, gr_free, gr_cancel, &gr_extra, &req));
  OK(mpi.Cancel(&req));
  CHECK_EQ(gr.cancel_calls, 1);
  CHECK_EQ(gr.cancel_complete, 0);
  OK(mpi.Grequest_complete(req));
  status_preset(&st, 1);
  OK(mpi.Wait(&req, &st));
  OK(mpi.Test_cancelled(&st, &flag));
  CHECK_EQ(flag, 1);
  CHECK_EQ(gr.free_calls, 1);

  /* In an array with a point-to-point request. */
  memset(&gr, 0, sizeof gr);
  MPIABI_Request reqs[3];
  MPIABI_Status sts[3];
  int v = world_rank, rv = -1;
  OK(mpi.Grequest_start(gr_query, gr_free, gr_cancel, &gr_extra, &reqs[0]));
  OK(mpi.Irecv(&rv, 1, mpi.INT, left(), 990, mpi.COMM_WORLD, &reqs[1]));
  OK(mpi.Isend(&v, 1, mpi.INT, right(), 990, mpi.COMM_WORLD, &reqs[2]));
  OK(mpi.Grequest_complete(reqs[0]));
  status_preset(sts, 3);
  OK(mpi.Waitall(3, reqs, sts));
  CHECK_EQ(sts[0].MPI_SOURCE, 3);
  CHECK_EQ(sts[0].MPI_TAG, 42);
  OK(mpi.Get_count(&sts[0], mpi.INT, &cnt));
  CHECK_EQ(cnt, 5);
  CHECK_STATUS(sts[1], left(), 990, mpi.INT, 1);
  CHECK_EQ(rv, left());
  CHECK_EQ(gr.free_calls, 1);
  CHECK(gr.bad == 0, "generalized-request callbacks saw wrong arguments or failed (mask 0x%x)", gr.bad);
}

/* ---- threads (MPI_THREAD_MULTIPLE) ---- */
struct thread_arg {
  MPIABI_Comm comm;
  int id, errors;
};

static void *thread_body(void *p) {
  struct thread_arg *a = p;
  int l = left(), r = right();
  for (int it = 0; it < 50; it++) {
    int s[2] = {world_rank, it * 10 + a->id}, g[2] = {-1, -1};
    MPIABI_Status st;
    if (mpi.Sendrecv(s, 2, mpi.INT, r, it, g, 2, mpi.INT, l, it, a->comm, &st) != mpi.SUCCESS) a->errors++;
    if (g[0] != l || g[1] != it * 10 + a->id || st.MPI_SOURCE != l || st.MPI_TAG != it) a->errors++;
  }
  return NULL;
}

static void test_threads(void) {
  if (provided_level != mpi.THREAD_MULTIPLE) {
    CHECK(0, "MPI_THREAD_MULTIPLE not provided; thread test not run");
    return;
  }
  struct thread_arg args[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    args[i].id = i;
    args[i].errors = 0;
    OK(mpi.Comm_dup(mpi.COMM_WORLD, &args[i].comm));
  }
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, thread_body, &args[i]) == 0, "pthread_create");
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 2; i++) {
    CHECK(args[i].errors == 0, "thread %d saw %d bad Sendrecv results", i, args[i].errors);
    OK(mpi.Comm_free(&args[i].comm));
  }
}

/* ------------------------------------------------------------------------ */

static int group_selected(const char *name) {
  const char *filter = getenv("CONFORMANCE_GROUPS");
  if (!filter || !*filter) return 1;
  size_t len = strlen(name);
  for (const char *p = filter; *p;) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == len && strncmp(p, name, len) == 0) return 1;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

static void run_group(const char *name, void (*fn)(void)) {
  if (!group_selected(name)) return;
  current_group = name;
  group_failures = 0;
  alarm(60);
  fn();
  int any = 0;
  int rc = mpi.Allreduce(&group_failures, &any, 1, mpi.INT, mpi.SUM, mpi.COMM_WORLD);
  if (rc != mpi.SUCCESS) {
    /* We cannot even agree on the result: stop everything. */
    printf("FAIL %s: rank %d: Allreduce of the group result returned %d\n", name, world_rank, rc);
    fflush(stdout);
    mpi.Abort(mpi.COMM_WORLD, 1);
    _exit(1);
  }
  if (any) total_failures++;
  if (world_rank == 0) {
    if (any)
      printf("FAIL %s: %d failed checks (details above)\n", name, any);
    else
      printf("PASS %s\n", name);
    fflush(stdout);
  }
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) {
    fprintf(stderr, "usage: %s <wrapper.so> [scratch-dir]\n", argv[0]);
    return 2;
  }
  if (argc > 2) scratch_dir = argv[2];
  load_wrapper(argv[1]);
  signal(SIGALRM, on_alarm);
  alarm(60);

  current_group = "init";
  int rc = mpi.Initialized(&initialized_before_init);
  rc = rc == mpi.SUCCESS ? mpi.Init_thread(&argc, &argv, mpi.THREAD_MULTIPLE, &provided_level) : rc;
  if (rc != mpi.SUCCESS) {
    printf("FAIL init: Initialized/Init_thread returned %d\n", rc);
    return 1;
  }
  if (mpi.Comm_rank(mpi.COMM_WORLD, &world_rank) != mpi.SUCCESS ||
      mpi.Comm_size(mpi.COMM_WORLD, &world_size) != mpi.SUCCESS) {
    printf("FAIL init: Comm_rank/Comm_size failed\n");
    return 1;
  }

  run_group("init", test_init);
  run_group("misc", test_misc);
  run_group("constants", test_constants);
  run_group("p2p", test_p2p);
  run_group("probe", test_probe);
  run_group("collectives", test_collectives);
  run_group("nbcollectives", test_nbcollectives);
  run_group("requests", test_requests);
  run_group("persistent", test_persistent);
  run_group("datatypes", test_datatypes);
  run_group("comms", test_comms);
  run_group("intercomm", test_intercomm);
  run_group("topology", test_topology);
  run_group("userop", test_userop);
  run_group("recorded_p2p", test_recorded_p2p);
  run_group("info", test_info);
  run_group("attributes", test_attributes);
  run_group("errhandlers", test_errhandlers);
  run_group("rma", test_rma);
  run_group("io", test_io);
  run_group("grequest", test_grequest);
  run_group("threads", test_threads);

  current_group = "finalize";
  alarm(60);
  long long mine = n_checks, total = 0;
  if (mpi.Allreduce(&mine, &total, 1, mpi.LONG_LONG, mpi.SUM, mpi.COMM_WORLD) != mpi.SUCCESS) total_failures++;
  group_failures = 0;
  OK(mpi.Finalize());
  int flag = -1;
  OK(mpi.Finalized(&flag));
  CHECK_EQ(flag, 1);
  flag = -1;
  OK(mpi.Initialized(&flag));
  CHECK_EQ(flag, 1);
  if (group_failures) total_failures++;
  if (total_failures) {
    if (world_rank == 0) printf("FAIL conformance: %d check groups failed\n", total_failures);
    return 1;
  }
  /* The checks after MPI_Finalize are the same on every rank. */
  if (world_rank == 0)
    printf("conformance: %lld checks passed\n", total + (long long)world_size * (n_checks - mine));
  return 0;
}

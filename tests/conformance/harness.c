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
 * Set CONFORMANCE_GROUPS=p2p,rma,... to run only some groups (debugging).
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

#define MPI_FUNCTIONS(X)                                                                        \
  X(Abort) X(Accumulate) X(Add_error_class) X(Add_error_code) X(Add_error_string) X(Aint_add)   \
  X(Aint_diff) X(Allgather) X(Allgatherv) X(Allreduce) X(Alltoall) X(Alltoallv) X(Alltoallw)    \
  X(Barrier) X(Bcast) X(Bsend) X(Buffer_attach) X(Buffer_detach) X(Cancel) X(Cart_coords)       \
  X(Cart_create) X(Cart_shift) X(Comm_c2f) X(Comm_call_errhandler) X(Comm_compare)             \
  X(Comm_create) X(Comm_create_errhandler) X(Comm_create_group) X(Comm_create_keyval)          \
  X(Comm_delete_attr) X(Comm_dup) X(Comm_f2c) X(Comm_free) X(Comm_free_keyval)                 \
  X(Comm_get_attr) X(Comm_get_errhandler) X(Comm_get_name) X(Comm_group) X(Comm_idup)          \
  X(Comm_rank) X(Comm_remote_size) X(Comm_set_attr) X(Comm_set_errhandler) X(Comm_set_name)    \
  X(Comm_size) X(Comm_split) X(Comm_split_type) X(Comm_test_inter) X(Compare_and_swap)         \
  X(Dims_create) X(Errhandler_free) X(Error_class) X(Error_string) X(Exscan) X(Fetch_and_op)   \
  X(File_close) X(File_delete) X(File_get_amode) X(File_get_errhandler) X(File_get_position)   \
  X(File_get_size) X(File_get_view) X(File_iread_at) X(File_iwrite_at) X(File_open)            \
  X(File_read_all) X(File_read_at) X(File_seek) X(File_set_size) X(File_set_view) X(File_sync) \
  X(File_write_all) X(File_write_at) X(Finalize) X(Finalized) X(Free_mem) X(Alloc_mem)         \
  X(Gather) X(Gatherv) X(Get) X(Get_address) X(Get_count) X(Get_elements) X(Get_library_version) \
  X(Get_processor_name) X(Get_version) X(Grequest_complete) X(Grequest_start)                  \
  X(Group_compare) X(Group_difference) X(Group_excl) X(Group_free) X(Group_incl)               \
  X(Group_intersection) X(Group_range_incl) X(Group_rank) X(Group_size)                        \
  X(Group_translate_ranks) X(Group_union) X(Iallgather) X(Iallgatherv) X(Iallreduce)           \
  X(Ialltoall) X(Ialltoallv) X(Ialltoallw) X(Ibarrier) X(Ibcast) X(Iexscan) X(Igather)         \
  X(Igatherv) X(Improbe) X(Imrecv) X(Info_create) X(Info_delete) X(Info_dup) X(Info_free)      \
  X(Info_get) X(Info_get_nkeys) X(Info_get_nthkey) X(Info_get_valuelen) X(Info_set)            \
  X(Init_thread) X(Initialized) X(Intercomm_create) X(Intercomm_merge) X(Iprobe) X(Irecv)      \
  X(Ireduce) X(Ireduce_scatter) X(Ireduce_scatter_block) X(Is_thread_main) X(Iscan)            \
  X(Iscatter) X(Iscatterv) X(Isend) X(Issend) X(Mprobe) X(Mrecv) X(Op_commutative)             \
  X(Op_create) X(Op_free) X(Pack) X(Pack_external) X(Pack_external_size) X(Pack_size)          \
  X(Probe) X(Put) X(Query_thread) X(Recv) X(Recv_init) X(Reduce) X(Reduce_local)               \
  X(Reduce_scatter) X(Reduce_scatter_block) X(Request_free) X(Request_get_status) X(Rsend)     \
  X(Scan) X(Scatter) X(Scatterv) X(Send) X(Send_init) X(Sendrecv) X(Sendrecv_replace)          \
  X(Ssend) X(Start) X(Startall) X(Status_set_cancelled) X(Status_set_elements) X(Test)         \
  X(Test_cancelled) X(Testall) X(Testany) X(Testsome) X(Topo_test) X(Type_c2f) X(Type_commit)  \
  X(Type_contiguous) X(Type_create_keyval) X(Type_create_resized) X(Type_create_struct)       \
  X(Type_create_subarray) X(Type_dup) X(Type_f2c) X(Type_free) X(Type_free_keyval)             \
  X(Type_get_attr) X(Type_get_contents) X(Type_get_envelope) X(Type_get_extent)                \
  X(Type_get_name) X(Type_get_true_extent) X(Type_indexed) X(Type_set_attr) X(Type_size)       \
  X(Type_vector) X(Unpack) X(Wait) X(Waitall) X(Waitany) X(Waitsome) X(Win_allocate)           \
  X(Win_create) X(Win_fence) X(Win_flush) X(Win_free) X(Win_get_attr) X(Win_get_group)         \
  X(Win_lock) X(Win_unlock) X(Wtick) X(Wtime)

/* X(field in struct mpi, symbol suffix): MPIABI_2INT cannot be a field name. */
#define MPI_CONSTANTS(X)                                                                         \
  X(TWOINT, 2INT) X(AINT, AINT) X(ANY_SOURCE, ANY_SOURCE) X(ANY_TAG, ANY_TAG) X(BAND, BAND)      \
  X(BOR, BOR) X(BOTTOM, BOTTOM) X(BSEND_OVERHEAD, BSEND_OVERHEAD) X(BXOR, BXOR) X(BYTE, BYTE)     \
  X(CART, CART) X(CHAR, CHAR) X(COMBINER_CONTIGUOUS, COMBINER_CONTIGUOUS)                        \
  X(COMBINER_DUP, COMBINER_DUP) X(COMBINER_INDEXED, COMBINER_INDEXED)                            \
  X(COMBINER_NAMED, COMBINER_NAMED) X(COMBINER_RESIZED, COMBINER_RESIZED)                        \
  X(COMBINER_STRUCT, COMBINER_STRUCT) X(COMBINER_SUBARRAY, COMBINER_SUBARRAY)                    \
  X(COMBINER_VECTOR, COMBINER_VECTOR) X(COMM_DUP_FN, COMM_DUP_FN) X(COMM_NULL, COMM_NULL)        \
  X(COMM_NULL_COPY_FN, COMM_NULL_COPY_FN) X(COMM_NULL_DELETE_FN, COMM_NULL_DELETE_FN)            \
  X(COMM_SELF, COMM_SELF) X(COMM_TYPE_SHARED, COMM_TYPE_SHARED) X(COMM_WORLD, COMM_WORLD)        \
  X(CONGRUENT, CONGRUENT) X(COUNT, COUNT) X(C_BOOL, C_BOOL) X(C_DOUBLE_COMPLEX, C_DOUBLE_COMPLEX) \
  X(C_FLOAT_COMPLEX, C_FLOAT_COMPLEX) X(DATATYPE_NULL, DATATYPE_NULL) X(DOUBLE, DOUBLE)          \
  X(DOUBLE_INT, DOUBLE_INT) X(ERRHANDLER_NULL, ERRHANDLER_NULL)                                  \
  X(ERRORS_ARE_FATAL, ERRORS_ARE_FATAL) X(ERRORS_RETURN, ERRORS_RETURN) X(ERR_ARG, ERR_ARG)      \
  X(ERR_COUNT, ERR_COUNT) X(ERR_IN_STATUS, ERR_IN_STATUS) X(ERR_LASTCODE, ERR_LASTCODE)          \
  X(ERR_NO_SUCH_FILE, ERR_NO_SUCH_FILE) X(ERR_OTHER, ERR_OTHER) X(ERR_RANK, ERR_RANK)            \
  X(ERR_ROOT, ERR_ROOT) X(ERR_TAG, ERR_TAG) X(ERR_TRUNCATE, ERR_TRUNCATE) X(ERR_TYPE, ERR_TYPE)  \
  X(FILE_NULL, FILE_NULL) X(FLOAT, FLOAT) X(FLOAT_INT, FLOAT_INT) X(GROUP_EMPTY, GROUP_EMPTY)    \
  X(GROUP_NULL, GROUP_NULL) X(IDENT, IDENT) X(INFO_ENV, INFO_ENV) X(INFO_NULL, INFO_NULL)        \
  X(INT, INT) X(INT16_T, INT16_T) X(INT32_T, INT32_T) X(INT64_T, INT64_T) X(INT8_T, INT8_T)      \
  X(IN_PLACE, IN_PLACE) X(KEYVAL_INVALID, KEYVAL_INVALID) X(LAND, LAND)                          \
  X(LASTUSEDCODE, LASTUSEDCODE) X(LOCK_EXCLUSIVE, LOCK_EXCLUSIVE) X(LOCK_SHARED, LOCK_SHARED)    \
  X(LONG, LONG) X(LONG_DOUBLE, LONG_DOUBLE) X(LONG_INT, LONG_INT) X(LONG_LONG, LONG_LONG)        \
  X(LOR, LOR) X(LXOR, LXOR) X(MAX, MAX) X(MAXLOC, MAXLOC) X(MESSAGE_NO_PROC, MESSAGE_NO_PROC)    \
  X(MESSAGE_NULL, MESSAGE_NULL) X(MIN, MIN) X(MINLOC, MINLOC) X(MODE_CREATE, MODE_CREATE)        \
  X(MODE_RDONLY, MODE_RDONLY) X(MODE_RDWR, MODE_RDWR) X(OFFSET, OFFSET) X(OP_NULL, OP_NULL)      \
  X(ORDER_C, ORDER_C) X(ORDER_FORTRAN, ORDER_FORTRAN) X(COMBINER_HVECTOR, COMBINER_HVECTOR)      \
  X(PACKED, PACKED) X(PROC_NULL, PROC_NULL) X(PROD, PROD) X(REQUEST_NULL, REQUEST_NULL)          \
  X(SEEK_SET, SEEK_SET) X(SHORT, SHORT) X(SHORT_INT, SHORT_INT) X(SIGNED_CHAR, SIGNED_CHAR)      \
  X(SIMILAR, SIMILAR) X(STATUSES_IGNORE, STATUSES_IGNORE) X(STATUS_IGNORE, STATUS_IGNORE)        \
  X(SUCCESS, SUCCESS) X(SUM, SUM) X(TAG_UB, TAG_UB) X(THREAD_FUNNELED, THREAD_FUNNELED)          \
  X(THREAD_MULTIPLE, THREAD_MULTIPLE) X(THREAD_SERIALIZED, THREAD_SERIALIZED)                    \
  X(THREAD_SINGLE, THREAD_SINGLE) X(TYPECLASS_INTEGER, TYPECLASS_INTEGER)                        \
  X(TYPE_DUP_FN, TYPE_DUP_FN) X(TYPE_NULL_DELETE_FN, TYPE_NULL_DELETE_FN) X(UINT16_T, UINT16_T)  \
  X(UINT64_T, UINT64_T) X(UINT8_T, UINT8_T) X(UNDEFINED, UNDEFINED) X(UNEQUAL, UNEQUAL)          \
  X(UNSIGNED, UNSIGNED) X(UNSIGNED_CHAR, UNSIGNED_CHAR) X(UNSIGNED_LONG, UNSIGNED_LONG)          \
  X(UNSIGNED_LONG_LONG, UNSIGNED_LONG_LONG) X(UNSIGNED_SHORT, UNSIGNED_SHORT) X(WCHAR, WCHAR)    \
  X(WIN_BASE, WIN_BASE) X(WIN_CREATE_FLAVOR, WIN_CREATE_FLAVOR) X(WIN_DISP_UNIT, WIN_DISP_UNIT)  \
  X(WIN_FLAVOR_ALLOCATE, WIN_FLAVOR_ALLOCATE) X(WIN_FLAVOR_CREATE, WIN_FLAVOR_CREATE)            \
  X(WIN_MODEL, WIN_MODEL) X(WIN_NULL, WIN_NULL) X(WIN_SEPARATE, WIN_SEPARATE)                    \
  X(WIN_SIZE, WIN_SIZE) X(WIN_UNIFIED, WIN_UNIFIED) X(WTIME_IS_GLOBAL, WTIME_IS_GLOBAL)

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

static void test_init(void) {
  int flag = -1, level = -1;
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
  CHECK(len > 0 && (size_t)len == strlen(version), "Get_library_version: len %d, strlen %zu", len,
        strlen(version));
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
  CHECK(mpi.STATUS_IGNORE != NULL, "MPIABI_STATUS_IGNORE is NULL");
  CHECK(mpi.STATUSES_IGNORE != NULL, "MPIABI_STATUSES_IGNORE is NULL");
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
      CHECK_EQ(x, mpi.UNDEFINED);
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
    CHECK(outc >= 0 && outc <= K - done, "Testsome outcount %d with %d pending", outc, K - done);
    if (outc < 0 || outc > K - done) break;
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
  int sb[3], rb[3];
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


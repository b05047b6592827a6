/* Callbacks (treatment.txt: own entry/callbacks.c). The library calls them with
 * native handles and statuses; the user's functions get MPIABI ones,
 * converted by the loaded family's record.
 *
 * Reduction ops and error handlers get no user data, so each registration
 * takes its own C function from a pool of thunks. Attribute functions,
 * generalized requests and data representations get extra_state, which
 * carries a record of the user's functions instead. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"
#include "convert.h"
#include "family.h"
#include "library.h"
#include "log.h"

/* ---- native handles, as the library passes them ----
 * By address (ops, error handlers): read the family's native size (MPI_File
 * is a pointer in every family). By value (attribute functions, data
 * representations): the thunk takes a uintptr_t; a 4-byte handle arrives in
 * the low half of the register, so only that half counts (x86-64 and
 * AArch64 calling conventions). */
static uintptr_t handle_at(const void *p, int is_file) {
  if (!is_file && mpic_family && mpic_family->handle_size == 4) return (uintptr_t) * (const uint32_t *)p;
  return *(const uintptr_t *)p;
}
static uintptr_t handle_value(uintptr_t v) {
  return mpic_family && mpic_family->handle_size == 4 ? (uintptr_t)(uint32_t)v : v;
}

/* ---- pools of thunks ---- */
#define NSLOTS 32
#define SLOTS(X)                                                                            \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) \
  X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29)  \
  X(30) X(31)
/* Ops get four times as many: a freed op's slot is not reused at once (below). */
#define NOPSLOTS (4 * NSLOTS)
#define OP_SLOTS(X)                                                            \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) \
  X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31) \
  X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39) X(40) X(41) X(42) X(43) X(44) X(45) X(46) X(47) \
  X(48) X(49) X(50) X(51) X(52) X(53) X(54) X(55) X(56) X(57) X(58) X(59) X(60) X(61) X(62) X(63) \
  X(64) X(65) X(66) X(67) X(68) X(69) X(70) X(71) X(72) X(73) X(74) X(75) X(76) X(77) X(78) X(79) \
  X(80) X(81) X(82) X(83) X(84) X(85) X(86) X(87) X(88) X(89) X(90) X(91) X(92) X(93) X(94) X(95) \
  X(96) X(97) X(98) X(99) X(100) X(101) X(102) X(103) X(104) X(105) X(106) X(107) X(108) X(109) X(110) X(111) \
  X(112) X(113) X(114) X(115) X(116) X(117) X(118) X(119) X(120) X(121) X(122) X(123) X(124) X(125) X(126) X(127)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- user-defined reduction operations ----
 * MPI_Op_free may come while a nonblocking reduction with the op is still
 * pending, and that operation must complete normally (MPI 4.1, 6.9.5; MPICH's
 * coll/nonblocking2 does it). So freeing an op keeps its function in the
 * slot (the library may still call the thunk) and only marks the slot
 * reusable; MPI_Op_create takes a never-used slot first, then the one freed
 * longest ago. A pending reduction meets another op's function only if
 * NOPSLOTS - 1 ops were created after its op was freed and before it ran. */
static struct {
  MPIABI_User_function *fn;
  MPIABI_Op handle;
  int live;               /* created and not freed */
  unsigned long freed_at; /* free_clock at its MPI_Op_free; 0: never used */
} op_slots[NOPSLOTS];
static unsigned long free_clock = 0;

#define OP_THUNK(i)                                                        \
  static void op_thunk_##i(void *in, void *inout, int *len, void *dt) {   \
    MPIABI_Datatype d = handle_at(dt, 0);                                  \
    op_slots[i].fn(in, inout, len, &d);                                    \
  }
OP_SLOTS(OP_THUNK)
#define OP_ENTRY(i) (MPIABI_User_function *)op_thunk_##i,
static MPIABI_User_function *const op_thunks[NOPSLOTS] = {OP_SLOTS(OP_ENTRY)};

MPIABI_EXPORT int MPIABI_Op_create(MPIABI_User_function *user_fn, int commute, MPIABI_Op *op) {
  int slot = -1;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < NOPSLOTS; i++) {
    if (op_slots[i].live) continue;
    if (!op_slots[i].fn) { /* never used: the best */
      slot = i;
      break;
    }
    if (slot < 0 || op_slots[i].freed_at < op_slots[slot].freed_at) slot = i;
  }
  if (slot >= 0) {
    op_slots[slot].fn = user_fn;
    op_slots[slot].handle = 0;
    op_slots[slot].live = 1;
  }
  pthread_mutex_unlock(&lock);
  if (slot < 0) {
    mpic_log(0, "MPI_Op_create: all %d user-defined operations are in use; free one with MPI_Op_free", NOPSLOTS);
    return MPIABI_ERR_OTHER;
  }
  int ret = mpic_next_Op_create(op_thunks[slot], commute, op);
  pthread_mutex_lock(&lock);
  if (ret == 0) {
    op_slots[slot].handle = *op;
  } else {
    op_slots[slot].live = 0;
    op_slots[slot].freed_at = ++free_clock;
  }
  pthread_mutex_unlock(&lock);
  return ret;
}

MPIABI_EXPORT int MPIABI_Op_free(MPIABI_Op *op) {
  if (mpic_mpi_is_finalized()) {
    *op = MPIABI_OP_NULL;
    return 0;
  }
  MPIABI_Op old = *op;
  int ret = mpic_next_Op_free(op);
  if (ret != 0) return ret;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < NOPSLOTS; i++)
    if (op_slots[i].live && op_slots[i].handle == old) { /* fn stays: a pending reduction may call it */
      op_slots[i].live = 0;
      op_slots[i].freed_at = ++free_clock;
    }
  pthread_mutex_unlock(&lock);
  return 0;
}

/* ---- error handlers: one pool per object kind ----
 * Few, and they may stay attached to objects after MPI_Errhandler_free, so
 * their slots are never reused (a second registration of one function
 * shares its slot). */
static void *comm_eh[NSLOTS], *win_eh[NSLOTS], *file_eh[NSLOTS];

static int eh_slot_take(void **slots, void *fn) {
  int slot = -1;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < NSLOTS && slot < 0; i++)
    if (slots[i] == fn || !slots[i]) {
      slots[i] = fn;
      slot = i;
    }
  pthread_mutex_unlock(&lock);
  return slot;
}

#define EH_THUNK(KIND, T, IS_FILE, i)                                 \
  static void KIND##_eh_thunk_##i(void *obj, int *err, ...) {         \
    MPIABI_##T h = handle_at(obj, IS_FILE);                           \
    ((MPIABI_##T##_errhandler_function *)KIND##_eh[i])(&h, err);      \
  }
#define COMM_EH(i) EH_THUNK(comm, Comm, 0, i)
#define WIN_EH(i) EH_THUNK(win, Win, 0, i)
#define FILE_EH(i) EH_THUNK(file, File, 1, i)
SLOTS(COMM_EH)
SLOTS(WIN_EH)
SLOTS(FILE_EH)
#define COMM_EH_ENTRY(i) (MPIABI_Comm_errhandler_function *)comm_eh_thunk_##i,
#define WIN_EH_ENTRY(i) (MPIABI_Win_errhandler_function *)win_eh_thunk_##i,
#define FILE_EH_ENTRY(i) (MPIABI_File_errhandler_function *)file_eh_thunk_##i,
static MPIABI_Comm_errhandler_function *const comm_eh_thunks[NSLOTS] = {SLOTS(COMM_EH_ENTRY)};
static MPIABI_Win_errhandler_function *const win_eh_thunks[NSLOTS] = {SLOTS(WIN_EH_ENTRY)};
static MPIABI_File_errhandler_function *const file_eh_thunks[NSLOTS] = {SLOTS(FILE_EH_ENTRY)};

#define CREATE_ERRHANDLER(KIND, T)                                                                     \
  MPIABI_EXPORT int MPIABI_##T##_create_errhandler(MPIABI_##T##_errhandler_function *f,               \
                                                   MPIABI_Errhandler *errhandler) {                    \
    int slot = eh_slot_take(KIND##_eh, (void *)f);                                                     \
    if (slot < 0) {                                                                                    \
      mpic_log(0, "MPI_" #T "_create_errhandler: all %d error handler slots are in use", NSLOTS);      \
      return MPIABI_ERR_OTHER;                                                                         \
    }                                                                                                  \
    return mpic_next_##T##_create_errhandler(KIND##_eh_thunks[slot], errhandler);                      \
  }
CREATE_ERRHANDLER(comm, Comm)
CREATE_ERRHANDLER(win, Win)
CREATE_ERRHANDLER(file, File)

/* ---- attribute keyvals ----
 * The record stays allocated: attributes set with the keyval may outlive
 * MPI_*_free_keyval, and their callbacks still need it. */
struct keyval {
  void *copy, *del, *extra;
};

static int copy_thunk(uintptr_t old, int keyval, void *extra, void *in, void *out, int *flag) {
  struct keyval *k = extra;
  if (!k->copy) {
    *flag = 0;
    return 0;
  }
  return ((MPIABI_Comm_copy_attr_function *)k->copy)(handle_value(old), keyval, k->extra, in, out, flag);
}
static int delete_thunk(uintptr_t obj, int keyval, void *value, void *extra) {
  struct keyval *k = extra;
  if (!k->del) return 0;
  return ((MPIABI_Comm_delete_attr_function *)k->del)(handle_value(obj), keyval, value, k->extra);
}

/* Comm, Type and Win attribute functions differ only in the handle's kind,
 * which is a uintptr_t in MPIABI for all three. */
#define CREATE_KEYVAL(NAME, F)                                                                       \
  MPIABI_EXPORT int MPIABI_##NAME(MPIABI_##F##_copy_attr_function *copy_fn,                         \
                                  MPIABI_##F##_delete_attr_function *delete_fn, int *keyval,        \
                                  void *extra_state) {                                              \
    struct keyval *k = malloc(sizeof *k);                                                           \
    if (!k) return MPIABI_ERR_NO_MEM;                                                               \
    *k = (struct keyval){(void *)copy_fn, (void *)delete_fn, extra_state};                          \
    int ret = mpic_next_##NAME((MPIABI_##F##_copy_attr_function *)copy_thunk,                       \
                               (MPIABI_##F##_delete_attr_function *)delete_thunk, keyval, k);       \
    if (ret != 0) free(k);                                                                          \
    return ret;                                                                                     \
  }
CREATE_KEYVAL(Comm_create_keyval, Comm)
CREATE_KEYVAL(Type_create_keyval, Type)
CREATE_KEYVAL(Win_create_keyval, Win)

/* ---- generalized requests ---- */
struct grequest {
  MPIABI_Grequest_query_function *query;
  MPIABI_Grequest_free_function *free_fn;
  MPIABI_Grequest_cancel_function *cancel;
  void *extra;
};

static int grequest_query_thunk(void *extra, void *native_status) {
  struct grequest *g = extra;
  MPIABI_Status s;
  memset(&s, 0, sizeof s);
  mpic_status_to_abi(&s, native_status, mpic_family->status);
  int ret = g->query(g->extra, &s);
  mpic_status_from_abi(&s, native_status, mpic_family->status);
  return ret;
}
static int grequest_free_thunk(void *extra) {
  struct grequest *g = extra;
  int ret = g->free_fn(g->extra);
  free(g);
  return ret;
}
static int grequest_cancel_thunk(void *extra, int complete) {
  struct grequest *g = extra;
  return g->cancel(g->extra, complete);
}

MPIABI_EXPORT int MPIABI_Grequest_start(MPIABI_Grequest_query_function *query_fn,
                                        MPIABI_Grequest_free_function *free_fn,
                                        MPIABI_Grequest_cancel_function *cancel_fn, void *extra_state,
                                        MPIABI_Request *request) {
  struct grequest *g = malloc(sizeof *g);
  if (!g) return MPIABI_ERR_NO_MEM;
  *g = (struct grequest){query_fn, free_fn, cancel_fn, extra_state};
  int ret = mpic_next_Grequest_start((MPIABI_Grequest_query_function *)grequest_query_thunk,
                                     grequest_free_thunk, grequest_cancel_thunk, g, request);
  if (ret != 0) free(g);
  return ret;
}

/* ---- MPI-IO data representations ---- */
struct datarep {
  MPIABI_Datarep_conversion_function *read, *write;
  MPIABI_Datarep_extent_function *extent;
  void *extra;
};

static int datarep_read_thunk(void *userbuf, uintptr_t dt, int count, void *filebuf, MPIABI_Offset position,
                              void *extra) {
  struct datarep *d = extra;
  return d->read(userbuf, handle_value(dt), count, filebuf, position, d->extra);
}
static int datarep_write_thunk(void *userbuf, uintptr_t dt, int count, void *filebuf, MPIABI_Offset position,
                               void *extra) {
  struct datarep *d = extra;
  return d->write(userbuf, handle_value(dt), count, filebuf, position, d->extra);
}
static int datarep_extent_thunk(uintptr_t dt, MPIABI_Aint *extent, void *extra) {
  struct datarep *d = extra;
  return d->extent(handle_value(dt), extent, d->extra);
}

MPIABI_EXPORT int MPIABI_Register_datarep(const char *datarep, MPIABI_Datarep_conversion_function *read_fn,
                                          MPIABI_Datarep_conversion_function *write_fn,
                                          MPIABI_Datarep_extent_function *extent_fn, void *extra_state) {
  struct datarep *d = malloc(sizeof *d);
  if (!d) return MPIABI_ERR_NO_MEM;
  *d = (struct datarep){read_fn, write_fn, extent_fn, extra_state};
  /* MPI_CONVERSION_FN_NULL is NULL in every family. */
  int ret = mpic_next_Register_datarep(datarep, read_fn ? datarep_read_thunk : NULL,
                                       write_fn ? datarep_write_thunk : NULL, datarep_extent_thunk, d);
  if (ret != 0) free(d);
  return ret;
}

/* Shared state and helpers of the wrapper, used by every family's code. */
#ifndef MPI_COLLECTIVES_WRAPPER_H
#define MPI_COLLECTIVES_WRAPPER_H

#include <stddef.h>
#include <stdint.h>
#include "mpiabi.h"

#define MPIC_VERSION_MAJOR 0
#define MPIC_VERSION_MINOR 1
#define MPIC_VERSION_PATCH 0

enum { MPIC_FAMILY_NONE = 0, MPIC_FAMILY_MPICH = 1, MPIC_FAMILY_OPENMPI = 2, MPIC_FAMILY_STANDARD = 3 };
int mpic_forced_family(void);
int mpic_bind_functions(int family, void *lib, void **table, const char *const *names, size_t n,
                        void *unsupported);
void mpic_check_launcher(int world_size, int world_rank);
void mpic_check_launcher_before_init(void);

extern int mpic_family;
extern int mpic_initialized_by_us;
extern int mpic_finalized_by_us;

void mpic_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
__attribute__((noreturn)) void mpic_not_loaded(const char *function);
int mpic_mpi_is_finalized(void);
int mpic_level_rank(const int levels[4], int native_level);
int mpic_thread_policy(int caller_rank);
int mpic_any_thread_policy(void);
int mpic_split_check_policy(void);
int mpic_split_enter(void);
void mpic_split_leave(void);
int mpic_split_plan_is_wrong(const int *pairs, int n, int undefined, char *why, size_t whylen);
/* Calls in progress that wait for other ranks, and how many have begun
 * (generate.py's WAITING list): relaxed atomics, a few nanoseconds a call. */
extern long mpic_waiting_now;
extern unsigned long mpic_waits_begun;
static inline void mpic_wait_begin(void) {
  __atomic_fetch_add(&mpic_waits_begun, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&mpic_waiting_now, 1, __ATOMIC_RELAXED);
}
static inline void mpic_wait_end(void) { __atomic_fetch_sub(&mpic_waiting_now, 1, __ATOMIC_RELAXED); }

int mpic_watch_self_quiet(void);
__attribute__((noreturn)) void mpic_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Pools of callback thunks: the library calls a user op or error handler
 * without any user data, so each registration needs its own C function. */
#define MPIC_NSLOTS 32
#define MPIC_SLOTS(X)                                                                       \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) \
  X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29)  \
  X(30) X(31)

struct mpic_op_slot {
  MPIABI_User_function *fn;
  MPIABI_Op handle;
};
extern struct mpic_op_slot mpic_op_slots[MPIC_NSLOTS];
extern void *mpic_comm_eh_slots[MPIC_NSLOTS];
extern void *mpic_win_eh_slots[MPIC_NSLOTS];
extern void *mpic_file_eh_slots[MPIC_NSLOTS];
int mpic_op_slot_take(MPIABI_User_function *fn);
void mpic_op_slot_release(int slot);
void mpic_op_slot_release_handle(MPIABI_Op op);
int mpic_eh_slot_take(void **slots, void *fn);

/* Callbacks that do get user data: the wrapper puts one of these in its place. */
struct mpic_keyval {
  void *copy, *del, *extra;
};
struct mpic_keyval *mpic_keyval_new(void *copy, void *del, void *extra);
struct mpic_grequest {
  MPIABI_Grequest_query_function *query;
  MPIABI_Grequest_free_function *free_fn;
  MPIABI_Grequest_cancel_function *cancel;
  void *extra;
};
struct mpic_datarep {
  MPIABI_Datarep_conversion_function *read, *write;
  MPIABI_Datarep_extent_function *extent;
  void *extra;
};

void mpic_keep_until_complete(uintptr_t request, void *a, void *b);
uintptr_t *mpic_pending_snapshot(const uintptr_t *reqs, int n);
void mpic_pending_release(uintptr_t *before, const uintptr_t *after, int n, uintptr_t null_request);

#endif

/* The MPIABI wrapper that jaxlib's bundled MPItrampoline loads through
 * MPITRAMPOLINE_LIB. It is built without any MPI header: in its ELF
 * constructor it dlopens the real MPI library, detects its ABI family, fills
 * in the MPIABI constants, and from then on every MPIABI_* function forwards
 * to the library through function pointers. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MPIABI_CONST /* the wrapper writes the constants */
#include "mpiabi.h"
#include "wrapper.h"

#define MPIABI_EXPORT __attribute__((visibility("default")))

/* ---- what MPItrampoline checks before anything else ---- */
MPIABI_EXPORT int mpiwrapper_version_major = MPIC_VERSION_MAJOR;
MPIABI_EXPORT int mpiwrapper_version_minor = MPIC_VERSION_MINOR;
MPIABI_EXPORT int mpiwrapper_version_patch = MPIC_VERSION_PATCH;
MPIABI_EXPORT int mpiabi_version_major = 2;
MPIABI_EXPORT int mpiabi_version_minor = 9;
MPIABI_EXPORT int mpiabi_version_patch = 0;
/* MPItrampoline calls this right after loading us, to let a Fortran wrapper
 * export its constants. We have no Fortran layer; we note that jaxlib's
 * trampoline has attached, which the Python layer checks to tell a user who
 * imported jax too early. */
static int mpic_attached = 0;
MPIABI_EXPORT void mpiwrapper_export_fortran_constants_(void) { mpic_attached = 1; }

/* ---- state ---- */
static const char *const mpic_family_names[] = {"none", "mpich", "openmpi", "standard"};
int mpic_family = MPIC_FAMILY_NONE;
int mpic_initialized_by_us = 0;
int mpic_finalized_by_us = 0;
static int mpic_verbose = 0;
static int mpic_thread_policy_level = 3; /* MPI_THREAD_MULTIPLE */
static void *mpic_lib = NULL;
static char mpic_lib_path[4096];
static char mpic_report[8192];
static char mpic_missing[4096];
static char mpic_family_reason[512];
static int (*mpic_native_finalized)(void) = NULL;

/* "rank R/N" from the launcher's environment, for log lines (before MPI is up). */
static const char *mpic_where(void) {
  static char where[64];
  const char *r = NULL, *n = NULL;
  const char *ranks[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"};
  const char *sizes[] = {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"};
  for (size_t i = 0; i < 4 && !r; i++) r = getenv(ranks[i]);
  for (size_t i = 0; i < 4 && !n; i++) n = getenv(sizes[i]);
  snprintf(where, sizeof where, "rank %s/%s", r ? r : "?", n ? n : "?");
  return where;
}

void mpic_log(int level, const char *fmt, ...) {
  if (level > mpic_verbose) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "mpi-collectives [%s]: %s\n", mpic_where(), line);
}

static void report(const char *fmt, ...) {
  size_t len = strlen(mpic_report);
  if (len + 4 >= sizeof mpic_report) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(mpic_report + len, sizeof mpic_report - len, fmt, ap);
  va_end(ap);
}

/* The one sentence for "no MPI library could be loaded": the first MPI call
 * of such a process prints it (and Python's initialize() raises it). */
MPIABI_EXPORT const char *mpic_not_loaded_message(void) {
  static char message[sizeof mpic_report + 512];
  snprintf(message, sizeof message,
           "no MPI library could be loaded (%s). Fix: set MPI_COLLECTIVES_LIBMPI to the full path of "
           "your MPI's libmpi.so, or `pip install mpich`.",
           mpic_report[0] ? mpic_report : "nothing tried");
  return message;
}

/* The first MPI call of a process whose MPI library could not be loaded ends
 * the process with that sentence. _exit, because exit() would run JAX's
 * atexit MPI_Finalize and land here again. */
__attribute__((noreturn)) void mpic_not_loaded(const char *function) {
  fprintf(stderr, "mpi-collectives: %s called, but %s\n", function, mpic_not_loaded_message());
  fflush(stderr);
  _exit(1);
}

/* Is MPI initialized and not yet finalized (so that MPI_Abort may be called)? */
static int mpic_mpi_is_up(void) {
  int flag = 0;
  if (mpic_mpi_is_finalized()) return 0;
  return MPIABI_Initialized(&flag) == 0 && flag;
}

int mpic_mpi_is_finalized(void) {
  if (mpic_finalized_by_us) return 1;
  return mpic_native_finalized ? mpic_native_finalized() : 0;
}

/* MPI_COLLECTIVES_ABI: 0 when unset, -1 when not understood. */
int mpic_forced_family(void) {
  const char *v = getenv("MPI_COLLECTIVES_ABI");
  if (!v || !*v) return 0;
  if (!strcmp(v, "mpich")) return MPIC_FAMILY_MPICH;
  if (!strcmp(v, "openmpi")) return MPIC_FAMILY_OPENMPI;
  if (!strcmp(v, "standard")) return MPIC_FAMILY_STANDARD;
  return -1;
}

/* ---- thread level policy ---- */
int mpic_level_rank(const int levels[4], int native_level) {
  for (int i = 0; i < 4; i++)
    if (levels[i] == native_level) return i;
  return 0;
}
/* Returns the level to request (0..3), or -1 for "what the caller asked". */
int mpic_thread_policy(int caller_rank) {
  if (mpic_thread_policy_level < 0) return -1;
  return caller_rank > mpic_thread_policy_level ? caller_rank : mpic_thread_policy_level;
}

/* ---- collectives from any thread (see Is_thread_main in special.inc) ---- */
static int mpic_any_thread = 1;
static int mpic_check_splits = 1;
static int mpic_splits_running = 0;
int mpic_any_thread_policy(void) { return mpic_any_thread; }
int mpic_split_check_policy(void) { return mpic_check_splits; }
int mpic_split_enter(void) { return __atomic_fetch_add(&mpic_splits_running, 1, __ATOMIC_SEQ_CST) == 0; }
void mpic_split_leave(void) { __atomic_fetch_sub(&mpic_splits_running, 1, __ATOMIC_SEQ_CST); }

/* Does the set of (color, key) pairs of one split look like one XLA
 * collective's groups: every group (ranks of one color) keyed 0..n-1, and
 * all groups of one size? If not, says why in `why`. */
static int mpic_int_cmp(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }
int mpic_split_plan_is_wrong(const int *pairs, int n, int undefined, char *why, size_t whylen) {
  int *keys = malloc(sizeof(int) * (size_t)(n ? n : 1));
  char *seen = calloc((size_t)(n ? n : 1), 1);
  int group_size = -1, wrong = 0;
  if (!keys || !seen) { free(keys); free(seen); return 0; }
  for (int i = 0; i < n && !wrong; i++) {
    int color = pairs[2 * i];
    if (seen[i] || color == undefined) continue;
    int m = 0;
    for (int j = i; j < n; j++)
      if (!seen[j] && pairs[2 * j] == color) {
        seen[j] = 1;
        keys[m++] = pairs[2 * j + 1];
      }
    qsort(keys, (size_t)m, sizeof(int), mpic_int_cmp);
    for (int k = 0; k < m && !wrong; k++)
      if (keys[k] != k) {
        snprintf(why, whylen, "the %d ranks with color %d have keys that are not 0..%d", m, color, m - 1);
        wrong = 1;
      }
    if (!wrong && group_size >= 0 && m != group_size) {
      snprintf(why, whylen, "groups of %d and of %d ranks in one split", group_size, m);
      wrong = 1;
    }
    group_size = m;
  }
  free(keys);
  free(seen);
  return wrong;
}

/* ---- ending the job ----
 * Every way this package ends a job goes through here, from C (a wrong split,
 * a dead peer) and from Python (mpi_collectives.mpi.end_job): one line on
 * stderr, then the whole job ends.
 *
 * MPI_Abort, so that the launcher ends the ranks on every node. But MPICH's
 * MPI_Abort then calls exit(), whose teardown of XLA once let a pending
 * collective hand the Python main thread a wrong result before the launcher
 * killed the process (seen once in CI): a handler registered now runs first
 * in exit() (atexit runs in reverse order) and leaves with _exit at once. A
 * thread ends the process in any case if MPI_Abort has not within a few
 * seconds (a launcher that does not answer). */
static void mpic_exit_now(void) { _exit(1); }
static void *mpic_exit_later(void *unused) {
  (void)unused;
  sleep(5);
  _exit(1);
}
static int mpic_ending = 0;

__attribute__((noreturn)) void mpic_end_job_line(const char *line) {
  if (__atomic_exchange_n(&mpic_ending, 1, __ATOMIC_SEQ_CST)) {
    for (;;) pause(); /* another thread is ending the job already: its line is the one */
  }
  fprintf(stderr, "%s\n", line);
  fflush(stderr);
  mpic_watch_self_quiet(); /* this line says why; the rank's watcher must not add another */
  /* Give the launcher a moment to forward this line first (Hydra loses it
   * otherwise, about one time in fifteen). */
  sleep(1);
  atexit(mpic_exit_now);
  pthread_t t;
  pthread_create(&t, NULL, mpic_exit_later, NULL);
  if (mpic_family != MPIC_FAMILY_NONE && mpic_mpi_is_up()) MPIABI_Abort(MPIABI_COMM_WORLD, 1);
  _exit(1);
}

void mpic_fatal(const char *fmt, ...) {
  char line[2048] = "mpi-collectives: error: ";
  size_t len = strlen(line);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + len, sizeof line - len, fmt, ap);
  va_end(ap);
  mpic_end_job_line(line);
}

/* For Python: the same, with the line written by the caller. */
MPIABI_EXPORT int mpic_end_job(const char *line) { mpic_end_job_line(line); }

/* ---- the launcher and the library must be of one MPI ----
 * With a launcher of another MPI, every process initializes as a singleton
 * and silently believes it is rank 0 of 1. The launcher's environment says
 * how many processes it started. */
struct mpic_launcher {
  const char *size_var, *rank_var, *name;
};
static const struct mpic_launcher mpic_launchers[] = {
    {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "Open MPI's mpirun"},
    {"PMI_SIZE", "PMI_RANK", "a Hydra mpiexec (MPICH, Intel MPI) or srun --mpi=pmi2"},
    {"PMIX_SIZE", "PMIX_RANK", "a PMIx launcher"},
    {"SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "Slurm's srun"},
};

static __attribute__((noreturn)) void mpic_launcher_mismatch(const struct mpic_launcher *l, int started,
                                                               const char *what) {
  const char *r = getenv(l->rank_var);
  fprintf(stderr,
          "mpi-collectives: error: process %s of %d was started by %s (%s=%d), but the MPI library %s "
          "(%s ABI) %s: the launcher and the library come from different MPI installations. "
          "Fix: launch with the mpiexec that belongs to %s, or set MPI_COLLECTIVES_LIBMPI to the "
          "libmpi of the MPI whose launcher you use.\n",
          r ? r : "?", started, l->name, l->size_var, started, mpic_lib_path,
          mpic_family_names[mpic_family], what, mpic_lib_path);
  fflush(stderr);
  _exit(1);
}

static const struct mpic_launcher *mpic_launcher_found(int *started) {
  for (size_t i = 0; i < sizeof mpic_launchers / sizeof *mpic_launchers; i++) {
    const char *v = getenv(mpic_launchers[i].size_var);
    *started = v ? atoi(v) : 0;
    if (*started > 1) return &mpic_launchers[i];
  }
  return NULL;
}

/* Before MPI_Init: MPICH aborts under Open MPI's launcher with an error
 * stack about PMIx, and Open MPI under Hydra prints a missing help file; say
 * what is wrong first. (Slurm's srun can start either, so it is not judged here.) */
void mpic_check_launcher_before_init(void) {
  int started = 0;
  const struct mpic_launcher *l = mpic_launcher_found(&started);
  if (!l) return;
  int ompi_launcher = !strcmp(l->size_var, "OMPI_COMM_WORLD_SIZE");
  int hydra_launcher = !strcmp(l->size_var, "PMI_SIZE") && !getenv("OMPI_COMM_WORLD_SIZE") &&
                       !getenv("SLURM_STEP_ID"); /* srun --mpi=pmi2 sets PMI_SIZE too */
  if ((ompi_launcher && mpic_family != MPIC_FAMILY_OPENMPI && !getenv("PMI_SIZE")) ||
      (hydra_launcher && mpic_family == MPIC_FAMILY_OPENMPI))
    mpic_launcher_mismatch(l, started, "cannot join the processes it started");
}

/* After MPI_Init: a world of 1 under a launcher that started more. */
void mpic_check_launcher(int world_size, int world_rank) {
  int started = 0;
  const struct mpic_launcher *l = mpic_launcher_found(&started);
  if (!l) return;
  if (world_size == 1) mpic_launcher_mismatch(l, started, "sees a world of 1");
  if (world_size != started)
    mpic_log(0, "rank %d: the launcher says %s=%d but MPI_COMM_WORLD has %d processes", world_rank,
             l->size_var, started, world_size);
}

/* ---- callback pools and records ---- */
static pthread_mutex_t mpic_lock = PTHREAD_MUTEX_INITIALIZER;
struct mpic_op_slot mpic_op_slots[MPIC_NSLOTS];
void *mpic_comm_eh_slots[MPIC_NSLOTS];
void *mpic_win_eh_slots[MPIC_NSLOTS];
void *mpic_file_eh_slots[MPIC_NSLOTS];

int mpic_op_slot_take(MPIABI_User_function *fn) {
  int slot = -1;
  pthread_mutex_lock(&mpic_lock);
  for (int i = 0; i < MPIC_NSLOTS; i++)
    if (!mpic_op_slots[i].fn) {
      mpic_op_slots[i].fn = fn;
      mpic_op_slots[i].handle = 0;
      slot = i;
      break;
    }
  pthread_mutex_unlock(&mpic_lock);
  return slot;
}
void mpic_op_slot_release(int slot) {
  pthread_mutex_lock(&mpic_lock);
  mpic_op_slots[slot].fn = NULL;
  pthread_mutex_unlock(&mpic_lock);
}
void mpic_op_slot_release_handle(MPIABI_Op op) {
  pthread_mutex_lock(&mpic_lock);
  for (int i = 0; i < MPIC_NSLOTS; i++)
    if (mpic_op_slots[i].fn && mpic_op_slots[i].handle == op) mpic_op_slots[i].fn = NULL;
  pthread_mutex_unlock(&mpic_lock);
}
/* Error handlers are few and may stay attached to objects after
 * MPI_Errhandler_free, so their slots are never reused. */
int mpic_eh_slot_take(void **slots, void *fn) {
  int slot = -1;
  pthread_mutex_lock(&mpic_lock);
  for (int i = 0; i < MPIC_NSLOTS; i++)
    if (slots[i] == fn || !slots[i]) {
      slots[i] = fn;
      slot = i;
      break;
    }
  pthread_mutex_unlock(&mpic_lock);
  return slot;
}

struct mpic_keyval *mpic_keyval_new(void *copy, void *del, void *extra) {
  struct mpic_keyval *k = malloc(sizeof *k);
  if (k) *k = (struct mpic_keyval){copy, del, extra};
  return k;
}

/* ---- arrays that a nonblocking call may read until it completes ---- */
struct mpic_pending {
  uintptr_t request;
  void *a, *b;
};
static struct mpic_pending *mpic_pend = NULL;
static int mpic_npend = 0, mpic_cappend = 0;
static int mpic_pend_count = 0; /* read without the lock on the hot path */

void mpic_keep_until_complete(uintptr_t request, void *a, void *b) {
  if (!a && !b) return;
  pthread_mutex_lock(&mpic_lock);
  if (mpic_npend == mpic_cappend) {
    int cap = mpic_cappend ? 2 * mpic_cappend : 16;
    struct mpic_pending *p = realloc(mpic_pend, sizeof *p * (size_t)cap);
    if (!p) { /* keep the arrays alive forever rather than risk a use after free */
      pthread_mutex_unlock(&mpic_lock);
      return;
    }
    mpic_pend = p;
    mpic_cappend = cap;
  }
  mpic_pend[mpic_npend++] = (struct mpic_pending){request, a, b};
  __atomic_store_n(&mpic_pend_count, mpic_npend, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&mpic_lock);
}
uintptr_t *mpic_pending_snapshot(const uintptr_t *reqs, int n) {
  if (!__atomic_load_n(&mpic_pend_count, __ATOMIC_ACQUIRE) || !reqs || n <= 0) return NULL;
  uintptr_t *copy = malloc(sizeof *copy * (size_t)n);
  if (copy) memcpy(copy, reqs, sizeof *copy * (size_t)n);
  return copy;
}
void mpic_pending_release(uintptr_t *before, const uintptr_t *after, int n, uintptr_t null_request) {
  pthread_mutex_lock(&mpic_lock);
  for (int i = 0; i < n; i++) {
    if (after[i] != null_request || before[i] == null_request) continue;
    for (int j = 0; j < mpic_npend; j++)
      if (mpic_pend[j].request == before[i]) {
        free(mpic_pend[j].a);
        free(mpic_pend[j].b);
        mpic_pend[j] = mpic_pend[--mpic_npend];
        break;
      }
  }
  __atomic_store_n(&mpic_pend_count, mpic_npend, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&mpic_lock);
  free(before);
}

/* ---- the predefined attribute callbacks, at the MPIABI level ---- */
static int mpic_copy_dup(uintptr_t old, int keyval, void *extra, void *in, void *out, int *flag) {
  (void)old, (void)keyval, (void)extra;
  *(void **)out = in;
  *flag = 1;
  return 0;
}
static int mpic_copy_null(uintptr_t old, int keyval, void *extra, void *in, void *out, int *flag) {
  (void)old, (void)keyval, (void)extra, (void)in, (void)out;
  *flag = 0;
  return 0;
}
static int mpic_delete_null(uintptr_t obj, int keyval, void *value, void *extra) {
  (void)obj, (void)keyval, (void)value, (void)extra;
  return 0;
}
#define mpic_comm_dup_fn mpic_copy_dup
#define mpic_type_dup_fn mpic_copy_dup
#define mpic_win_dup_fn mpic_copy_dup
#define mpic_dup_fn mpic_copy_dup
#define mpic_comm_null_copy_fn mpic_copy_null
#define mpic_type_null_copy_fn mpic_copy_null
#define mpic_win_null_copy_fn mpic_copy_null
#define mpic_null_copy_fn mpic_copy_null
#define mpic_comm_null_delete_fn mpic_delete_null
#define mpic_type_null_delete_fn mpic_delete_null
#define mpic_win_null_delete_fn mpic_delete_null
#define mpic_null_delete_fn mpic_delete_null
#define mpic_conversion_fn_null NULL

/* ---- binding the functions of a loaded library ----
 * A function the library lacks answers its family's
 * MPI_ERR_UNSUPPORTED_OPERATION; a missing MPIX_Query_*_support answers 0
 * ("no GPU support"), its only honest answer, as non-zero means "supported". */
static int mpic_no_gpu_support(void) { return 0; }
/* In the MPICH ABI the Fortran handle of an integer handle is the handle
 * itself: mpi.h defines MPI_Comm_c2f and friends as casts, and Intel MPI's
 * library does not export them at all. */
static int mpich_same_int(int handle) { return handle; }

/* Open MPI defines these two as macros, not functions: address arithmetic. */
static intptr_t mpic_aint_add(intptr_t base, intptr_t disp) { return (intptr_t)((uintptr_t)base + (uintptr_t)disp); }
static intptr_t mpic_aint_diff(intptr_t a, intptr_t b) { return (intptr_t)((uintptr_t)a - (uintptr_t)b); }

static void *mpic_fallback(int family, void *lib, const char *name) {
  if (!strncmp(name, "MPIX_Query_", 11)) return (void *)mpic_no_gpu_support;
  if (!strcmp(name, "MPI_Aint_add")) return (void *)mpic_aint_add;
  if (!strcmp(name, "MPI_Aint_diff")) return (void *)mpic_aint_diff;
  /* The standard ABI has no MPI_Comm_c2f: its integer form of a handle is MPI_Comm_toint. */
  size_t len = strlen(name);
  if (family == MPIC_FAMILY_STANDARD && len > 4 && strncmp(name, "MPI_Status", 10) &&
      (!strcmp(name + len - 4, "_c2f") || !strcmp(name + len - 4, "_f2c"))) {
    char alt[64];
    snprintf(alt, sizeof alt, "%.*s%s", (int)(len - 4), name, name[len - 3] == 'c' ? "_toint" : "_fromint");
    return dlsym(lib, alt);
  }
  if (family == MPIC_FAMILY_MPICH && strncmp(name, "MPI_File_", 9) &&
      (strstr(name, "_c2f") || strstr(name, "_f2c")) && strcmp(name, "MPI_Status_c2f") &&
      strcmp(name, "MPI_Status_f2c"))
    return (void *)mpich_same_int;
  return NULL;
}

int mpic_bind_functions(int family, void *lib, void **table, const char *const *names, size_t n,
                        void *unsupported) {
  mpic_missing[0] = 0;
  int missing = 0;
  for (size_t i = 0; i < n; i++) {
    void *f = dlsym(lib, names[i]);
    if (!f && (f = mpic_fallback(family, lib, names[i]))) {
      table[i] = f;
      continue;
    }
    if (!f) {
      f = unsupported;
      size_t len = strlen(mpic_missing);
      snprintf(mpic_missing + len, sizeof mpic_missing - len, "%s%s", missing ? " " : "", names[i]);
      missing++;
    }
    table[i] = f;
  }
  return missing;
}

/* ---- the families ---- */
#include "family_mpich.h"
#include "family_openmpi.h"
#include "family_standard.h"

/* ---- the exported interface (generated) ---- */
#include "exports.c.inc"

/* Which ABI a loaded library speaks: the standard ABI if MPI_Abi_get_version
 * reports one, Open MPI if it exports ompi_mpi_comm_world, else the MPICH
 * ABI. MPI_COLLECTIVES_ABI overrides the detection. */
static int mpic_detect_family(void *lib) {
  int forced = mpic_forced_family();
  if (forced > 0) {
    snprintf(mpic_family_reason, sizeof mpic_family_reason, "forced by MPI_COLLECTIVES_ABI=%s",
             mpic_family_names[forced]);
    return forced;
  }
  if (!dlsym(lib, "MPI_Init_thread")) {
    snprintf(mpic_family_reason, sizeof mpic_family_reason, "the library does not export MPI_Init_thread");
    return MPIC_FAMILY_NONE;
  }
  /* MPICH 4.1+ also exports MPI_Abi_get_version from libmpi.so.12, where it
   * answers -1.-1: only a real version means the MPI-5 standard ABI. */
  int (*abi_version)(int *, int *) = (int (*)(int *, int *))dlsym(lib, "MPI_Abi_get_version");
  int major = -1, minor = -1;
  if (abi_version && abi_version(&major, &minor) == 0 && major >= 1) {
    snprintf(mpic_family_reason, sizeof mpic_family_reason,
             "MPI_Abi_get_version reports the MPI standard ABI %d.%d", major, minor);
    return MPIC_FAMILY_STANDARD;
  }
  if (dlsym(lib, "ompi_mpi_comm_world")) {
    snprintf(mpic_family_reason, sizeof mpic_family_reason, "exports ompi_mpi_comm_world: Open MPI ABI");
    return MPIC_FAMILY_OPENMPI;
  }
  snprintf(mpic_family_reason, sizeof mpic_family_reason,
           "no standard-ABI version, no Open MPI symbols: MPICH ABI (MPICH, Intel MPI, Cray MPICH, MVAPICH)");
  return MPIC_FAMILY_MPICH;
}

static int mpic_try(const char *path, int flags) {
  void *lib = dlopen(path, flags);
  if (!lib) {
    if (!(flags & RTLD_NOLOAD)) report("%s: %s; ", path, dlerror());
    return 0;
  }
  int family = mpic_detect_family(lib);
  if (family == MPIC_FAMILY_NONE) {
    report("%s: %s; ", path, mpic_family_reason);
    dlclose(lib);
    return 0;
  }
  struct link_map *map = NULL;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0])
    snprintf(mpic_lib_path, sizeof mpic_lib_path, "%s", map->l_name);
  else
    snprintf(mpic_lib_path, sizeof mpic_lib_path, "%s", path);
  mpic_lib = lib;
  int missing = 0;
  switch (family) {
  case MPIC_FAMILY_MPICH:
    missing = mpich_activate(lib);
    mpic_native_finalized = mpich_mpi_finalized;
    break;
  case MPIC_FAMILY_OPENMPI:
    /* Open MPI's components (and those of a plugin-built Open MPI 4) resolve
     * libmpi's symbols globally. */
    if (!dlopen(mpic_lib_path, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD))
      mpic_log(0, "could not make %s global: %s", mpic_lib_path, dlerror());
    missing = openmpi_activate(lib);
    mpic_native_finalized = openmpi_mpi_finalized;
    /* Open MPI's op/avx component adds 8- and 16-bit integers with saturating
     * instructions: an MPI_SUM past the type's maximum gives the maximum where
     * C, XLA and MPICH wrap around (Open MPI 5.0.11; tests/test_soak.py at 4
     * ranks and `doctor` see it). Without it Open MPI uses its portable loops.
     * MCA parameters are read at MPI_Init, from the environment. A user who
     * set OMPI_MCA_op has chosen. */
    if (!getenv("OMPI_MCA_op")) {
      setenv("OMPI_MCA_op", "^avx", 0);
      mpic_log(1, "set OMPI_MCA_op=^avx: Open MPI's op/avx saturates 8- and 16-bit integer sums");
    }
    /* Open MPI's btl/ofi starts libfabric, whose provider probing sleeps a
     * whole second in every MPI_Init on a machine without a fabric (Open MPI
     * 5.0.11 wheel: MPI_Init 1.03 s, 0.03 s without it; mpi4py alike). A job
     * whose ranks all run on this node needs no fabric, and the launcher says
     * so: every rank is local. Shared memory then carries everything. An
     * exclusion of a component a build lacks is ignored, so this is safe on
     * any Open MPI; a user who set OMPI_MCA_btl has chosen. */
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE"), *world = getenv("OMPI_COMM_WORLD_SIZE");
    if (!getenv("OMPI_MCA_btl") && local && world && strcmp(local, world) == 0) {
      setenv("OMPI_MCA_btl", "^ofi", 0);
      mpic_log(1, "set OMPI_MCA_btl=^ofi: all %s ranks are on this node, and btl/ofi's libfabric probing "
                  "costs a second of MPI_Init", world);
    }
    break;
  case MPIC_FAMILY_STANDARD:
    missing = standard_activate(lib);
    mpic_native_finalized = standard_mpi_finalized;
    break;
  }
  if (missing) mpic_log(1, "%s lacks %d functions; they return MPI_ERR_UNSUPPORTED_OPERATION: %s",
                        mpic_lib_path, missing, mpic_missing);
  mpic_family = family;
  mpic_log(1, "loaded %s (%s)", mpic_lib_path, mpic_family_reason);
  return 1;
}

/* Library names to look for, per family; with no family forced, the MPICH
 * ABI and Open MPI ones (the standard ABI is chosen explicitly, since the
 * mpich wheel installs it beside libmpi.so.12). */
static const char *const mpic_names_mpich[] = {"libmpi.so.12", "libmpich.so.12", NULL};
static const char *const mpic_names_openmpi[] = {"libmpi.so.40", NULL};
static const char *const mpic_names_standard[] = {"libmpi_abi.so.1", "libmpi_abi.so", NULL};
static const char *const mpic_names_any[] = {"libmpi.so.12", "libmpich.so.12", "libmpi.so.40", NULL};
static const char *const *mpic_search_names(void) {
  switch (mpic_forced_family()) {
  case MPIC_FAMILY_MPICH: return mpic_names_mpich;
  case MPIC_FAMILY_OPENMPI: return mpic_names_openmpi;
  case MPIC_FAMILY_STANDARD: return mpic_names_standard;
  default: return mpic_names_any;
  }
}

/* Prefixes that hold a lib/ directory where a wheel may have put libmpi: the
 * installation prefix of every Python package already loaded in the process
 * (jaxlib, ourselves: found through their .../lib/pythonX.Y/site-packages
 * path), then the usual environment variables. */
struct mpic_prefixes {
  char dirs[16][1024];
  int n;
};
static void mpic_add_prefix(struct mpic_prefixes *p, const char *dir, size_t len) {
  if (!dir || !len || p->n >= 16 || len >= sizeof p->dirs[0]) return;
  for (int i = 0; i < p->n; i++)
    if (strlen(p->dirs[i]) == len && !strncmp(p->dirs[i], dir, len)) return;
  memcpy(p->dirs[p->n], dir, len);
  p->dirs[p->n][len] = 0;
  p->n++;
}
static int mpic_collect_prefix(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  const char *name = info->dlpi_name;
  const char *sp = name ? strstr(name, "/site-packages/") : NULL;
  if (!sp) return 0;
  const char *lib = sp;
  while (lib > name && !(lib[0] == '/' && !strncmp(lib, "/lib/python", 11))) lib--;
  if (lib > name) mpic_add_prefix(data, name, (size_t)(lib - name));
  return 0;
}

static void mpic_load(void) {
  const char *env = getenv("MPI_COLLECTIVES_LIBMPI");
  if (env && *env) {
    /* An explicit choice is final: falling back to another MPI would hide the mistake. */
    mpic_try(env, RTLD_NOW | RTLD_LOCAL);
    if (!mpic_lib) report("(MPI_COLLECTIVES_LIBMPI=%s) ", env);
    return;
  }
  const char *const *names = mpic_search_names();
  for (size_t i = 0; names[i]; i++)
    if (mpic_try(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return;

  struct mpic_prefixes prefixes = {.n = 0};
  const char *hint = getenv("MPI_COLLECTIVES_PREFIXES"); /* set by our Python layer: sys.prefix, ... */
  while (hint && *hint) {
    const char *end = strchr(hint, ':');
    size_t len = end ? (size_t)(end - hint) : strlen(hint);
    mpic_add_prefix(&prefixes, hint, len);
    hint = end ? end + 1 : NULL;
  }
  Dl_info self;
  if (dladdr((void *)mpic_load, &self) && self.dli_fname) {
    const char *sp = strstr(self.dli_fname, "/lib/python");
    if (sp) mpic_add_prefix(&prefixes, self.dli_fname, (size_t)(sp - self.dli_fname));
  }
  dl_iterate_phdr(mpic_collect_prefix, &prefixes);
  const char *vars[] = {"VIRTUAL_ENV", "CONDA_PREFIX"};
  for (size_t i = 0; i < 2; i++) {
    const char *v = getenv(vars[i]);
    if (v) mpic_add_prefix(&prefixes, v, strlen(v));
  }
  const char *home = getenv("HOME");
  char local[1024];
  if (home) {
    snprintf(local, sizeof local, "%s/.local", home);
    mpic_add_prefix(&prefixes, local, strlen(local));
  }
  mpic_add_prefix(&prefixes, "/usr/local", strlen("/usr/local"));
  for (int i = 0; i < prefixes.n; i++)
    for (size_t j = 0; names[j]; j++) {
      char path[1100];
      snprintf(path, sizeof path, "%s/lib/%s", prefixes.dirs[i], names[j]);
      if (access(path, F_OK) != 0) continue;
      if (mpic_try(path, RTLD_NOW | RTLD_LOCAL)) return;
    }
  report("no ");
  for (size_t j = 0; names[j]; j++) report("%s%s", j ? " or " : "", names[j]);
  report(" under %d prefixes (", prefixes.n);
  for (int i = 0; i < prefixes.n; i++) report("%s%s", i ? ", " : "", prefixes.dirs[i]);
  report("); ");
  /* Last, the loader's own search: LD_LIBRARY_PATH, the ld.so cache. */
  for (size_t i = 0; names[i]; i++)
    if (mpic_try(names[i], RTLD_NOW | RTLD_LOCAL)) return;
}

static void mpic_read_settings(void) {
  const char *v = getenv("MPI_COLLECTIVES_VERBOSE");
  if (v && *v) mpic_verbose = atoi(v);
  const char *a = getenv("MPI_COLLECTIVES_ANY_THREAD");
  if (a && *a) mpic_any_thread = atoi(a) != 0;
  const char *c = getenv("MPI_COLLECTIVES_CHECK_SPLITS");
  if (c && *c) mpic_check_splits = atoi(c) != 0;
  if (mpic_forced_family() < 0)
    mpic_log(0, "MPI_COLLECTIVES_ABI=%s is not one of mpich, openmpi, standard; detecting the ABI instead",
             getenv("MPI_COLLECTIVES_ABI"));
  const char *t = getenv("MPI_COLLECTIVES_THREAD_LEVEL");
  if (t && *t) {
    static const char *const names[] = {"single", "funneled", "serialized", "multiple"};
    int found = 0;
    for (int i = 0; i < 4; i++)
      if (!strcasecmp(t, names[i])) mpic_thread_policy_level = i, found = 1;
    if (!strcasecmp(t, "requested")) mpic_thread_policy_level = -1, found = 1;
    if (!found)
      mpic_log(0, "MPI_COLLECTIVES_THREAD_LEVEL=%s is not one of single, funneled, serialized, "
                  "multiple, requested; using multiple", t);
  }
}

/* jaxlib reads the constants as soon as dlopen returns: fill them in now. */
__attribute__((constructor)) static void mpic_constructor(void) {
  mpic_read_settings();
  mpich_set_constants(NULL); /* defined values even when no MPI can be loaded */
  mpic_load();
  if (!mpic_lib) mpic_log(1, "no MPI library loaded: %s", mpic_report);
}

/* ---- what the Python layer asks (declared in mpi_collectives/_build_native.py) ---- */
MPIABI_EXPORT const char *mpic_family_name(void) {
  return mpic_family_names[mpic_family];
}
MPIABI_EXPORT const char *mpic_library_path(void) { return mpic_lib_path; }
MPIABI_EXPORT const char *mpic_load_report(void) { return mpic_report; }
MPIABI_EXPORT const char *mpic_family_detail(void) { return mpic_family_reason; }
MPIABI_EXPORT const char *mpic_missing_functions(void) { return mpic_missing; }
MPIABI_EXPORT int mpic_we_initialized(void) { return mpic_initialized_by_us; }
MPIABI_EXPORT int mpic_thread_policy_value(void) { return mpic_thread_policy_level; }
MPIABI_EXPORT int mpic_trampoline_attached(void) { return mpic_attached; }

long mpic_waiting_now;
unsigned long mpic_waits_begun;

/* For mpi_collectives.peers: calls now waiting for other ranks, and how many
 * such calls have begun. Two samples with the same count of begun calls and
 * a call waiting in both mean one wait has lasted from the first to the second. */
MPIABI_EXPORT int mpic_wait_state(long *waiting, unsigned long *begun) {
  *begun = __atomic_load_n(&mpic_waits_begun, __ATOMIC_RELAXED);
  *waiting = __atomic_load_n(&mpic_waiting_now, __ATOMIC_RELAXED);
  return 0;
}

/* Yama's ptrace_scope 1 where the kernel has none (issues 71, 81): preloaded
 * (LD_PRELOAD) into a rank, it answers "1" for
 * /proc/sys/kernel/yama/ptrace_scope and logs every prctl(PR_SET_PTRACER)
 * ("SHIM pid P: PR_SET_PTRACER ANY|0|<pid> from <the caller's library>") instead of making it, so a test
 * reads who each rank let read its memory, and when it took that back. The
 * wrapper must be bound to these functions: conformance_runner.py loads it
 * first when CONFORMANCE_LOAD_WRAPPER_FIRST=1 (MPItrampoline's RTLD_DEEPBIND
 * would bind it to the C library's own).
 *
 * With YAMA_SHIM_DIR set, it also keeps Yama's rule: each process's one
 * ptracer is a file of that folder named by its pid (what the last
 * PR_SET_PTRACER named; deleted by PR_SET_PTRACER 0), and process_vm_readv of
 * another process fails with EPERM unless that process named any process, or
 * the reader or one of the reader's ancestors. YAMA_SHIM_NAME_ANY=1 names any
 * process at the start, as Open MPI's smsc/cma and UCX do at MPI_Init ("SHIM pid
 * P: PR_SET_PTRACER ANY from the library, at its start"). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

static void ledger_path(char *path, size_t size, int pid) {
  snprintf(path, size, "%s/%d", getenv("YAMA_SHIM_DIR"), pid);
}

/* What pid's last PR_SET_PTRACER named, as Yama keeps it. */
static void ledger_write(int pid, unsigned long who) {
  if (!getenv("YAMA_SHIM_DIR")) return;
  char path[4096];
  ledger_path(path, sizeof path, pid);
  if (who == 0) {
    unlink(path);
    return;
  }
  FILE *f = fopen(path, "w");
  if (!f) return;
  if (who == (unsigned long)PR_SET_PTRACER_ANY) fputs("ANY\n", f);
  else fprintf(f, "%lu\n", who);
  fclose(f);
}

static int parent_of(int pid) {
  char path[64], text[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t got = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[got] = 0;
  const char *close = strrchr(text, ')');
  int ppid = 0;
  char state;
  return close && sscanf(close + 1, " %c %d", &state, &ppid) == 2 ? ppid : 0;
}

/* Yama's ptrace_scope 1 for a read of pid by this process. */
static int allowed(int pid) {
  if (!getenv("YAMA_SHIM_DIR") || pid == getpid()) return 1;
  for (int p = parent_of(pid); p > 1; p = parent_of(p))
    if (p == getpid()) return 1; /* a descendant of the reader */
  char path[4096], text[32] = "";
  ledger_path(path, sizeof path, pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int got = fgets(text, sizeof text, f) != NULL;
  fclose(f);
  if (!got) return 0;
  if (!strncmp(text, "ANY", 3)) return 1;
  int named = atoi(text);
  for (int p = getpid(); p > 0; p = parent_of(p))
    if (p == named) return 1; /* the reader is the named process or one of its descendants */
  return 0;
}

__attribute__((constructor)) static void start(void) {
  const char *any = getenv("YAMA_SHIM_NAME_ANY");
  if (any && atoi(any)) {
    ledger_write(getpid(), (unsigned long)PR_SET_PTRACER_ANY);
    fprintf(stderr, "SHIM pid %d: PR_SET_PTRACER ANY from the library, at its start\n", (int)getpid());
  }
}

FILE *fopen(const char *path, const char *mode) {
  static FILE *(*real)(const char *, const char *);
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "fopen");
  if (path && !strcmp(path, "/proc/sys/kernel/yama/ptrace_scope")) {
    static char one[] = "1\n";
    return fmemopen(one, 2, "r");
  }
  return real(path, mode);
}

int prctl(int option, ...) {
  va_list ap;
  va_start(ap, option);
  unsigned long a[4];
  for (int i = 0; i < 4; i++) a[i] = va_arg(ap, unsigned long);
  va_end(ap);
  if (option == PR_SET_PTRACER) {
    /* who asked: the wrapper, or the MPI library (Intel MPI names the launcher's process itself) */
    Dl_info info;
    const char *from = dladdr(__builtin_return_address(0), &info) && info.dli_fname ? info.dli_fname : "?";
    const char *base = strrchr(from, '/') ? strrchr(from, '/') + 1 : from;
    if (a[0] == (unsigned long)PR_SET_PTRACER_ANY)
      fprintf(stderr, "SHIM pid %d: PR_SET_PTRACER ANY from %s\n", (int)getpid(), base);
    else fprintf(stderr, "SHIM pid %d: PR_SET_PTRACER %lu from %s\n", (int)getpid(), a[0], base);
    ledger_write(getpid(), a[0]);
    return 0;
  }
  static int (*real)(int, ...);
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "prctl");
  return real(option, a[0], a[1], a[2], a[3]);
}

ssize_t process_vm_readv(pid_t pid, const struct iovec *local, unsigned long nlocal, const struct iovec *remote,
                         unsigned long nremote, unsigned long flags) {
  static ssize_t (*real)(pid_t, const struct iovec *, unsigned long, const struct iovec *, unsigned long,
                         unsigned long);
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "process_vm_readv");
  if (!allowed((int)pid)) {
    errno = EPERM;
    return -1;
  }
  return real(pid, local, nlocal, remote, nremote, flags);
}

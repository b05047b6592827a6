/* Yama's ptrace_scope 1 where the kernel has none (issue 71): preloaded
 * (LD_PRELOAD) into a rank, it answers "1" for
 * /proc/sys/kernel/yama/ptrace_scope and logs every prctl(PR_SET_PTRACER)
 * ("SHIM pid P: PR_SET_PTRACER ANY|0|<pid> from <the caller's library>") instead of making it, so a test
 * reads who each rank let read its memory, and when it took that back. The
 * wrapper must be bound to these functions: conformance_runner.py loads it
 * first when CONFORMANCE_LOAD_WRAPPER_FIRST=1 (MPItrampoline's RTLD_DEEPBIND
 * would bind it to the C library's own). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

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
    return 0;
  }
  static int (*real)(int, ...);
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "prctl");
  return real(option, a[0], a[1], a[2], a[3]);
}

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include "launcher_env.h"
#include "log.h"
#include "settings.h"

/* The descriptor the process's stderr was when the wrapper was loaded (or the
 * one Python kept before pytest captured descriptor 2: mpic_log_keep_terminal).
 * A line that ends a job must reach the person who runs it: pytest, and any
 * program that redirects descriptor 2 for a while, would keep it in a file
 * that nobody reads once the job is gone. */
static int terminal = 2;

__attribute__((constructor)) static void keep_terminal(void) {
  int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
  if (fd >= 0) terminal = fd;
}

int mpic_terminal(void) { return __atomic_load_n(&terminal, __ATOMIC_RELAXED); }

int mpic_log_keep_terminal(int fd) {
  if (fd < 0 || fcntl(fd, F_GETFD) < 0) return 1;
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (copy < 0) return 1;
  int old = __atomic_exchange_n(&terminal, copy, __ATOMIC_SEQ_CST);
  (void)old; /* kept open: a thread may be writing to it */
  return 0;
}

void mpic_terminal_write(const char *text, size_t len) {
  int fd = mpic_terminal();
  while (len > 0) {
    ssize_t w = write(fd, text, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    text += w, len -= (size_t)w;
  }
}

void mpic_terminal_printf(const char *fmt, ...) {
  char text[4096];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  fflush(stderr); /* whatever the library printed first stays first */
  mpic_terminal_write(text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1);
}

void mpic_log(int level, const char *fmt, ...) {
  if (level > mpic_settings.verbose) return;
  char line[1024], where[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  mpic_terminal_printf("mpi-collectives [%s]: %s\n", mpic_launcher_where(where, sizeof where), line);
}

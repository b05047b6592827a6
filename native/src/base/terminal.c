/* The terminal (terminal.h): the descriptor every line of the wrapper goes to. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include "terminal.h"

/* Descriptor 2 as it was when the wrapper was loaded; Python's copy of the
 * stderr it had before pytest captured descriptor 2 replaces it
 * (mpic_terminal_keep). */
static int terminal = 2;

__attribute__((constructor)) static void keep_terminal(void) {
  int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
  if (fd >= 0) terminal = fd;
}

int mpic_terminal(void) { return __atomic_load_n(&terminal, __ATOMIC_RELAXED); }

int mpic_terminal_keep(int fd) {
  if (fd < 0 || fcntl(fd, F_GETFD) < 0) return 1;
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (copy < 0) return 1;
  /* the old copy stays open: a thread may be writing to it */
  __atomic_store_n(&terminal, copy, __ATOMIC_SEQ_CST);
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

#define _GNU_SOURCE
/* This rank's answer to "is your host still there?" (the why is in
 * mpi_collectives/services/liveness.py). A listening TCP socket on the address by
 * which this rank reaches JAX's coordinator, and a thread of its own that
 * writes one line to whoever connects and closes. In C, so that a rank
 * whose Python is busy (a C extension holding the interpreter lock) still
 * answers: no answer must mean the host is cut off or stopped, never that
 * the rank is busy. A healthy job costs one idle thread and one socket. */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "common.h"
#include "threads.h"

static int listener = -1;
static char answer[96];
static size_t answer_len;

static void *answer_each(void *unused) {
  (void)unused;
  for (;;) {
    int c = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) continue; /* EINTR, a peer that gave up, fd pressure: keep listening */
    ssize_t w = send(c, answer, answer_len, MSG_NOSIGNAL);
    (void)w;
    close(c);
  }
  return NULL;
}

/* For Python (mpi_collectives.services.liveness): listen on `address` (a numeric
 * IPv4 or IPv6 address), an ephemeral port, answered by a detached thread.
 * Returns the port, or -1 (with nothing left open). Once per process: a
 * second call returns the first port. */
MPIABI_EXPORT int mpic_liveness_listen(const char *address, int rank) {
  static int port = -1;
  if (listener >= 0) return port;
  struct addrinfo hints, *found = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(address, "0", &hints, &found) != 0 || !found) return -1;
  int s = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0 || bind(s, found->ai_addr, found->ai_addrlen) != 0 || listen(s, SOMAXCONN) != 0) {
    if (s >= 0) close(s);
    freeaddrinfo(found);
    return -1;
  }
  freeaddrinfo(found);
  struct sockaddr_storage bound;
  socklen_t len = sizeof bound;
  if (getsockname(s, (struct sockaddr *)&bound, &len) != 0) {
    close(s);
    return -1;
  }
  char service[16];
  if (getnameinfo((struct sockaddr *)&bound, len, NULL, 0, service, sizeof service, NI_NUMERICSERV) != 0) {
    close(s);
    return -1;
  }
  int n = snprintf(answer, sizeof answer, "mpi-collectives rank %d pid %d alive\n", rank, (int)getpid());
  answer_len = n < 0 ? 0 : (size_t)n < sizeof answer ? (size_t)n : sizeof answer - 1;
  listener = s;
  if (mpic_start_detached(answer_each, NULL) != 0) {
    close(s);
    listener = -1;
    return -1;
  }
  port = atoi(service);
  return port;
}

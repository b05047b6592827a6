#define _GNU_SOURCE
/* Watching the processes of the other ranks on this node (see
 * mpi_collectives/services/peers.py for the why). In C, on a thread of its own,
 * because the line naming a dead rank must be out before the launcher,
 * which learns of the death at the same moment, kills this process: a
 * Python thread would first wait for the interpreter lock. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include "common.h"
#include "end_job.h"
#include "peer_watch.h"
#include "pidfd.h"
#include "stop_signals.h"


static struct {
  struct pollfd *fds; /* fds[0]: the stop pipe; then one pidfd per peer */
  int *ranks, *pids, n, stop[2], rank, size;
  char host[256];
  pthread_t thread;
  int running;
} watch;

static void *watch_loop(void *unused) {
  (void)unused;
  for (;;) {
    if (poll(watch.fds, watch.n + 1, -1) < 0) {
      if (errno == EINTR) continue;
      return NULL;
    }
    if (watch.fds[0].revents) return NULL;
    for (int i = 0; i < watch.n; i++) {
      if (!watch.fds[i + 1].revents) continue;
      /* A job being stopped (SIGTERM to every rank) loses its ranks one by
       * one: a rank whose own stop signal is a moment behind must not blame
       * the first to go. */
      struct timespec moment = {0, 300 * 1000 * 1000};
      nanosleep(&moment, NULL);
      if (__atomic_load_n(&mpic_stopping, __ATOMIC_SEQ_CST) || watch.fds[0].revents) return NULL;
      mpic_fatal("rank %d (pid %d on %s) ended while the job was still running, before finishing its "
                 "program: killed (SIGKILL, the out-of-memory killer), crashed, called os._exit, or stopped "
                 "by its MPI library's own error handler. Ending the whole job (seen by rank %d/%d). Fix: see "
                 "that rank's own output and the launcher's report (exit code, signal) for why it ended.",
                 watch.ranks[i], watch.pids[i], watch.host, watch.rank, watch.size);
    }
  }
}

/* Start watching n processes (their ranks and pids); returns how many could be watched. */
MPIABI_EXPORT int mpic_watch_peers(const int *ranks, const int *pids, int n, int rank, int size,
                                   const char *host) {
  if (watch.running || pipe2(watch.stop, O_CLOEXEC) != 0) return 0;
  watch.fds = calloc((size_t)n + 1, sizeof *watch.fds);
  watch.ranks = calloc((size_t)n + 1, sizeof *watch.ranks);
  watch.pids = calloc((size_t)n + 1, sizeof *watch.pids);
  if (!watch.fds || !watch.ranks || !watch.pids) return 0;
  watch.fds[0].fd = watch.stop[0];
  watch.fds[0].events = POLLIN;
  for (int i = 0; i < n; i++) {
    long fd = syscall(SYS_pidfd_open, pids[i], PIDFD_THREAD); /* the main thread: see below */
    if (fd < 0) fd = syscall(SYS_pidfd_open, pids[i], 0);
    if (fd < 0) continue; /* gone already, or a kernel before 5.3: left to the launcher */
    watch.fds[watch.n + 1].fd = (int)fd;
    watch.fds[watch.n + 1].events = POLLIN;
    watch.ranks[watch.n] = ranks[i];
    watch.pids[watch.n] = pids[i];
    watch.n++;
  }
  watch.rank = rank;
  watch.size = size;
  snprintf(watch.host, sizeof watch.host, "%s", host);
  if (pthread_create(&watch.thread, NULL, watch_loop, NULL) != 0) return 0;
  watch.running = 1;
  return watch.n;
}

/* An MPI call of this rank failed: did a rank of this node end first? MPI
 * often sees a peer's death (its shared memory or its process gone) before
 * anything else does, and then the dead rank, not MPI's error stack, is the
 * cause to name. Waits up to wait_ms for a pidfd that lags the death; writes
 * "rank R (pid P on HOST)" into out. */
int mpic_watch_dead_peer(int wait_ms, char *out, size_t len) {
  if (!watch.running || watch.n == 0) return 0;
  struct pollfd *fds = calloc((size_t)watch.n, sizeof *fds);
  if (!fds) return 0;
  for (int i = 0; i < watch.n; i++) fds[i].fd = watch.fds[i + 1].fd, fds[i].events = POLLIN;
  int found = -1;
  if (poll(fds, (nfds_t)watch.n, wait_ms) > 0)
    for (int i = 0; i < watch.n && found < 0; i++)
      if (fds[i].revents) found = i;
  free(fds);
  if (found < 0) return 0;
  snprintf(out, len, "rank %d (pid %d on %s)", watch.ranks[found], watch.pids[found], watch.host);
  return 1;
}

/* This rank's program has finished: its peers may now end without alarm. (The
 * functions Python calls return int: a void one would make cffi refer to
 * Py_None, a data symbol the C conformance harness cannot resolve.) */
MPIABI_EXPORT int mpic_watch_stop(void) {
  if (!watch.running) return 0;
  watch.running = 0;
  if (write(watch.stop[1], "x", 1) == 1) pthread_join(watch.thread, NULL);
  return 0;
}

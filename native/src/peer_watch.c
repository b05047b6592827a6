#define _GNU_SOURCE
/* Watching the processes of the other ranks on this node (see
 * mpi_collectives/peers.py for the why). In C, on a thread of its own,
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
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include "end_job.h"
#include "peer_watch.h"
#include "stop_signals.h"

#include "common.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every Linux architecture */
#endif

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
    long fd = syscall(SYS_pidfd_open, pids[i], 0);
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

/* This rank's program has finished: its peers may now end without alarm. (The
 * functions Python calls return int: a void one would make cffi refer to
 * Py_None, a data symbol the C conformance harness cannot resolve.) */
MPIABI_EXPORT int mpic_watch_stop(void) {
  if (!watch.running) return 0;
  watch.running = 0;
  if (write(watch.stop[1], "x", 1) == 1) pthread_join(watch.thread, NULL);
  return 0;
}

/* ---- the rank's own death ----
 * A launcher that ends the job when one rank dies (Hydra) kills the others
 * at once, before their watch threads run, and its report then names some
 * other PID. So each rank also forks a small process, in a session of its
 * own so the launcher's clean-up does not reach it, that waits for the
 * rank to end. If the rank ends before saying it finished, the process
 * claims the node's report file for this job (O_EXCL: the first death on
 * the node claims it; the ranks the launcher kills next find it taken) and
 * prints one line naming the rank. Everything it prints is made before the
 * fork: after fork() in a threaded process only async-signal-safe calls. */
static int self_pipe[2] = {-1, -1};
static struct sockaddr_un report_name;
static socklen_t report_name_len;

/* The claim is an abstract Unix socket name: the first process to bind it
 * holds it; it disappears with the process, so nothing is left on disk. */
static int claim_report(void) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  if (bind(fd, (struct sockaddr *)&report_name, report_name_len) != 0) {
    close(fd);
    return 0;
  }
  return 1; /* held until this process exits */
}

/* Hold the claim while the launcher kills the rest of the node's ranks,
 * without holding the output pipe open (the launcher waits for it), and
 * leave as soon as they are all gone (at most 3 s): nothing of the job may
 * outlive it by more than a moment. */
static struct pollfd *held_fds;
static int held_n;
__attribute__((noreturn)) static void hold_claim_and_exit(void) {
  close(2);
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    int alive = 0;
    for (int i = 0; i < held_n; i++)
      if (held_fds[i].fd >= 0 && !held_fds[i].revents) alive++;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long waited_ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (!alive || waited_ms >= 3000) _exit(0);
    if (poll(held_fds, (nfds_t)held_n, (int)(3000 - waited_ms)) < 0 && errno != EINTR) _exit(0);
  }
}

/* The rank is done (finished its program, or ends the job itself with its
 * own message): 'f' makes the process leave silently; 'q' also claims the
 * report so that the ranks killed next are not named instead. */
static void tell_self_watcher(char what) {
  if (self_pipe[1] < 0) return;
  ssize_t w = write(self_pipe[1], &what, 1);
  (void)w;
  close(self_pipe[1]);
  self_pipe[1] = -1;
}

MPIABI_EXPORT int mpic_watch_self_finished(void) { tell_self_watcher('f'); return 0; }
MPIABI_EXPORT int mpic_watch_self_quiet(void) { tell_self_watcher('q'); return 0; }

#define MAX_LINE 1024

/* Every process of this job on the node (this rank included) ends: the
 * watcher that sees exactly one of them gone knows which ended first. */
MPIABI_EXPORT int mpic_watch_self(const int *ranks, const int *pids, int n, int rank, int size,
                                  const char *host, const char *job_key) {
  int total = n + 1;
  char *lines = calloc((size_t)total, MAX_LINE);
  int *lens = calloc((size_t)total, sizeof *lens);
  struct pollfd *fds = calloc((size_t)total + 1, sizeof *fds);
  if (!lines || !lens || !fds) return 0;
  for (int i = 0; i < total; i++) {
    int r = i < n ? ranks[i] : rank;
    int pid = i < n ? pids[i] : (int)getpid();
    lens[i] = snprintf(lines + (size_t)i * MAX_LINE, MAX_LINE,
                       "mpi-collectives: error: rank %d/%d (pid %d on %s) ended before finishing its program: "
                       "killed by a signal (SIGKILL, the out-of-memory killer), crashed, called os._exit, or was "
                       "aborted (by JAX when another node stopped answering, or by its MPI library). "
                       "It was the first process of this job on %s to end; the launcher ends the others. "
                       "Fix: see that rank's own output, and dmesg for the out-of-memory killer.\n",
                       r, size, pid, host, host);
    if (lens[i] >= MAX_LINE) lens[i] = MAX_LINE - 1;
    long fd = syscall(SYS_pidfd_open, pid, 0);
    fds[i].fd = fd < 0 ? -1 : (int)fd; /* poll ignores negative fds */
    fds[i].events = POLLIN;
  }
  memset(&report_name, 0, sizeof report_name);
  report_name.sun_family = AF_UNIX;
  int k = snprintf(report_name.sun_path + 1, sizeof report_name.sun_path - 1, "mpi-collectives-%s", job_key);
  report_name_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
  if (fds[n].fd < 0 || pipe2(self_pipe, O_CLOEXEC) != 0) return 0;
  pid_t child = fork();
  if (child < 0) return 0;
  if (child > 0) {
    close(self_pipe[0]);
    for (int i = 0; i < total; i++)
      if (fds[i].fd >= 0) close(fds[i].fd);
    free(lines), free(lens), free(fds);
    return 1;
  }
  /* The watcher process: only async-signal-safe calls from here on. */
  setsid();
  held_fds = fds;
  held_n = total;
  fds[total].fd = self_pipe[0];
  fds[total].events = POLLIN;
  for (int fd = 0; fd < 65536; fd++) {
    int keep = fd == 2;
    for (int i = 0; i <= total && !keep; i++) keep = fds[i].fd == fd;
    if (!keep) close(fd);
  }
  for (;;) {
    if (poll(fds, (nfds_t)total + 1, -1) < 0) {
      if (errno == EINTR) continue;
      _exit(0);
    }
    if (fds[total].revents) {
      char what = 0;
      if (read(self_pipe[0], &what, 1) == 1) {
        if (what == 'q' && claim_report()) hold_claim_and_exit();
        _exit(0);
      }
      fds[total].fd = -1; /* EOF without a word: the rank died; its pidfd says so too */
    }
    int gone = 0, which = -1;
    for (int i = 0; i < total; i++)
      if (fds[i].fd >= 0 && fds[i].revents) gone++, which = i;
    if (gone == 0) continue;
    if (gone > 1) {
      /* Woken late: which ended first is unknown here; a watcher woken in time names it. */
      struct timespec wait = {0, 200 * 1000 * 1000};
      nanosleep(&wait, NULL);
      _exit(0);
    }
    if (claim_report()) {
      ssize_t w = write(2, lines + (size_t)which * MAX_LINE, (size_t)lens[which]);
      (void)w;
      hold_claim_and_exit();
    }
    _exit(0);
  }
}

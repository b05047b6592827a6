#define _GNU_SOURCE
/* This rank's own end, seen by a process of its own (self_watch.h; the why
 * is in mpi_collectives/services/peers.py and below). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "terminal.h"
#include "common.h"
#include "pidfd.h"
#include "self_watch.h"
#include "shm_names.h"

/* ---- the rank's own death ----
 * A launcher that ends the job when one rank dies (Hydra) kills the others
 * at once, before their watch threads run, and its report then names some
 * other PID. So each rank also forks a small process, in a session of its
 * own so the launcher's clean-up does not reach it, that waits for the
 * processes of the job on this node to end. The first of them to end, if it
 * had not said it finished, is named in one line, by whichever watcher
 * claims the node's report first (the ranks the launcher kills next find it
 * taken). Everything it prints is made before the fork: after fork() in a
 * threaded process only async-signal-safe calls.
 *
 * Which process ended first must be seen in the order the ends happened,
 * the same in every watcher:
 * - A process's pidfd becomes readable only when its last thread has gone
 *   through exit_notify, which on a busy node comes milliseconds after its
 *   files were closed; the launcher learns of the death from those files
 *   (its pipes, the PMI socket) and may have killed another rank by then
 *   (seen: Hydra's next victim named, 1 run in 20 on 2 cores). So each rank
 *   holds the write end of a "life pipe" that nobody writes to; every
 *   watcher on the node opens a reader on it (/proc/PID/fd/N of a pipe opens
 *   the pipe itself), and its hang-up comes with the same closing of files
 *   the launcher sees.
 * - Earlier still, the main thread's end: an MPI library can see a peer's
 *   memory gone (MPICH's process_vm_readv fails once the main thread has
 *   left its address space) and abort its own rank before the dead one's
 *   last thread has closed its files (seen too). A pidfd of the main thread
 *   alone (PIDFD_THREAD, Linux 6.9 on) is readable as soon as that thread
 *   has ended; older kernels fall back to the process's pidfd.
 * - One epoll set holds all of them: its ready list is kept in the order the
 *   wake-ups came, so even a watcher that runs late reads the first end
 *   first. */
static int self_pipe[2] = {-1, -1}; /* this rank's messages to its watcher: 'f' or 'q' */
static int life_pipe[2] = {-1, -1}; /* never written; its hang-up is this rank's end */
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
static int *held_pidfds;
static int held_n;
__attribute__((noreturn)) static void hold_claim_and_exit(void) {
  close(2);
  struct pollfd fds[256];
  int n = 0;
  for (int i = 0; i < held_n && n < 256; i++)
    if (held_pidfds[i] >= 0) fds[n].fd = held_pidfds[i], fds[n].events = POLLIN, fds[n].revents = 0, n++;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    int alive = 0;
    for (int i = 0; i < n; i++)
      if (fds[i].fd >= 0 && !fds[i].revents) alive++;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long waited_ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (!alive || waited_ms >= 3000) _exit(0);
    if (poll(fds, (nfds_t)n, (int)(3000 - waited_ms)) < 0 && errno != EINTR) _exit(0);
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

/* Make this rank's life pipe, before the ranks of the node exchange their
 * pids: returns the descriptor number of its write end (-1: none), which the
 * other ranks' watchers open through /proc. */
MPIABI_EXPORT int mpic_watch_self_prepare(void) {
  if (life_pipe[1] < 0 && pipe2(life_pipe, O_CLOEXEC) != 0) return -1;
  return life_pipe[1];
}

#define MAX_LINE 1024
#define MESSAGES (-1) /* epoll data of the message pipe; otherwise the index of a process */

/* A reader on another process's life pipe; -1 when /proc does not allow it. */
static int open_life_reader(int pid, int fd) {
  if (fd < 0) return -1;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
  int reader = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (reader < 0) return -1;
  struct stat st;
  if (fstat(reader, &st) != 0 || !S_ISFIFO(st.st_mode)) { /* not the pipe it announced */
    close(reader);
    return -1;
  }
  return reader;
}

/* What /proc says of a process's main thread (fields 3, 9, 23 and 52 of its
 * stat): read with system calls alone, in the watcher process. */
struct main_thread {
  char state;
  unsigned long flags, vsize, exit_code;
};

static int read_main_thread(const char *stat_path, struct main_thread *t) {
  char buf[1024];
  int fd = open(stat_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t got = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (got <= 0) return 0;
  buf[got] = 0;
  char *p = NULL;
  for (char *q = buf; *q; q++)
    if (*q == ')') p = q; /* the command name may hold anything: its last ')' ends it */
  if (!p) return 0;
  memset(t, 0, sizeof *t);
  int field = 2;
  for (p++; *p && field < 52;) {
    while (*p == ' ') p++;
    if (!*p) break;
    field++;
    unsigned long v = 0;
    if (field == 3) t->state = *p;
    for (; *p && *p != ' '; p++) v = *p >= '0' && *p <= '9' ? v * 10 + (unsigned long)(*p - '0') : v;
    if (field == 9) t->flags = v;
    if (field == 23) t->vsize = v;
    if (field == 52) t->exit_code = v;
  }
  return field >= 23;
}

#define PF_EXITING_FLAG 0x4 /* the kernel's PF_EXITING: the thread is in do_exit */

/* Ended by exit() with a status, not by a signal (waitpid's WIFEXITED). */
static int exited_on_its_own(const char *stat_path) {
  struct main_thread t;
  return read_main_thread(stat_path, &t) && (t.exit_code & 0x7f) == 0;
}

/* Its main thread is ending, or has ended: in do_exit, without its memory, or a zombie. */
static int dying(const char *stat_path) {
  struct main_thread t;
  if (!read_main_thread(stat_path, &t)) return 0;
  return t.state == 'Z' || t.state == 'X' || (t.flags & PF_EXITING_FLAG) || t.vsize == 0;
}

static int watch_add(int ep, int fd, int index) {
  if (fd < 0) return 0;
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)index};
  return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0;
}

/* What the watcher process holds, made before the fork. Index i < n is the
 * peer ranks[i]; index n is this rank. */
struct watched {
  int total;
  char *lines;           /* total lines of MAX_LINE: what is printed if that process ends first */
  int *lens, *pidfds, *lifefds;
  char (*stat_paths)[48];
  int ep;                /* the epoll set of every pidfd and life pipe, and the message pipe */
};

static void watched_free(struct watched *w) {
  free(w->lines), free(w->lens), free(w->pidfds), free(w->lifefds), free(w->stat_paths);
}

/* Lines, pidfds, life-pipe readers and /proc paths of every process; 0 when
 * the watch cannot be set up (nothing is watched then). */
static int watched_make(struct watched *w, const int *ranks, const int *pids, const int *life_fds, int n,
                        int rank, int size, const char *host) {
  int total = w->total = n + 1;
  w->lines = calloc((size_t)total, MAX_LINE);
  w->lens = calloc((size_t)total, sizeof *w->lens);
  w->pidfds = calloc((size_t)total, sizeof *w->pidfds);
  w->lifefds = calloc((size_t)total, sizeof *w->lifefds);
  w->stat_paths = calloc((size_t)total, sizeof *w->stat_paths);
  if (!w->lines || !w->lens || !w->pidfds || !w->lifefds || !w->stat_paths) return 0;
  if (life_pipe[0] < 0 && mpic_watch_self_prepare() < 0) return 0;
  w->ep = epoll_create1(EPOLL_CLOEXEC);
  if (w->ep < 0 || pipe2(self_pipe, O_CLOEXEC) != 0) return 0;
  for (int i = 0; i < total; i++) {
    int r = i < n ? ranks[i] : rank;
    int pid = i < n ? pids[i] : (int)getpid();
    w->lens[i] = snprintf(w->lines + (size_t)i * MAX_LINE, MAX_LINE,
                          "mpi-collectives: error: rank %d/%d (pid %d on %s) ended before finishing its program: "
                          "killed by a signal (SIGKILL, the out-of-memory killer), crashed, called os._exit, or "
                          "was aborted (by JAX when another node stopped answering, or by its MPI library). "
                          "It was the first process of this job on %s to end; the launcher ends the others. "
                          "Fix: see that rank's own output, and dmesg for the out-of-memory killer.\n",
                          r, size, pid, host, host);
    if (w->lens[i] >= MAX_LINE) w->lens[i] = MAX_LINE - 1;
    snprintf(w->stat_paths[i], sizeof w->stat_paths[i], "/proc/%d/stat", pid);
    long fd = syscall(SYS_pidfd_open, pid, PIDFD_THREAD);
    if (fd < 0) fd = syscall(SYS_pidfd_open, pid, 0);
    w->pidfds[i] = fd < 0 ? -1 : (int)fd;
    w->lifefds[i] = i < n ? open_life_reader(pid, life_fds[i]) : life_pipe[0];
    watch_add(w->ep, w->lifefds[i], i);
    watch_add(w->ep, w->pidfds[i], i);
  }
  watch_add(w->ep, self_pipe[0], MESSAGES);
  return w->pidfds[n] >= 0 || life_pipe[0] >= 0;
}

/* The MPI library's files in /dev/shm (MPICH's segment of the node, Open MPI's of each rank), listed before
 * the fork: the watcher that names a rank's death unlinks them (unlink is async-signal-safe; reading
 * /proc/self/maps is not), since the launcher then ends the job without the library's cleanup (issue 81;
 * shm_names.h). */
static char library_files[16][MPIC_SHM_NAME_MAX];
static int library_files_n = 0;

/* The watcher process, after the fork: only async-signal-safe calls. It
 * leaves silently on the rank's word, or names the first process to end. */
__attribute__((noreturn)) static void watcher_main(struct watched *w) {
  setsid();
  /* Its descriptor 2 is the rank's terminal (terminal.h), whatever the rank's own descriptor 2 was
   * at the fork (pytest's capture file), and the only descriptor of the rank's it keeps. */
  int terminal = mpic_terminal();
  if (terminal != 2) dup2(terminal, 2);
  held_pidfds = w->pidfds;
  held_n = w->total;
  for (int fd = 0; fd < 65536; fd++) {
    int keep = fd == 2 || fd == w->ep || fd == self_pipe[0];
    for (int i = 0; i < w->total && !keep; i++) keep = w->pidfds[i] == fd || w->lifefds[i] == fd;
    if (!keep) close(fd); /* the life pipe's write end among them: only the rank may hold it */
  }
  struct epoll_event events[64];
  for (;;) {
    int got = epoll_wait(w->ep, events, 64, -1);
    if (got < 0) {
      if (errno == EINTR) continue;
      _exit(0);
    }
    for (int e = 0; e < got; e++) {
      int index = (int)events[e].data.u32;
      if (index == MESSAGES) {
        char what = 0;
        if (read(self_pipe[0], &what, 1) == 1) {
          if (what == 'q' && claim_report()) hold_claim_and_exit();
          _exit(0);
        }
        /* EOF without a word: the rank died; its life pipe or pidfd names it, in order */
        epoll_ctl(w->ep, EPOLL_CTL_DEL, self_pipe[0], NULL);
        continue;
      }
      if (index < 0 || index >= w->total) continue;
      /* A rank that exited with a status while another was already dying most
       * likely reacted to that death (MPICH aborts a rank whose peer's memory
       * vanished mid-copy): the dying one is the cause. A rank killed by a
       * signal is named as seen: the launcher's kills of the others come
       * after it. */
      if (exited_on_its_own(w->stat_paths[index]))
        for (int j = 0; j < w->total; j++)
          if (j != index && dying(w->stat_paths[j])) {
            index = j;
            break;
          }
      if (claim_report()) {
        ssize_t written = write(2, w->lines + (size_t)index * MAX_LINE, (size_t)w->lens[index]);
        (void)written;
        for (int f = 0; f < library_files_n; f++) unlink(library_files[f]);
        hold_claim_and_exit();
      }
      _exit(0);
    }
  }
}

/* Every process of this job on the node (this rank included) ends: the
 * watcher reads which ended first from its epoll set's order. `life_fds`:
 * each peer's mpic_watch_self_prepare() number. */
MPIABI_EXPORT int mpic_watch_self(const int *ranks, const int *pids, const int *life_fds, int n, int rank,
                                  int size, const char *host, const char *job_key) {
  struct watched w = {0};
  if (!watched_make(&w, ranks, pids, life_fds, n, rank, size, host)) return 0;
  memset(&report_name, 0, sizeof report_name);
  report_name.sun_family = AF_UNIX;
  int k = snprintf(report_name.sun_path + 1, sizeof report_name.sun_path - 1, "mpi-collectives-%s", job_key);
  report_name_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
  library_files_n = mpic_shm_names_list_new(library_files, 16);
  pid_t child = fork();
  if (child < 0) return 0;
  if (child == 0) watcher_main(&w);
  close(self_pipe[0]);
  close(w.ep);
  close(life_pipe[0]); /* the rank keeps only the write end */
  life_pipe[0] = -1;
  for (int i = 0; i < w.total; i++) {
    if (w.pidfds[i] >= 0) close(w.pidfds[i]);
    if (i < n && w.lifefds[i] >= 0) close(w.lifefds[i]);
  }
  watched_free(&w);
  return 1;
}

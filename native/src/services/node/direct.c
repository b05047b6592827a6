/* Reading a peer's buffer in place (internal.h): Linux cross-memory attach
 * (process_vm_readv), so that a byte moves between two ranks of a node in
 * one copy, where the window moves it in two (into the sender's share, out
 * of it). Open MPI's smsc/cma and MPICH's CMA transfers do the same for
 * large messages.
 *
 * Whether it works is decided once per window, at the first call that would
 * read in place, by every rank of it (the probe: each rank reads a word of
 * every peer; one MIN all-reduce): the kernel may forbid it (Yama's
 * ptrace_scope 2 or 3, a seccomp profile, a container without the
 * capability), the ranks may sit in separate PID namespaces, and then the
 * window's copies stay. Under Yama's ptrace_scope 1 a rank names who may
 * read it (below); MPI_COLLECTIVES_NODE_PATH_DIRECT=0 leaves that, and this
 * file, unused (docs/security.md).
 *
 * Each call publishes, beside its stamp (turns.c), the addresses of its
 * buffers; peers read them after the stamp's check, and a last
 * synchronisation keeps every buffer in place until no peer reads it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>
#include "call_failed.h"
#include "counts.h"
#include "end_job.h"
#include "internal.h"
#include "log.h"
#include "settings.h"
#include "test_hooks.h"

/* ---- the probe ----
 * Decided at the first call that would read in place (mpic_node_direct_decide), not when the window is
 * made: a window that serves only the one round, or a job whose collectives never reach the path's sizes,
 * never asks the kernel for anything (issue 71: every window set PR_SET_PTRACER_ANY, for good). Where
 * all-to-all is on the path (not by default), its exchanges are two ranks' calls, so the communicator's
 * creation, which every member makes, decides it (policy.c's mpic_node_created).
 *
 * Each rank publishes its pid, its PID namespace, a few of its ancestors, and the address of a random word
 * of its own; a peer must read, at that address in that pid, that rank's word, and it must differ from its
 * own. Ranks in separate PID namespaces (a container per rank sharing /dev/shm) see each other's pids as
 * other processes (often themselves: every container's first process is pid 1), and with ASLR off a
 * constant lies at the same address everywhere: a constant word passed the probe there and every rank
 * summed its own memory (issue 71). Open MPI's smsc/cma compares namespaces in the same way. */
struct probe {
  int64_t pid;
  uint64_t at, word, pidns;
  int32_t up[4];  /* the nearest ancestors: the ranks' launcher is the nearest they share */
  int32_t refused; /* set by a peer whose first read of this rank Yama refused: this rank names a ptracer */
};
_Static_assert(MPIC_NODE_PROBE_AT + sizeof(struct probe) <= MPIC_NODE_ROUND_STOP_AT, "the probe fits its line");

static int yama_scope(void) {
  FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  int scope = 0;
  if (f) {
    if (fscanf(f, "%d", &scope) != 1) scope = 0;
    fclose(f);
  }
  return scope;
}

static uint64_t pid_namespace(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static int parent_of(int pid) {
  char path[64], text[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t got = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[got] = 0;
  const char *close = strrchr(text, ')'); /* the command's name may hold spaces and parentheses */
  int ppid = 0;
  char state;
  return close && sscanf(close + 1, " %c %d", &state, &ppid) == 2 ? ppid : 0;
}

/* A word no other process holds: the kernel's randomness, else the clock and where this process keeps it.
 * (/dev/urandom rather than getrandom(): the wheel is built against glibc 2.17, which has no getrandom.) */
static uint64_t fresh_word(const void *where) {
  uint64_t w = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t got = fd >= 0 ? read(fd, &w, sizeof w) : -1;
  if (fd >= 0) close(fd);
  if (got != (ssize_t)sizeof w) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    w = ((uint64_t)t.tv_nsec << 32 ^ (uint64_t)t.tv_sec) ^ (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^
        (uint64_t)(uintptr_t)where;
  }
  return w ? w : 1;
}

/* Bytes from `from` in process pid into `to`, whole: 0, or errno. */
static int read_peer(int pid, void *to, uint64_t from, size_t bytes) {
  while (bytes > 0) {
    struct iovec local = {to, bytes}, remote = {(void *)(uintptr_t)from, bytes};
    ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    mpic_count_add(MPIC_COUNT_PEER_READS, 1);
    if (got > 0) mpic_count_add(MPIC_COUNT_PEER_READ_BYTES, (uint64_t)got);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return got < 0 ? errno : EIO;
    to = (char *)to + got, from += (uint64_t)got, bytes -= (size_t)got;
  }
  return 0;
}

/* ---- who may read this process (Yama's ptrace_scope 1) ----
 * Under ptrace_scope 1 a process reads another only where that one named it (prctl PR_SET_PTRACER): a
 * process, and its descendants. Yama keeps one such name a process: a call replaces it, and
 * PR_SET_PTRACER 0 deletes it; the name in force cannot be read back (there is no PR_GET_PTRACER). The MPI
 * library may hold it for its own single-copy transfers (Open MPI's smsc/cma and UCX's cma name any process
 * at MPI_Init; Intel MPI names its launcher), so the rule here is: never take away or narrow what another
 * part of the process may rely on (the fourth read's B7: taking it back at every window's free turned
 * Open MPI's own single-copy transfers into copies from then on).
 *   - A rank names a ptracer only where a peer's first read of it was refused: nothing in force let its
 *     peers read it (MPICH names nothing; it turns its own cross-memory transfers off instead).
 *   - It names the nearest ancestor every rank of the window shares (the launcher's proxy on this node: its
 *     ranks are its descendants), else any process of the user; a later window that needs another
 *     ancestor widens it to any.
 *   - It never takes a name back: once named it stays for the process's life (docs/security.md). */
static pthread_mutex_t ptracer_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long ptracer_named = 0; /* 0: none named here; PR_SET_PTRACER_ANY; or a pid */

/* 0, or errno of the prctl; *named is what is in force after it. */
static int name_ptracer(unsigned long who, unsigned long *named) {
  pthread_mutex_lock(&ptracer_lock);
  if (ptracer_named && ptracer_named != who) who = PR_SET_PTRACER_ANY; /* widen, never narrow */
  int err = ptracer_named == who ? 0 : prctl(PR_SET_PTRACER, who, 0, 0, 0) == 0 ? 0 : errno;
  if (!err) ptracer_named = who;
  *named = ptracer_named;
  pthread_mutex_unlock(&ptracer_lock);
  return err;
}

/* The nearest ancestor in every rank's list (the same answer on every rank: one data), else 0. */
static int shared_ancestor(const struct mpic_node *n) {
  const struct probe *first = (const struct probe *)(n->shares[0] + MPIC_NODE_PROBE_AT);
  for (int i = 0; i < 4; i++) {
    int a = first->up[i], everywhere = a > 1;
    for (int q = 1; q < n->size && everywhere; q++) {
      const struct probe *p = (const struct probe *)(n->shares[q] + MPIC_NODE_PROBE_AT);
      int found = 0;
      for (int j = 0; j < 4 && !found; j++) found = p->up[j] == a;
      everywhere = found;
    }
    if (everywhere) return a;
  }
  return 0;
}

/* The peer q's word read at its address: 0, or errno. */
static int read_word(const struct mpic_node *n, int q, uint64_t *word) {
  const struct probe *theirs = (const struct probe *)(n->shares[q] + MPIC_NODE_PROBE_AT);
  *word = 0;
  return read_peer((int)theirs->pid, word, theirs->at, sizeof *word);
}

static int probe(struct mpic_node *n) {
  int mine = mpic_settings.node_path_direct != 0, all = 0, yama = yama_scope(), named = 0;
  n->word = fresh_word(n);
  struct probe *own = (struct probe *)(n->shares[n->rank] + MPIC_NODE_PROBE_AT);
  *own = (struct probe){getpid(), (uint64_t)(uintptr_t)&n->word, n->word, pid_namespace(), {0, 0, 0, 0}, 0};
  for (int i = 0, pid = getpid(); i < 4 && (pid = parent_of(pid)) > 0; i++) own->up[i] = pid;
  mpic_turn_publish(n, mpic_turn_begin(n, -1)); /* stamped: ranks at different calls stop here, named */
  char why[160] = "";
  for (int q = 0; mine && q < n->size; q++) {
    const struct probe *theirs = (const struct probe *)(n->shares[q] + MPIC_NODE_PROBE_AT);
    if (theirs->pidns != own->pidns)
      mine = 0, snprintf(why, sizeof why, ": rank %d is in another PID namespace (a container of its own)",
                         n->world[q]);
  }
  mpic_turn_sync(n); /* every rank's probe published before any rank reads */
  /* First as the process stands: what the library named (or Yama's absence) may already allow it. Each
   * peer that refused this rank is told so in its own probe line. */
  int errs[n->size];
  uint64_t words[n->size];
  for (int q = 0; q < n->size; q++) {
    words[q] = 0;
    errs[q] = q == n->rank || !mine ? 0 : read_word(n, q, &words[q]);
    if (errs[q] == EPERM && yama == 1)
      __atomic_store_n(&((struct probe *)(n->shares[q] + MPIC_NODE_PROBE_AT))->refused, 1, __ATOMIC_RELAXED);
  }
  unsigned long who = 0, in_force = 0;
  if (yama == 1) { /* Yama is the node's: every rank of it takes these two steps, or none */
    mpic_turn_sync(n); /* every refusal told */
    if (__atomic_load_n(&own->refused, __ATOMIC_RELAXED)) {
      int ancestor = shared_ancestor(n);
      who = ancestor ? (unsigned long)ancestor : PR_SET_PTRACER_ANY;
      int err = name_ptracer(who, &in_force);
      named = !err;
      if (err) snprintf(why, sizeof why, ": prctl(PR_SET_PTRACER) failed under Yama's ptrace_scope 1 (%s)",
                        strerror(err));
    }
    mpic_turn_sync(n); /* every refused rank's ptracer named before the reads again */
  }
  for (int q = 0; mine && q < n->size; q++) {
    if (q == n->rank) continue;
    const struct probe *theirs = (const struct probe *)(n->shares[q] + MPIC_NODE_PROBE_AT);
    uint64_t word = words[q];
    int err = errs[q] == EPERM && yama == 1 ? read_word(n, q, &word) : errs[q];
    mine = !err && word == theirs->word && word != n->word;
    if (err)
      snprintf(why, sizeof why, "%s", err == EPERM ? ": the kernel does not allow it here (EPERM: Yama's "
                                                     "ptrace_scope, seccomp or the container)"
                                                   : ": the kernel's process_vm_readv failed");
    else if (!mine) snprintf(why, sizeof why, ": rank %d's pid names another process here", n->world[q]);
    n->pids[q] = (int)theirs->pid;
  }
  /* the reduction's staging, cache-sized; agreed below (a test build fails it on one rank: issue 71's suspect 9) */
  if (mine && !(n->tmp = mpic_test_hook("MPI_COLLECTIVES_TEST_FAIL_STAGING_RANK", -1) == n->world[n->rank]
                             ? NULL : malloc(MPIC_NODE_CHUNK)))
    mine = 0, snprintf(why, sizeof why, ": out of memory for its staging");
  int ret = mpic_next_Allreduce(&mine, &all, 1, MPIABI_INT, MPIABI_MIN, n->shm);
  if (ret != 0) mpic_call_failed("MPI_Allreduce (the node path's)", ret);
  if (!all) free(n->tmp), n->tmp = NULL;
  n->ptracer = named;
  if (n->rank == 0 || why[0])
    mpic_log(2, "communicator %d: its ranks on this node %s each other's buffers in place (cross-memory attach)%s%s",
             n->record_id, all ? "read" : "do not read",
             mpic_settings.node_path_direct ? "" : ": MPI_COLLECTIVES_NODE_PATH_DIRECT=0", why);
  if (n->ptracer)
    mpic_log(2, "rank %d: Yama's ptrace_scope 1 refused its peers: %s may read this process's memory from now on, "
                "for the process's life (never taken back: the MPI library may rely on it too; "
                "MPI_COLLECTIVES_NODE_PATH_DIRECT=0 leaves it unchanged)",
             n->world[n->rank], in_force == PR_SET_PTRACER_ANY ? "any process of this user" : "the ranks' launcher "
                                                                                           "(its process and "
                                                                                           "descendants)");
  return all;
}

int mpic_node_direct_decide(struct mpic_node *n) {
  if (n->direct == MPIC_NODE_DIRECT_UNDECIDED) n->direct = n->across == MPIABI_COMM_NULL ? probe(n) : 0;
  return n->direct;
}

/* ---- the buffers' addresses, beside the stamp ---- */
struct where {
  uint64_t in, out;
};

static struct where *where_of(const struct mpic_node *n, int q, size_t half) {
  return (struct where *)(mpic_turn_line(n, q, half) + MPIC_NODE_WHERE_AT);
}

/* One turn: this rank's stamp and buffers published, every peer's stamp checked. */
static size_t publish(struct mpic_node *n, const void *in, const void *out) {
  size_t half = mpic_turn_begin(n, 0);
  *where_of(n, n->rank, half) = (struct where){(uint64_t)(uintptr_t)in, (uint64_t)(uintptr_t)out};
  mpic_turn_publish(n, half);
  return half;
}

void mpic_node_read_peer(struct mpic_node *n, int q, void *to, uint64_t from, size_t bytes) {
  int err = read_peer(n->pids[q], to, from, bytes);
  /* most often the peer died (ESRCH) a moment before the peer watch names it: its sentence first */
  if (err) mpic_end_if_a_peer_died("read of a peer's buffer in the node path");
  if (err)
    mpic_fatal("rank %d: reading rank %d's buffer in the node path (cross-memory attach) failed: %s. No result "
               "was returned. Fix: MPI_COLLECTIVES_NODE_PATH_DIRECT=0 (copies through the window)",
               n->world[n->rank], n->world[q], strerror(err));
}

/* This rank's slice of a reduction: `count` elements of its own input at `mine` (NULL where the result
 * already holds them: in place) and of every peer's at that peer's address `at[q]`, reduced into `out`.
 * A staging piece at a time, every peer's piece reduced into the result's piece before the next, so that
 * the result's piece stays in the cache across the peers instead of crossing memory once per peer. The
 * order for an element: its own rank's input, then the next ranks' (one order, on one rank). */
#define STAGE (256 * 1024)
static void reduce_slice(struct mpic_node *n, const char *mine, const uint64_t *at, char *out, int64_t count,
                         int esize, MPIABI_Datatype type, MPIABI_Op op) {
  int64_t per = STAGE / esize;
  for (int64_t first = 0; first < count; first += per) {
    int64_t k = mpic_node_piece(count, first, per);
    size_t off = (size_t)(first * esize), bytes = (size_t)(k * esize);
    if (mine) memmove(out + off, mine + off, bytes);
    for (int j = 1; j < n->size; j++) {
      int q = (n->rank + j) % n->size;
      mpic_node_read_peer(n, q, n->tmp, at[q] + off, bytes);
      mpic_node_reduce_local(n->tmp, out + off, k, type, op);
    }
  }
}

/* ---- the collectives ----
 * All-reduce: rank q reduces slice q (a P-th, on element boundaries) of every rank's input into its own
 * result, its own input first and then every other rank's in one order (each element reduced once, by one
 * rank, in one order: the same bits everywhere); a synchronisation; then each rank reads every other slice
 * from its owner's result. Per rank about twice the buffer crosses between ranks, once each way: the window
 * path's copy into the share is gone. In place, a rank's input is its result: the slices other ranks read
 * are never the one it writes. */
int mpic_node_direct_allreduce(struct mpic_node *n, struct mpic_allreduce_args *a, int esize) {
  int in_place = a->send == MPIABI_IN_PLACE;
  const char *in = in_place ? a->recv : a->send;
  char *out = a->recv;
  int64_t P = n->size, lo = mpic_node_slice_at(a->count, n->rank, P), hi = mpic_node_slice_at(a->count, n->rank + 1, P);
  size_t half = publish(n, in, out);
  uint64_t *at = (uint64_t *)mpic_node_parts(P, "an all-reduce");
  for (int q = 0; q < P; q++) at[q] = where_of(n, q, half)->in + (uint64_t)(lo * esize);
  reduce_slice(n, in_place ? NULL : in + lo * esize, at, out + lo * esize, hi - lo, esize, a->type, a->op);
  free(at);
  mpic_turn_sync(n); /* every slice reduced */
  for (int q = 0; q < P; q++) {
    int64_t qlo = mpic_node_slice_at(a->count, q, P), qhi = mpic_node_slice_at(a->count, q + 1, P);
    if (q != n->rank && qhi > qlo)
      mpic_node_read_peer(n, q, out + qlo * esize, where_of(n, q, half)->out + (uint64_t)(qlo * esize),
                (size_t)((qhi - qlo) * esize));
  }
  mpic_turn_sync(n); /* every rank done reading: the buffers may change */
  return 0;
}

/* All-gather: each rank reads every other rank's part straight into its place in the result. */
int mpic_node_direct_allgather(struct mpic_node *n, struct mpic_allgather_args *a, int esize) {
  int in_place = a->send == MPIABI_IN_PLACE;
  size_t part = (size_t)a->recvcount * (size_t)esize;
  char *out = a->recv;
  const char *in = in_place ? out + part * (size_t)n->rank : a->send;
  size_t half = publish(n, in, out);
  if (!in_place) memcpy(out + part * (size_t)n->rank, in, part);
  for (int q = 0; q < n->size; q++)
    if (q != n->rank) mpic_node_read_peer(n, q, out + part * (size_t)q, where_of(n, q, half)->in, part);
  mpic_turn_sync(n);
  return 0;
}

/* Reduce-scatter: rank q reduces part q of every rank's input into its result, its own first. */
int mpic_node_direct_reduce_scatter(struct mpic_node *n, struct mpic_reduce_scatter_args *a, int esize) {
  int64_t at = 0, P = n->size;
  for (int q = 0; q < n->rank; q++) at += a->counts[q];
  int64_t count = a->counts[n->rank];
  const char *in = a->send;
  size_t half = publish(n, in, a->recv);
  uint64_t *from = (uint64_t *)mpic_node_parts(P, "a reduce-scatter");
  for (int q = 0; q < P; q++) from[q] = where_of(n, q, half)->in + (uint64_t)(at * esize);
  /* the result may be this rank's own part of the input (then its piece is copied onto itself) */
  reduce_slice(n, (const char *)in + at * esize == (const char *)a->recv ? NULL : in + at * esize, from, a->recv,
               count, esize, a->type, a->op);
  free(from);
  mpic_turn_sync(n);
  return 0;
}

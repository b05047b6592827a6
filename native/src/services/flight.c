/* The flight recorder (flight.h). A ring of the last RING collectives,
 * written by the threads that run them (a slot each, from one atomic
 * counter), read by the stall watcher and at the end of a job. Two clock
 * reads and a few stores per collective: tens of nanoseconds. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "terminal.h"
#include "flight.h"
#include "launcher_env.h"
#include "settings.h"
#include "signature.h"

#define RING 32

/* An entry's end is one word, written by one store: the low TICKET_BITS of
 * the ticket that ended it above its duration in microseconds. It counts
 * only when those bits are the entry's own number's: a late end of an
 * entry whose slot a newer collective has taken cannot mark the newer one
 * finished, whatever the interleaving: the newer entry's begin writes an end
 * word that matches no ticket, and an end replaces only its own begin's word. */
#define TICKET_BITS 24
#define DURATION_BITS (64 - TICKET_BITS)
#define TICKET_MASK ((1UL << TICKET_BITS) - 1)

struct entry {
  uint64_t sig;
  int comm_id;
  unsigned seq;
  int64_t start_ns;
  uint64_t end;         /* see above */
  unsigned long number; /* 1 + its place in the whole record (its ticket); 0: empty */
};

static uint64_t end_word(unsigned long ticket, uint64_t duration_us) {
  return ((uint64_t)(ticket & TICKET_MASK) << DURATION_BITS) | (duration_us & ((1ULL << DURATION_BITS) - 1));
}

/* The entry's duration in ns if it has ended, else -1. */
static int64_t ended_after(const struct entry *e, unsigned long number) {
  uint64_t end = __atomic_load_n(&e->end, __ATOMIC_ACQUIRE);
  if ((end >> DURATION_BITS) != (number & TICKET_MASK)) return -1;
  return (int64_t)(end & ((1ULL << DURATION_BITS) - 1)) * 1000;
}
static struct entry ring[RING];
static unsigned long written = 0;
static int splits = 0;

int64_t mpic_monotonic_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

mpic_ticket mpic_flight_begin(uint64_t sig, int comm_id, unsigned seq) {
  unsigned long n = __atomic_fetch_add(&written, 1, __ATOMIC_RELAXED);
  struct entry *e = &ring[n % RING];
  __atomic_store_n(&e->number, 0, __ATOMIC_RELEASE); /* being written */
  e->sig = sig;
  e->comm_id = comm_id;
  e->seq = seq;
  __atomic_store_n(&e->end, end_word(n, 0), __ATOMIC_RELEASE); /* n, not n + 1: no ticket's */
  e->start_ns = mpic_monotonic_ns();
  __atomic_store_n(&e->number, n + 1, __ATOMIC_RELEASE);
  return n + 1;
}

void mpic_flight_end(mpic_ticket ticket) {
  if (ticket == MPIC_NO_TICKET) return;
  struct entry *e = &ring[(ticket - 1) % RING];
  if (__atomic_load_n(&e->number, __ATOMIC_ACQUIRE) != ticket) return; /* a newer collective has its slot */
  int64_t took = mpic_monotonic_ns() - e->start_ns;
  /* From the word its begin wrote to its own: a newer begin in between changed the word, and this fails. */
  uint64_t began = end_word(ticket - 1, 0);
  __atomic_compare_exchange_n(&e->end, &began, end_word(ticket, (uint64_t)(took > 0 ? took : 0) / 1000), 0,
                              __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

int mpic_flight_new_split(void) { return __atomic_add_fetch(&splits, 1, __ATOMIC_RELAXED); }
int mpic_flight_splits(void) { return __atomic_load_n(&splits, __ATOMIC_RELAXED); }

int mpic_flight_current(uint64_t *sig, int *comm_id, unsigned *seq, int64_t *start_ns) {
  unsigned long best = 0;
  for (int i = 0; i < RING; i++) {
    unsigned long number = __atomic_load_n(&ring[i].number, __ATOMIC_ACQUIRE);
    if (number > best && ended_after(&ring[i], number) < 0) {
      best = number;
      *sig = ring[i].sig, *comm_id = ring[i].comm_id, *seq = ring[i].seq, *start_ns = ring[i].start_ns;
    }
  }
  return best != 0;
}

/* The entries in order, oldest first: their numbers. */
static int in_order(unsigned long numbers[RING], int slots[RING]) {
  int n = 0;
  for (int i = 0; i < RING; i++) {
    unsigned long number = __atomic_load_n(&ring[i].number, __ATOMIC_ACQUIRE);
    if (!number) continue;
    int at = n++;
    while (at > 0 && numbers[at - 1] > number) numbers[at] = numbers[at - 1], slots[at] = slots[at - 1], at--;
    numbers[at] = number, slots[at] = i;
  }
  return n;
}

size_t mpic_flight_text(char *out, size_t len) {
  unsigned long numbers[RING];
  int slots[RING], n = in_order(numbers, slots);
  int64_t now = mpic_monotonic_ns();
  size_t used = 0;
  if (len) out[0] = 0;
  for (int k = 0; k < n && used < len; k++) {
    const struct entry *e = &ring[slots[k]];
    char what[160];
    mpic_describe(e->sig, what, sizeof what);
    double ago = (double)(now - e->start_ns) / 1e9;
    int64_t ns = ended_after(e, numbers[k]);
    char took[64];
    if (ns >= 0)
      snprintf(took, sizeof took, "%.3f ms", (double)ns / 1e6);
    else
      snprintf(took, sizeof took, "not finished");
    used += (size_t)snprintf(out + used, len - used, "  #%lu %s on communicator %d (its #%u): %s, began %.1f s ago\n",
                             numbers[k], what, e->comm_id, e->seq, took, ago);
  }
  return used < len ? used : len;
}

/* ---- async-signal-safe writing ---- */
static size_t put(char *buf, size_t at, size_t len, const char *text) {
  while (*text && at + 1 < len) buf[at++] = *text++;
  return at;
}
static size_t put_u(char *buf, size_t at, size_t len, unsigned long long v) {
  char digits[24];
  int n = 0;
  do digits[n++] = (char)('0' + v % 10), v /= 10;
  while (v && n < 24);
  while (n && at + 1 < len) buf[at++] = digits[--n];
  return at;
}

void mpic_flight_write(int fd) {
  unsigned long numbers[RING];
  int slots[RING], n = in_order(numbers, slots);
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t); /* async-signal-safe */
  int64_t now = (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
  for (int k = 0; k < n; k++) {
    const struct entry *e = &ring[slots[k]];
    const char *kind, *op, *type;
    long long count;
    mpic_signature_words(e->sig, &kind, &op, &type, &count);
    char line[256];
    size_t at = put(line, 0, sizeof line, "  #");
    at = put_u(line, at, sizeof line, numbers[k]);
    at = put(line, at, sizeof line, " ");
    at = put(line, at, sizeof line, kind);
    if (count >= 0) { /* as mpic_describe writes it: "all-reduce sum f32 x4" */
      if (*op) at = put(line, put(line, at, sizeof line, " "), sizeof line, op);
      at = put(line, put(line, at, sizeof line, " "), sizeof line, type);
      at = put(line, at, sizeof line, " x");
      at = put_u(line, at, sizeof line, (unsigned long long)count);
    }
    at = put(line, at, sizeof line, " on communicator ");
    at = put_u(line, at, sizeof line, (unsigned long long)(e->comm_id < 0 ? 0 : e->comm_id));
    at = put(line, at, sizeof line, " (its #");
    at = put_u(line, at, sizeof line, e->seq);
    int64_t ns = ended_after(e, numbers[k]);
    if (ns >= 0) {
      at = put(line, at, sizeof line, "): ");
      at = put_u(line, at, sizeof line, (unsigned long long)(ns / 1000));
      at = put(line, at, sizeof line, " us, began ");
    } else {
      at = put(line, at, sizeof line, "): not finished, began ");
    }
    at = put_u(line, at, sizeof line, (unsigned long long)((now - e->start_ns) / 1000000));
    at = put(line, at, sizeof line, " ms ago\n");
    ssize_t w = write(fd, line, at);
    (void)w;
  }
}

/* ---- where the record goes when the job ends ---- */
static char trace_path[1200];

/* MPI_COLLECTIVES_TRACE_DIR/mpi-collectives-rank<R>.txt, or "" for stderr;
 * made once, so that a signal handler can open it. */
static const char *trace_file(void) {
  if (!trace_path[0] && mpic_settings.trace_dir && *mpic_settings.trace_dir) {
    char where[64];
    mpic_launcher_where(where, sizeof where); /* "rank R/N" */
    int rank = 0;
    sscanf(where, "rank %d", &rank);
    snprintf(trace_path, sizeof trace_path, "%s/mpi-collectives-rank%d.txt", mpic_settings.trace_dir, rank);
  }
  return trace_path;
}

void mpic_flight_prepare(void) { trace_file(); }

void mpic_flight_report(void) {
  if (!__atomic_load_n(&written, __ATOMIC_RELAXED)) return; /* no collective yet: nothing to say */
  const char *path = trace_file();
  int fd = *path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : mpic_terminal();
  if (fd < 0) fd = mpic_terminal();
  char where[64], text[RING * 200];
  mpic_launcher_where(where, sizeof where);
  int n = snprintf(text, sizeof text, "mpi-collectives: %s's last collectives (its flight record, oldest first):\n",
                   where);
  size_t len = (size_t)n + mpic_flight_text(text + n, sizeof text - (size_t)n);
  ssize_t w = write(fd, text, len);
  (void)w;
  if (fd != mpic_terminal()) close(fd);
}

void mpic_flight_report_from_signal(const char *head, size_t head_len) {
  if (!__atomic_load_n(&written, __ATOMIC_RELAXED)) return;
  int fd = trace_path[0] ? open(trace_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : mpic_terminal();
  if (fd < 0) fd = mpic_terminal();
  ssize_t w = write(fd, head, head_len);
  (void)w;
  mpic_flight_write(fd);
  if (fd != mpic_terminal()) close(fd);
}

/* The flight recorder (flight.c): each rank's last collectives over MPI, as
 * PyTorch's distributed package keeps them, for the stall report
 * (mpi_collectives/services/stall.py) and for the lines a rank prints when the job
 * ends. Written by agreement.c (every collective on a tracked communicator),
 * xla_policy.c (communicator creation) and devices/ (their exchange). */
#ifndef MPI_COLLECTIVES_FLIGHT_H
#define MPI_COLLECTIVES_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

/* A collective begins: its signature (signature.h), the id of its
 * communicator (the ordinal of the split of the world that made it, the same
 * on every member: mpic_flight_new_split), its sequence number there.
 * Returns its ticket, for mpic_flight_end: the entry's own number, not its
 * slot in the ring, so that ending it after RING newer collectives took the
 * slot stamps nothing (a slot would stamp the newer entry as finished). */
typedef unsigned long mpic_ticket;
#define MPIC_NO_TICKET 0UL
mpic_ticket mpic_flight_begin(uint64_t sig, int comm_id, unsigned seq);
void mpic_flight_end(mpic_ticket ticket);

/* The next split of MPI_COMM_WORLD's ordinal: every process makes XLA's and
 * the devices' splits in the same order, so it names one communicator on all
 * of its members. */
int mpic_flight_new_split(void);
/* How many splits of the world this process has begun (the last one's ordinal). */
int mpic_flight_splits(void);

/* The latest collective this rank has begun and not ended: 1 and its
 * signature, communicator id, sequence number and start (CLOCK_MONOTONIC,
 * ns), or 0. */
int mpic_flight_current(uint64_t *sig, int *comm_id, unsigned *seq, int64_t *start_ns);

/* The record, oldest first, a line each ("  #12 all-reduce sum f32 x4 on
 * communicator 3: 0.2 ms, 4.1 s ago"), into out; returns its length. */
size_t mpic_flight_text(char *out, size_t len);

/* The same, written to a file descriptor with async-signal-safe calls only
 * (for a rank stopped by a signal). */
void mpic_flight_write(int fd);

int64_t mpic_monotonic_ns(void);

/* When the job ends: the record, under a line naming this rank, on stderr,
 * or in MPI_COLLECTIVES_TRACE_DIR/mpi-collectives-rank<R>.txt when set.
 * Nothing before the first collective. */
void mpic_flight_report(void);
/* The same from a signal handler (async-signal-safe), under `head`; the
 * trace file's name must have been made before (mpic_flight_prepare). */
void mpic_flight_report_from_signal(const char *head, size_t head_len);
void mpic_flight_prepare(void);

#endif

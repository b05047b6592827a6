/* Phases of a program (phases.c): a test of a pytest suite is one
 * (mpi_collectives/testing/pytest_plugin.py), and a program outside pytest marks
 * its own (mpi_collectives.phase). While phases are on:
 *
 * - every check block carries the phase its rank is in, so a collective of one
 *   phase never meets a collective of another (agreement.c: the job ends with
 *   one line instead of a wrong number);
 * - a rank that waits in a check block gives the wait up
 *   when a member of the communicator has already ended the phase (its vote
 *   has arrived: that member will never call this collective) or when the
 *   phase's time is up, and the call returns an MPI error whose text says so;
 *   XLA turns it into an exception in the test, on that rank;
 * - the calls given up stay pending here until the ranks have voted on the
 *   phase; then every member that did not give one up joins it (settle), so
 *   that the communicator is whole again and the next phase starts clean.
 *
 * Calls that cannot be given up (a collective's data once every rank agreed,
 * point-to-point transfers, a split of the world: phases.c says why) are named by
 * mpic_phase_stuck, for the plugin to end the job with its report kept. */
#ifndef MPI_COLLECTIVES_PHASES_H
#define MPI_COLLECTIVES_PHASES_H

#include <stddef.h>
#include <stdint.h>
#include "check_block.h"
#include "comm_record.h"

/* Start phases: a communicator of their own (a duplicate of MPI_COMM_WORLD:
 * the votes' messages) and the error code of a wait given up. Collective over
 * the world; returns 0 or the library's error. */
int mpic_phases_start(void);
int mpic_phases_on(void);
/* The error code a given-up wait returns (its text: MPI_Error_string). */
int mpic_phase_error_code(void);
/* The phases' own communicator (for the votes), and the votes' tag: one for every phase (phases.c says why). */
MPIABI_Comm mpic_phases_comm(void);
int mpic_phase_tag(int64_t phase);
/* This rank enters `phase` (> 0, the same number on every rank for the same
 * phase), named `name` in the lines, with `timeout_s` seconds for any one wait
 * in it (0: no limit). */
void mpic_phase_begin(int64_t phase, const char *name, double timeout_s);
int64_t mpic_phase_now(void);
/* The phase's deadline (monotonic ns; 0: none) and its name. */
int64_t mpic_phase_deadline_ns(void);
void mpic_phase_name(char *out, size_t len);

/* The check's all-reduce of block b on r, given up as above while phases are
 * on. Returns 0 with b reduced, or the phase's error code. */
int mpic_phase_agree(struct mpic_record *r, struct mpic_block *b, MPIABI_Datatype type, MPIABI_Op op);
/* The calls this rank gave up and has not settled: up to max triples (kind,
 * communicator or split id, sequence number) into out; returns how many. */
int mpic_phase_given_up(int *out, int max);
/* After the vote (agreement.c's mpic_agreement_settle): a call this rank
 * gave up, waited for until it completes or timeout_s pass; returns 0 when
 * this rank gave none up with those words, else 1 with *ret 0 (completed),
 * 1 (time up) or the library's error. */
int mpic_phase_wait_given(int kind, int id, unsigned seq, double timeout_s, int *ret);
/* Polls a request: 0, 1 when timeout_s passed first, or the library's error. */
int mpic_phase_poll(MPIABI_Request *req, double timeout_s);
/* Is this rank stuck: waiting in a call that cannot be given up while a
 * member of its communicator has ended the phase? 1 with `where` filled. */
int mpic_phase_stuck(char *where, int len);

enum { MPIC_GIVEN_UP_BLOCK = 1 };

#endif

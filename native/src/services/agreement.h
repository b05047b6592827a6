/* The ranks agree about each collective XLA runs (agreement.c): one
 * all-reduce of a small block holding the collective's signature, and, where
 * they fit, its data. Called by dispatch.c alone, which runs every checked
 * collective: check, call, failure, finish. */
#ifndef MPI_COLLECTIVES_AGREEMENT_H
#define MPI_COLLECTIVES_AGREEMENT_H

#include "check_block.h"
#include "comm_record.h"
#include "signature.h"

/* Are the checks on (MPI_COLLECTIVES_CHECK_COLLECTIVES)? */
int mpic_agreement_on(void);
/* The data the block can carry in the next call on r (bytes): the same on
 * every rank, chosen from the calls they agreed before. */
size_t mpic_agreement_room(const struct mpic_record *r);
/* After a call agreed on r: how many bytes it would have carried in a whole
 * block (0 for none), which chooses the room of the calls after it. */
void mpic_agreement_learn(struct mpic_record *r, size_t carried_bytes);
/* The check on communicator r: `b` already holds what this rank carries
 * (mpic_block_start, then its payload, within `room`: mpic_agreement_room's).
 * Returns once every rank called the same collective, b->payload holding the
 * carried result, or the phase's error code
 * (a wait given up); ends the job with one line naming what each rank called
 * when they differ. */
int mpic_agreement_agree(struct mpic_record *r, const struct mpic_call *c, uint64_t sig, struct mpic_block *b,
                         size_t room);
/* Ranks that disagree, as the node path's round saw them (node.h): all holds
 * (signature, rank in MPI_COMM_WORLD, phase) of each of r's size members; the
 * job ends with the line mpic_agreement_agree's check would give. */
__attribute__((noreturn)) void mpic_agreement_disagree_seen(int64_t *all, int size);
/* While phases are on (phases.h), a wait in the check may be given up: then
 * it returns the phase's error code, for the caller to return to XLA.
 * After the ranks voted on a phase: every check block
 * given up by any rank (kind, id, seq triples, the same list on every rank),
 * waited for or joined, so that every communicator is whole again. 0, 1 (not
 * done in timeout_s) or the library's error. */
int mpic_agreement_settle(const int *triples, int n, double timeout_s);

#endif

/* The one dispatcher (dispatch.h): check, call, failure, finish, written
 * once for every path that runs a collective on XLA's communicators. */
#include <string.h>
#include "agreement.h"
#include "call_failed.h"
#include "check_block.h"
#include "counts.h"
#include "end_job.h"
#include "dispatch.h"
#include "flight.h"
#include "node.h"
#include "phases.h"

static struct mpic_carry none(void) { return (struct mpic_carry){MPIC_CARRY_NONE, NULL, 0, 0, NULL, 0, 0, 0}; }

struct mpic_carry mpic_carry_reduce(const struct mpic_call *c, const void *in, int64_t count, void *out,
                                    int64_t out_first, int64_t out_count) {
  uint64_t sig = mpic_signature(c);
  size_t elem = mpic_block_element_size(sig);
  size_t bytes = elem * (size_t)(count > 0 ? count : 0);
  if (!bytes) return none();
  return (struct mpic_carry){MPIC_CARRY_REDUCE, in, 0, bytes, out, elem * (size_t)out_first, elem * (size_t)out_count,
                             mpic_block_reducible(sig) && bytes <= MPIC_BLOCK_PAYLOAD};
}

struct mpic_carry mpic_carry_place(const struct mpic_call *c, const void *mine, int64_t at, int64_t count, void *out,
                                   int64_t total) {
  size_t elem = mpic_block_element_size(mpic_signature(c));
  size_t bytes = elem * (size_t)(total > 0 ? total : 0);
  if (!elem || count <= 0 || !bytes) return none();
  return (struct mpic_carry){MPIC_CARRY_PLACE, mine, elem * (size_t)at, elem * (size_t)count, out, 0, bytes,
                             bytes <= MPIC_BLOCK_PAYLOAD};
}

/* The round's view of a call (node.h), from its signature and carry. */
static struct mpic_round_call round_call(struct mpic_record *r, const struct mpic_call *c, uint64_t sig,
                                         const struct mpic_carry *carry, mpic_library_call call, const void *args) {
  struct mpic_round_call rc = {.sig = sig, .shape = mpic_node_shape(r, call, args), .phase = mpic_phase_now(),
                              .phases_on = mpic_phases_on(), .mode = MPIC_ROUND_NONE};
  if (carry && carry->mode != MPIC_CARRY_NONE) {
    rc.mode = carry->mode == MPIC_CARRY_REDUCE ? MPIC_ROUND_REDUCE : MPIC_ROUND_PLACE;
    rc.in = carry->in, rc.in_bytes = carry->in_bytes, rc.at = carry->in_at;
    rc.out = carry->out, rc.out_from = carry->out_from, rc.out_bytes = carry->out_bytes;
    rc.type = c->type, rc.op = c->op, rc.esize = (int)mpic_block_element_size(sig);
  }
  return rc;
}

int mpic_dispatch(struct mpic_record *r, const struct mpic_call *c, const struct mpic_carry *carry,
                  const char *function, mpic_library_call call, void *args) {
  uint64_t sig = mpic_signature(c);
  mpic_ticket ticket = r ? mpic_record_begin(r, sig) : MPIC_NO_TICKET;
  mpic_count_add(MPIC_COUNT_COLLECTIVES, 1);
  int checked = !r || !mpic_agreement_on() || c->kind == MPIC_ALL_TO_ALL;
  if (!checked && mpic_node_round_on(r)) {
    struct mpic_round_call rc = round_call(r, c, sig, carry, call, args);
    int64_t *seen = NULL;
    int got = mpic_node_round(r, &rc, &seen);
    if (got == MPIC_ROUND_DISAGREE) mpic_agreement_disagree_seen(seen, r->size);
    if (got == MPIC_ROUND_DONE) {
      mpic_flight_end(ticket);
      return 0;
    }
    checked = got == MPIC_ROUND_CHECKED; /* else the rounds were left at this call: the library's check */
  }
  if (!checked) {
    struct mpic_block b;
    size_t room = mpic_agreement_room(r), needs = 0;
    if (carry && carry->mode != MPIC_CARRY_NONE && carry->block) { /* the same on every rank that called the same */
      size_t in = carry->in_at + carry->in_bytes, out = carry->out_from + carry->out_bytes;
      needs = in > out ? in : out;
    }
    int carried = needs && needs <= room;
    mpic_block_start(&b, sig, carried ? carry->mode : MPIC_CARRY_NONE);
    if (carried) memcpy(b.payload + carry->in_at, carry->in, carry->in_bytes);
    int given_up = mpic_agreement_agree(r, c, sig, &b, room);
    if (given_up) { /* a phase's wait given up (phases.h): no data moved, XLA raises the error */
      mpic_flight_end(ticket);
      return given_up;
    }
    mpic_agreement_learn(r, needs);
    /* the first agreed call: whether r's next checks go through the node path's round, alike on every member */
    if (mpic_node_round_undecided(r)) mpic_node_round_decide(r, mpic_phases_on());
    if (carried) {
      mpic_count_add(MPIC_COUNT_CARRIED, 1);
      memcpy(carry->out, b.payload + carry->out_from, carry->out_bytes);
      mpic_flight_end(ticket);
      return 0;
    }
  }
  struct mpic_node_plan plan;
  int on_node = r && mpic_node_takes(r, call, args, &plan);
  mpic_count_add(on_node ? MPIC_COUNT_NODE_RUNS : MPIC_COUNT_LIBRARY_CALLS, 1);
  int ret = on_node ? mpic_node_run(&plan, call, args) : call(args);
  if (ret != 0) mpic_call_failed(function, ret);
  mpic_hold_if_ending();
  mpic_flight_end(ticket);
  return 0;
}

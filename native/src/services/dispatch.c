/* The one dispatcher (dispatch.h): check, call, failure, finish, written
 * once for every path that runs a collective on XLA's communicators. */
#include <string.h>
#include "agreement.h"
#include "call_failed.h"
#include "check_block.h"
#include "end_job.h"
#include "dispatch.h"
#include "flight.h"
#include "node.h"

static struct mpic_carry none(void) { return (struct mpic_carry){MPIC_CARRY_NONE, NULL, 0, 0, NULL, 0, 0}; }

struct mpic_carry mpic_carry_reduce(const struct mpic_call *c, const void *in, int64_t count, void *out,
                                    int64_t out_first, int64_t out_count) {
  size_t elem = mpic_block_reducible(mpic_signature(c));
  size_t bytes = elem * (size_t)(count > 0 ? count : 0);
  if (!bytes || bytes > MPIC_BLOCK_PAYLOAD) return none();
  return (struct mpic_carry){MPIC_CARRY_REDUCE, in, 0, bytes, out, elem * (size_t)out_first, elem * (size_t)out_count};
}

struct mpic_carry mpic_carry_place(const struct mpic_call *c, const void *mine, int64_t at, int64_t count, void *out,
                                   int64_t total) {
  size_t elem = mpic_block_element_size(mpic_signature(c));
  size_t bytes = elem * (size_t)(total > 0 ? total : 0);
  if (!elem || count <= 0 || bytes > MPIC_BLOCK_PAYLOAD) return none();
  return (struct mpic_carry){MPIC_CARRY_PLACE, mine, elem * (size_t)at, elem * (size_t)count, out, 0, bytes};
}

int mpic_dispatch(struct mpic_record *r, const struct mpic_call *c, const struct mpic_carry *carry,
                  const char *function, mpic_library_call call, void *args) {
  uint64_t sig = mpic_signature(c);
  mpic_ticket ticket = r ? mpic_record_begin(r, sig) : MPIC_NO_TICKET;
  if (r && mpic_agreement_on() && c->kind != MPIC_ALL_TO_ALL) {
    struct mpic_block b;
    size_t room = mpic_agreement_room(r), needs = 0;
    if (carry && carry->mode != MPIC_CARRY_NONE) { /* the same on every rank that called the same */
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
    if (carried) {
      memcpy(carry->out, b.payload + carry->out_from, carry->out_bytes);
      mpic_flight_end(ticket);
      return 0;
    }
  }
  struct mpic_node_plan plan;
  int ret = r && mpic_node_takes(r, call, args, &plan) ? mpic_node_run(&plan, call, args) : call(args);
  if (ret != 0) mpic_call_failed(function, ret);
  mpic_hold_if_ending();
  mpic_flight_end(ticket);
  return 0;
}

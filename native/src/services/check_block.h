/* The block that every checked collective begins with (check_block.c): one
 * all-reduce of it tells every rank whether all ranks called the same
 * collective, and for a small all-reduce, reduce-scatter or all-gather it
 * carries the data too, so that the check costs no second round trip.
 * Used by agreement.c only; makes no MPI call. */
#ifndef MPI_COLLECTIVES_CHECK_BLOCK_H
#define MPI_COLLECTIVES_CHECK_BLOCK_H

#include <stddef.h>
#include <stdint.h>

/* The data a block carries, at most: a psum of 256 float32s, an all-gather
 * of 1 KiB in all. Every rank's block has this size whatever it called, so
 * ranks that disagree still make matching calls. Up to 1 KiB an all-reduce
 * costs one latency on every family measured (on one node and across
 * hosts), so a larger block costs the check of a large collective nothing
 * it would notice, while every collective up to 1 KiB saves a round trip. */
#define MPIC_BLOCK_PAYLOAD 1024
/* The small block's payload: a scalar psum's data, and nothing else. Its
 * block (32 bytes of words and 64 of data) costs Open MPI half the time of
 * the whole one on one node (0.21-0.23 us against 0.45-0.49 for an
 * all-reduce of it, 2 ranks of the 2-core VM); every rank uses the same
 * size for a call (agreement.c chooses it from the calls already agreed). */
#define MPIC_BLOCK_SMALL_PAYLOAD 64

/* What the payload holds, agreed like the signature (a rank whose payload
 * means something else disagrees): nothing, data to reduce as the signature
 * says, or each rank's part in its own place (the others zero). */
enum { MPIC_CARRY_NONE = 0, MPIC_CARRY_REDUCE = 1, MPIC_CARRY_PLACE = 2 };
/* The carry word's low bits hold the mode; the bits above, the phase of the
 * program its rank is in (phases.h), so that a collective of one phase never
 * meets one of another: the words differ, and the check says so. */
#define MPIC_CARRY_MODE_BITS 4
#define MPIC_CARRY_MODE(word) ((int)((word) & ((1u << MPIC_CARRY_MODE_BITS) - 1)))

struct mpic_block {
  /* The signature and the carry, each beside its complement: after the
   * all-reduce they hold the maximum of each, so a word equals the
   * complement of its partner exactly when every rank's was the same. */
  uint64_t sig, not_sig, carry, not_carry;
  unsigned char payload[MPIC_BLOCK_PAYLOAD];
};

/* A block for a rank's call: signature, carry, and no data yet. */
void mpic_block_start(struct mpic_block *b, uint64_t sig, int carry);
/* The phase this rank's call belongs to (0: none), in the carry word. */
void mpic_block_set_phase(struct mpic_block *b, int64_t phase);
/* After the all-reduce: the phase the highest rank's word named (its own alone when agreed). */
int64_t mpic_block_phase(const struct mpic_block *b);
/* After the all-reduce: did every rank call the same collective? */
int mpic_block_agreed(const struct mpic_block *b);
/* Bytes per element of the signature's datatype when the block can reduce
 * it exactly with the signature's reduction (integers with sum, product,
 * maximum or minimum; float32 and float64 the same); 0 otherwise. */
size_t mpic_block_reducible(uint64_t sig);
/* Bytes per element of the signature's datatype (any of signature_codes.h's
 * MPIC_T_ numbers), 0 for another. */
size_t mpic_block_element_size(uint64_t sig);
/* The words before the payload, in bytes; a block of `payload` bytes of
 * data is the first mpic_block_bytes(payload) bytes of a struct mpic_block. */
#define MPIC_BLOCK_HEADER (4 * sizeof(uint64_t))
static inline size_t mpic_block_bytes(size_t payload) { return MPIC_BLOCK_HEADER + payload; }
/* The blocks' reduction, as the library calls a user-defined operation
 * (agreement.c registers it, commutative, on a datatype of one block):
 * inout[i] becomes in[i] combined with inout[i]. Pure: tested without MPI
 * (tests/native/test_check_block.py). The whole block, and the small one
 * (MPIC_BLOCK_SMALL_PAYLOAD bytes of data). */
void mpic_block_reduce(void *in, void *inout, int *len, void *type);
void mpic_block_reduce_small(void *in, void *inout, int *len, void *type);

#endif

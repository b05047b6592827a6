/* The check's block and its reduction (check_block.h).
 *
 * Across hosts a collective's time at small sizes is network round trips,
 * and a check made as a separate all-reduce doubled them. So the check and a
 * small collective's data travel in one all-reduce of one block, reduced by
 * the operation below: the signatures are compared as before (the maximum of
 * each word and of its complement), and the data are reduced only where both
 * sides agree, so ranks that disagree never compute with each other's bytes.
 *
 * The reduction must give every rank the same bits, as the library's own
 * would: the library applies it to its operands in an order that differs
 * between ranks, so each element's combination is commutative bit for bit.
 * Sums and products of integers wrap as in two's complement; maximum and
 * minimum of floats return NaN when either is NaN (as XLA's max and min
 * do; the quiet NaN, whatever the operands' payloads), and +0 over -0 for the maximum (-0 for the minimum). */
#include "check_block.h"
#include <math.h>
#include <stddef.h>
#include <string.h>
#include "signature_codes.h"

_Static_assert(offsetof(struct mpic_block, payload) == MPIC_BLOCK_HEADER, "the words come first");

void mpic_block_start(struct mpic_block *b, uint64_t sig, int carry) {
  memset(b, 0, sizeof *b);
  b->sig = sig;
  b->not_sig = ~sig;
  b->carry = (uint64_t)carry;
  b->not_carry = ~(uint64_t)carry;
}

void mpic_block_set_phase(struct mpic_block *b, int64_t phase) {
  b->carry = (b->carry & ((1u << MPIC_CARRY_MODE_BITS) - 1)) | ((uint64_t)phase << MPIC_CARRY_MODE_BITS);
  b->not_carry = ~b->carry;
}

int64_t mpic_block_phase(const struct mpic_block *b) { return (int64_t)(b->carry >> MPIC_CARRY_MODE_BITS); }

int mpic_block_agreed(const struct mpic_block *b) { return b->sig == ~b->not_sig && b->carry == ~b->not_carry; }

size_t mpic_block_element_size(uint64_t sig) {
  switch (mpic_sig_type(sig)) {
    case MPIC_T_S8: case MPIC_T_U8: case MPIC_T_PRED: return 1; /* C's bool: one byte on every Linux ABI */
    case MPIC_T_S16: case MPIC_T_U16: return 2;
    case MPIC_T_F32: case MPIC_T_S32: case MPIC_T_U32: return 4;
    case MPIC_T_F64: case MPIC_T_S64: case MPIC_T_U64: case MPIC_T_C64: return 8;
    case MPIC_T_C128: return 16;
    default: return 0;
  }
}

size_t mpic_block_reducible(uint64_t sig) {
  unsigned op = mpic_sig_op(sig);
  if (op < MPIC_OP_SUM || op > MPIC_OP_MIN) return 0;
  unsigned type = mpic_sig_type(sig);
  if (type == MPIC_T_PRED || type == MPIC_T_C64 || type == MPIC_T_C128) return 0; /* the library's call */
  return mpic_block_element_size(sig);
}

/* Integers: sums and products in the unsigned type U (wrapping), order in T. */
#define INTEGERS(T, U)                                                    \
  static void reduce_##T(unsigned op, size_t n, const unsigned char *in, unsigned char *inout) { \
    for (size_t i = 0; i < n; i++) {                                      \
      T a, b, r;                                                          \
      memcpy(&a, in + i * sizeof(T), sizeof(T));                          \
      memcpy(&b, inout + i * sizeof(T), sizeof(T));                       \
      switch (op) {                                                       \
        case MPIC_OP_SUM: r = (T)((U)a + (U)b); break;                    \
        case MPIC_OP_PROD: r = (T)((U)a * (U)b); break;                   \
        case MPIC_OP_MAX: r = a > b ? a : b; break;                       \
        default: r = a < b ? a : b; break;                                \
      }                                                                   \
      memcpy(inout + i * sizeof(T), &r, sizeof(T));                       \
    }                                                                     \
  }
INTEGERS(int8_t, uint8_t)
INTEGERS(int16_t, uint16_t)
INTEGERS(int32_t, uint32_t)
INTEGERS(int64_t, uint64_t)
INTEGERS(uint8_t, uint8_t)
INTEGERS(uint16_t, uint16_t)
INTEGERS(uint32_t, uint32_t)
INTEGERS(uint64_t, uint64_t)

/* Floats: a + b and a * b are the same bits as b + a and b * a. */
#define FLOATS(T)                                                         \
  static void reduce_##T(unsigned op, size_t n, const unsigned char *in, unsigned char *inout) { \
    for (size_t i = 0; i < n; i++) {                                      \
      T a, b, r;                                                          \
      memcpy(&a, in + i * sizeof(T), sizeof(T));                          \
      memcpy(&b, inout + i * sizeof(T), sizeof(T));                       \
      if (op == MPIC_OP_SUM)                                              \
        r = a + b;                                                        \
      else if (op == MPIC_OP_PROD)                                        \
        r = a * b;                                                        \
      else if (isnan(a) || isnan(b)) /* one NaN, whichever came first */  \
        r = (T)NAN;                                                       \
      else if (a == b) /* equal, or zeros of two signs */                 \
        r = (op == MPIC_OP_MAX) == !signbit(a) ? a : b;                   \
      else                                                                \
        r = (op == MPIC_OP_MAX) == (a > b) ? a : b;                       \
      memcpy(inout + i * sizeof(T), &r, sizeof(T));                       \
    }                                                                     \
  }
typedef float float32;
typedef double float64;
FLOATS(float32)
FLOATS(float64)

static void reduce_data(uint64_t sig, const unsigned char *in, unsigned char *inout, size_t payload) {
  unsigned op = mpic_sig_op(sig);
  size_t n = (size_t)mpic_sig_count(sig), size = mpic_block_reducible(sig);
  if (!size || n * size > payload) return;
  switch (mpic_sig_type(sig)) {
    case MPIC_T_F32: reduce_float32(op, n, in, inout); break;
    case MPIC_T_F64: reduce_float64(op, n, in, inout); break;
    case MPIC_T_S8: reduce_int8_t(op, n, in, inout); break;
    case MPIC_T_S16: reduce_int16_t(op, n, in, inout); break;
    case MPIC_T_S32: reduce_int32_t(op, n, in, inout); break;
    case MPIC_T_S64: reduce_int64_t(op, n, in, inout); break;
    case MPIC_T_U8: reduce_uint8_t(op, n, in, inout); break;
    case MPIC_T_U16: reduce_uint16_t(op, n, in, inout); break;
    case MPIC_T_U32: reduce_uint32_t(op, n, in, inout); break;
    case MPIC_T_U64: reduce_uint64_t(op, n, in, inout); break;
  }
}

static uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* One block of `payload` bytes of data onto another, in the library's
 * buffers (which need not be aligned for the words: copied out and back). */
static void combine(const unsigned char *in, unsigned char *inout, size_t payload) {
  struct mpic_block a, b; /* their words only */
  memcpy(&a, in, MPIC_BLOCK_HEADER);
  memcpy(&b, inout, MPIC_BLOCK_HEADER);
  /* The data are combined only when both sides hold blocks of ranks that
   * all agree, and agree with each other. */
  if (mpic_block_agreed(&a) && mpic_block_agreed(&b) && a.sig == b.sig && a.carry == b.carry) {
    if (MPIC_CARRY_MODE(a.carry) == MPIC_CARRY_REDUCE) {
      reduce_data(a.sig, in + MPIC_BLOCK_HEADER, inout + MPIC_BLOCK_HEADER, payload);
    } else if (MPIC_CARRY_MODE(a.carry) == MPIC_CARRY_PLACE) {
      for (size_t i = 0; i < payload; i++) inout[MPIC_BLOCK_HEADER + i] |= in[MPIC_BLOCK_HEADER + i];
    }
  }
  b.sig = max64(a.sig, b.sig);
  b.not_sig = max64(a.not_sig, b.not_sig);
  b.carry = max64(a.carry, b.carry);
  b.not_carry = max64(a.not_carry, b.not_carry);
  memcpy(inout, &b, MPIC_BLOCK_HEADER);
}

static void reduce_blocks(void *in, void *inout, int len, size_t payload) {
  size_t stride = mpic_block_bytes(payload);
  for (int i = 0; i < len; i++)
    combine((const unsigned char *)in + (size_t)i * stride, (unsigned char *)inout + (size_t)i * stride, payload);
}

void mpic_block_reduce(void *in, void *inout, int *len, void *type) {
  (void)type; /* always the block's own datatype */
  reduce_blocks(in, inout, *len, MPIC_BLOCK_PAYLOAD);
}

void mpic_block_reduce_small(void *in, void *inout, int *len, void *type) {
  (void)type;
  reduce_blocks(in, inout, *len, MPIC_BLOCK_SMALL_PAYLOAD);
}

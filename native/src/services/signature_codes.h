/* A signature's parts as numbers (signature.h has the rest): no MPI type
 * here, so that pure code (check_block.c) and its tests need no MPI header. */
#ifndef MPI_COLLECTIVES_SIGNATURE_CODES_H
#define MPI_COLLECTIVES_SIGNATURE_CODES_H

#include <stdint.h>

/* The small numbers a signature holds for a datatype and a reduction (0:
 * none; past the tables: others, signature.c), in the order of signature.c's tables. */
enum {
  MPIC_T_F32 = 1, MPIC_T_F64, MPIC_T_S8, MPIC_T_S16, MPIC_T_S32, MPIC_T_S64,
  MPIC_T_U8, MPIC_T_U16, MPIC_T_U32, MPIC_T_U64, MPIC_T_C64, MPIC_T_C128, MPIC_T_PRED,
};
enum { MPIC_OP_SUM = 1, MPIC_OP_PROD, MPIC_OP_MAX, MPIC_OP_MIN };
static inline unsigned mpic_sig_kind(uint64_t sig) { return (unsigned)(sig >> 56); }
static inline unsigned mpic_sig_op(uint64_t sig) { return (unsigned)(sig >> 48) & 0xff; }
static inline unsigned mpic_sig_type(uint64_t sig) { return (unsigned)(sig >> 40) & 0xff; }
static inline int64_t mpic_sig_count(uint64_t sig) { return (int64_t)(sig & 0xffffffffffull); }

#endif

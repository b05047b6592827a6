/* A collective in one 64-bit signature, and its words (signature.c): what
 * agreement.c compares across ranks and what the flight recorder keeps. */
#ifndef MPI_COLLECTIVES_SIGNATURE_H
#define MPI_COLLECTIVES_SIGNATURE_H

#include <stddef.h>
#include <stdint.h>
#include "common.h"
#include "signature_codes.h"

/* The kinds, and their names in messages ([0] is "?"). The last two carry no
 * data: XLA's communicator creation (its split of the world) and the device
 * groups' exchange (services/devices/events.c). */
enum {
  MPIC_ALL_REDUCE = 1,
  MPIC_ALL_GATHER = 2,
  MPIC_REDUCE_SCATTER = 3,
  MPIC_ALL_TO_ALL = 4,
  MPIC_PERMUTE = 5,
  MPIC_SPLIT = 6,
  MPIC_DEVICE_EXCHANGE = 7,
};
extern const char *const mpic_kind_names[];


struct mpic_call {
  int kind;
  int64_t count;
  MPIABI_Datatype type; /* MPIABI_DATATYPE_NULL where there is none */
  MPIABI_Op op;         /* MPIABI_OP_NULL where there is none */
};

/* kind (8 bits), reduction (8), datatype (8), element count (40): equal
 * exactly when the calls agree, as far as these names tell. */
uint64_t mpic_signature(const struct mpic_call *c);
/* "all-reduce sum f32 x4", read back from a signature. */
void mpic_describe(uint64_t sig, char *out, size_t len);
/* The same words without formatting (async-signal-safe): kind, reduction
 * ("" for none), datatype, and the element count (-1 for kinds without data). */
void mpic_signature_words(uint64_t sig, const char **kind, const char **op, const char **type, long long *count);
/* A call named in a sentence: "all-reduce #3 (sum of 262144 f32)", its number on its communicator and
 * its exact element count given (the signature holds 40 bits of it; -1: the signature's). */
void mpic_call_words(uint64_t sig, unsigned long long number, long long count, char *out, size_t len);
/* "f32", or NULL for a datatype without a short name: the predefined,
 * contiguous ones XLA uses and a few more (signature.c's table). */
const char *mpic_type_name(MPIABI_Datatype t);
/* "sum", or NULL for an operation outside signature.c's table (which holds
 * predefined, commutative ones only). */
const char *mpic_op_name(MPIABI_Op op);

#endif

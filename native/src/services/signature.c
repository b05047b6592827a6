/* What the ranks compare and what messages print about a collective
 * (signature.h): small numbers for datatypes and reductions, packed into one
 * 64-bit signature, and read back as words. */
#include <stdio.h>
#include "signature.h"

/* ---- names, for the one line, and small numbers for the signature ----
 * The first entries are in the order of signature.h's MPIC_T_ and MPIC_OP_
 * numbers (check_block.c reduces by them). */
static const struct {
  const MPIABI_Datatype *type;
  const char *name;
} type_names[] = {
    {&MPIABI_FLOAT, "f32"},   {&MPIABI_DOUBLE, "f64"},   {&MPIABI_INT8_T, "s8"},           {&MPIABI_INT16_T, "s16"},
    {&MPIABI_INT32_T, "s32"}, {&MPIABI_INT64_T, "s64"},  {&MPIABI_UINT8_T, "u8"},          {&MPIABI_UINT16_T, "u16"},
    {&MPIABI_UINT32_T, "u32"}, {&MPIABI_UINT64_T, "u64"}, {&MPIABI_C_COMPLEX, "c64"},      {&MPIABI_C_DOUBLE_COMPLEX, "c128"},
    {&MPIABI_C_BOOL, "pred"}, {&MPIABI_BYTE, "byte"},    {&MPIABI_CHAR, "char"},           {&MPIABI_INT, "int"},
    {&MPIABI_LONG, "long"},   {&MPIABI_SHORT, "short"},  {&MPIABI_UNSIGNED, "unsigned"},
};
static const struct {
  const MPIABI_Op *op;
  const char *name;
} op_names[] = {
    {&MPIABI_SUM, "sum"},  {&MPIABI_PROD, "prod"}, {&MPIABI_MAX, "max"},         {&MPIABI_MIN, "min"},
    {&MPIABI_LAND, "and"}, {&MPIABI_LOR, "or"},    {&MPIABI_LXOR, "xor"},        {&MPIABI_BAND, "bitwise-and"},
    {&MPIABI_BOR, "bitwise-or"}, {&MPIABI_BXOR, "bitwise-xor"},
};
#define COUNT(a) (sizeof a / sizeof *a)

/* 1 + the datatype's place in type_names; for any other (a program's own
 * datatype, or a predefined one without a name here), 128 + its size in
 * bytes up to 126, so that two ranks whose datatypes differ in size differ
 * here too; 255 where the size is larger or unknown. */
static unsigned type_index(MPIABI_Datatype t) {
  for (size_t i = 0; i < COUNT(type_names); i++)
    if (*type_names[i].type == t) return (unsigned)i + 1;
  int size = 0;
  if (t != MPIABI_DATATYPE_NULL && mpic_next_Type_size(t, &size) == 0 && size > 0 && size <= 126)
    return 128u + (unsigned)size;
  return 255;
}
const char *mpic_type_name(MPIABI_Datatype t) {
  for (size_t i = 0; i < COUNT(type_names); i++)
    if (*type_names[i].type == t) return type_names[i].name;
  return NULL;
}
/* 1 + the operation's place in op_names; for any other, 254 where the
 * library says it is not commutative, 253 where it is, 255 unknown. */
enum { OP_COMMUTATIVE = 253, OP_NOT_COMMUTATIVE = 254, OP_UNKNOWN = 255 };
static unsigned op_index(MPIABI_Op op) {
  for (size_t i = 0; i < COUNT(op_names); i++)
    if (*op_names[i].op == op) return (unsigned)i + 1;
  int commutes = 0;
  if (mpic_next_Op_commutative(op, &commutes) != 0) return OP_UNKNOWN;
  return commutes ? OP_COMMUTATIVE : OP_NOT_COMMUTATIVE;
}
const char *mpic_op_name(MPIABI_Op op) {
  for (size_t i = 0; i < COUNT(op_names); i++)
    if (*op_names[i].op == op) return op_names[i].name;
  return NULL;
}

static const char *op_words(unsigned o) {
  if (o >= 1 && o <= COUNT(op_names)) return op_names[o - 1].name;
  if (o == OP_COMMUTATIVE) return "(a commutative reduction of the program's)";
  if (o == OP_NOT_COMMUTATIVE) return "(a non-commutative reduction of the program's)";
  return o ? "(another reduction)" : "";
}

/* Async-signal-safe: a fixed word for each size (the flight record prints from a signal handler). */
static const char *type_words(unsigned t) {
  static const char *const sized[] = {"(another datatype of 1 byte)", "(another datatype of 2 bytes)",
                                      "(another datatype of 4 bytes)", "(another datatype of 8 bytes)",
                                      "(another datatype of 16 bytes)"};
  if (t >= 1 && t <= COUNT(type_names)) return type_names[t - 1].name;
  switch (t) {
    case 129: return sized[0];
    case 130: return sized[1];
    case 132: return sized[2];
    case 136: return sized[3];
    case 144: return sized[4];
    default: return "(another datatype)";
  }
}

/* ---- signatures ----
 * kind (8 bits), reduction (8), datatype (8), element count (40): equal
 * exactly when the calls agree, as far as these names tell. */
const char *const mpic_kind_names[] = {"?", "all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                       "collective permute", "communicator creation", "device groups' exchange"};

uint64_t mpic_signature(const struct mpic_call *c) {
  unsigned op = c->op == MPIABI_OP_NULL ? 0u : op_index(c->op);
  return (uint64_t)(c->kind & 0xff) << 56 | (uint64_t)(op & 0xff) << 48 |
         (uint64_t)(type_index(c->type) & 0xff) << 40 | ((uint64_t)c->count & 0xffffffffffull);
}

void mpic_describe(uint64_t sig, char *out, size_t len) {
  unsigned kind = (unsigned)(sig >> 56), op = (unsigned)(sig >> 48) & 0xff, type = (unsigned)(sig >> 40) & 0xff;
  long long count = (long long)(sig & 0xffffffffffull);
  const char *op_text = op_words(op), *type_text = type_words(type);
  const char *kind_text = kind < COUNT(mpic_kind_names) ? mpic_kind_names[kind] : "?";
  if (kind >= MPIC_SPLIT) { /* no data of its own */
    snprintf(out, len, "%s", kind_text);
    return;
  }
  snprintf(out, len, "%s%s%s %s x%lld", kind_text, *op_text ? " " : "", op_text, type_text, count);
}


void mpic_call_words(uint64_t sig, unsigned long long number, long long count, char *out, size_t len) {
  const char *kind, *op, *type;
  long long signed_count;
  mpic_signature_words(sig, &kind, &op, &type, &signed_count);
  snprintf(out, len, "%s #%llu (%s%s%lld %s)", kind, number, op, *op ? " of " : "", count < 0 ? signed_count : count,
           type);
}

void mpic_signature_words(uint64_t sig, const char **kind, const char **op, const char **type, long long *count) {
  unsigned k = (unsigned)(sig >> 56), o = (unsigned)(sig >> 48) & 0xff, t = (unsigned)(sig >> 40) & 0xff;
  *kind = k < COUNT(mpic_kind_names) ? mpic_kind_names[k] : "?";
  *op = op_words(o);
  *type = type_words(t);
  *count = k >= MPIC_SPLIT ? -1 : (long long)(sig & 0xffffffffffull);
}

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

/* 1 + the datatype's place in type_names, 255 for any other. */
static unsigned type_index(MPIABI_Datatype t) {
  for (size_t i = 0; i < COUNT(type_names); i++)
    if (*type_names[i].type == t) return (unsigned)i + 1;
  return 255;
}
const char *mpic_type_name(MPIABI_Datatype t) {
  unsigned i = type_index(t);
  return i == 255 ? NULL : type_names[i - 1].name;
}
static unsigned op_index(MPIABI_Op op) {
  for (size_t i = 0; i < COUNT(op_names); i++)
    if (*op_names[i].op == op) return (unsigned)i + 1;
  return 255;
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
  const char *op_text = op >= 1 && op <= COUNT(op_names) ? op_names[op - 1].name : op ? "(another reduction)" : "";
  const char *type_text = type >= 1 && type <= COUNT(type_names) ? type_names[type - 1].name : "(another datatype)";
  const char *kind_text = kind < COUNT(mpic_kind_names) ? mpic_kind_names[kind] : "?";
  if (kind >= MPIC_SPLIT) { /* no data of its own */
    snprintf(out, len, "%s", kind_text);
    return;
  }
  snprintf(out, len, "%s%s%s %s x%lld", kind_text, *op_text ? " " : "", op_text, type_text, count);
}


void mpic_signature_words(uint64_t sig, const char **kind, const char **op, const char **type, long long *count) {
  unsigned k = (unsigned)(sig >> 56), o = (unsigned)(sig >> 48) & 0xff, t = (unsigned)(sig >> 40) & 0xff;
  *kind = k < COUNT(mpic_kind_names) ? mpic_kind_names[k] : "?";
  *op = o >= 1 && o <= COUNT(op_names) ? op_names[o - 1].name : o ? "(another reduction)" : "";
  *type = t >= 1 && t <= COUNT(type_names) ? type_names[t - 1].name : "(another datatype)";
  *count = k >= MPIC_SPLIT ? -1 : (long long)(sig & 0xffffffffffull);
}

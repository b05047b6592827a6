/* The exported MPIABI interface that is not written by hand (generated from
 * the tables: exports.inc): the constants, and each function as the
 * library's version, mpic_next_<Name> (base/library.c). The functions
 * treatment.txt marks `own` are exported by the entry files it names. */
#include "common.h"

#include "exports.inc"

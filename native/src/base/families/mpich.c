/* The MPICH ABI family: MPICH >= 3.1, Intel MPI, Cray MPICH, MVAPICH
 * (libmpi.so.12). Everything special about it is here.
 *
 * - Handles are 4-byte ints (zero-extended in MPIABI handles, so that a
 *   handle round-trips and the exported constants compare equal to the
 *   handles the library returns), except MPI_File, a pointer.
 * - The status is five ints: count_lo, count_hi_and_cancelled, MPI_SOURCE,
 *   MPI_TAG, MPI_ERROR.
 * - The Fortran handle of a handle is the handle itself: mpi.h defines
 *   MPI_Comm_c2f and friends as casts, and Intel MPI's library does not
 *   export them at all.
 * - Constant values: native/abi/mpich_constants.txt, read off MPICH's mpi.h
 *   by native/gen/extract_abi.py. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "predefined.h"
#include "common.h"
#include "convert.h"
#include "family.h"

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

#define INT_HANDLE(T)                                                                    \
  static inline int mpich_to_n_##T(uintptr_t h) { return (int)(uint32_t)h; }           \
  static inline uintptr_t mpich_from_n_##T(int h) { return (uintptr_t)(uint32_t)h; }
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
static inline void *mpich_to_n_File(uintptr_t h) { return (void *)h; }
static inline uintptr_t mpich_from_n_File(void *h) { return (uintptr_t)h; }

static const struct mpic_status_layout mpich_status_layout = {
    .size = 20, .source = 8, .tag = 12, .error = 16, .priv_off = 0, .priv_len = 8};

#include "mpich_constants.inc"
#include "mpich_forwarders.inc"

/* Everything that is not the standard ABI or Open MPI: the MPICH ABI. */
static int mpich_recognizes(void *lib, char *why, size_t whylen) {
  (void)lib;
  snprintf(why, whylen, "no standard-ABI version, no Open MPI symbols: MPICH ABI (MPICH, Intel MPI, Cray MPICH, "
                        "MVAPICH)");
  return 1;
}

static int mpich_same_int(int handle) { return handle; }

static void *mpich_fallback(void *lib, const char *name) {
  (void)lib;
  if (strncmp(name, "MPI_File_", 9) && (strstr(name, "_c2f") || strstr(name, "_f2c")) &&
      strcmp(name, "MPI_Status_c2f") && strcmp(name, "MPI_Status_f2c"))
    return (void *)mpich_same_int;
  return NULL;
}

static const char *const mpich_library_names[] = {"libmpi.so.12", "libmpich.so.12", NULL};

const struct mpic_family mpic_family_mpich = {
    .id = MPIC_FAMILY_MPICH,
    .name = "mpich",
    .library_names = mpich_library_names,
    .searched_by_default = 1,
    .recognizes = mpich_recognizes,
    .functions = (void **)&mpich_fn,
    .fallback = mpich_fallback,
    .set_constants = mpich_set_constants,
    .activate = NULL,
    .handle_size = sizeof(mpich_nt_Comm),
    .status = &mpich_status_layout,
    .sizing = &mpich_sizing,
};

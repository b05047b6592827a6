/* The handshake with jaxlib's bundled MPItrampoline, which loads this library
 * through MPITRAMPOLINE_LIB: the version symbols it checks, the function it
 * calls right after loading us, and the constructor that must have filled in
 * every MPIABI constant by the time dlopen returns (MPItrampoline reads them
 * at once). */
#include "common.h"
#include "devices.h"
#include "family.h"
#include "loader.h"
#include "log.h"
#include "settings.h"

MPIABI_EXPORT int mpiwrapper_version_major = MPIC_VERSION_MAJOR;
MPIABI_EXPORT int mpiwrapper_version_minor = MPIC_VERSION_MINOR;
MPIABI_EXPORT int mpiwrapper_version_patch = MPIC_VERSION_PATCH;
MPIABI_EXPORT int mpiabi_version_major = 2; /* MPItrampoline 5.3.1 requires 2.9 or later */
MPIABI_EXPORT int mpiabi_version_minor = 9;
MPIABI_EXPORT int mpiabi_version_patch = 0;

/* MPItrampoline calls this to let a Fortran wrapper export its constants. We
 * have no Fortran layer; we note that jaxlib's trampoline has attached, which
 * the Python layer checks to tell a user who imported jax too early. */
int mpic_trampoline_attached_flag = 0;
MPIABI_EXPORT void mpiwrapper_export_fortran_constants_(void) { mpic_trampoline_attached_flag = 1; }

__attribute__((constructor)) static void mpic_constructor(void) {
  mpic_read_settings();
  mpic_family_mpich.set_constants(NULL); /* defined values even when no MPI can be loaded */
  mpic_load();
  if (!mpic_family) mpic_log(1, "no MPI library loaded: %s", mpic_search_report);
  /* A program that never calls initialize() has its devices served too. More
   * than the wrapper serves is left at 1: the Python layer (initialize(), or
   * the JAX plugin hook for other programs) stops the job with the sentence. */
  int devices = mpic_devices_from_environment();
  if (devices > 1 && mpic_devices_set_local(devices) == 0)
    mpic_log(1, "%d CPU devices per process, from JAX's environment", devices);
}

/* With a launcher of another MPI, every process initializes as a singleton
 * and silently believes it is rank 0 of 1: the launcher's environment says
 * how many processes it started, so the wrapper compares. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "family.h"
#include "launcher_abort.h"
#include "launcher_env.h"
#include "launchers.h"
#include "loader.h"
#include "log.h"

/* Not mpic_end_job: MPI is not (or only as a singleton) initialized, and
 * every rank says it for itself. */
static __attribute__((noreturn)) void mismatch(const struct mpic_launcher *l, int started, const char *what) {
  const char *r = getenv(l->rank_var);
  mpic_terminal_printf(
          "mpi-collectives: error: process %s of %d was started by %s (%s=%d), but the MPI library %s "
          "(%s ABI) %s: the launcher and the library come from different MPI installations. "
          "Fix: launch with the mpiexec that belongs to %s, or set MPI_COLLECTIVES_LIBMPI to the "
          "libmpi of the MPI whose launcher you use.\n",
          r ? r : "?", started, l->name, l->size_var, started, mpic_loaded_path,
          mpic_family ? mpic_family->name : "no", what, mpic_loaded_path);
  fflush(stderr); /* (the library's own lines first) */
  mpic_launcher_abort(1); /* one rank alone may be wrong: the others wait in MPI_Init */
  _exit(1);
}

/* Does the loaded library (or a library it links) speak PMIx? MPICH built
 * with PMIx links libpmix; Intel MPI loads one itself (I_MPI_PMI_LIBRARY), so
 * it counts as speaking it. */
static int library_has_pmix(void) {
  void *lib = dlopen(mpic_loaded_path, RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) return 1; /* cannot tell: let the library judge */
  int yes = dlsym(lib, "PMIx_Init") != NULL || dlsym(lib, "I_MPI_Check_image_status") != NULL;
  dlclose(lib);
  return yes;
}

/* MPICH aborts under Open MPI's launcher with an error stack about PMIx, and
 * Open MPI under Hydra prints a missing help file. Slurm's srun can start
 * either, so it is not judged here, except for a PMIx plugin (srun
 * --mpi=pmix sets PMIX_RANK, no PMI_RANK) with an MPICH-ABI library that has
 * no PMIx: MPICH would abort with "unsupported PMI version PMIx". */
void mpic_check_launcher_before_init(void) {
  int started = 0;
  const struct mpic_launcher *l = mpic_started_by(&started);
  if (!l) return;
  if (getenv("PMIX_RANK") && !getenv("PMI_RANK") && !getenv("OMPI_COMM_WORLD_SIZE") &&
      mpic_family_id != MPIC_FAMILY_OPENMPI && !library_has_pmix()) {
    const char *r = getenv("PMIX_RANK");
    mpic_terminal_printf(
            "mpi-collectives: error: process %s of %d was started through PMIx (%s, PMIX_RANK set), but the "
            "MPI library %s has no PMIx support (it speaks PMI-1 and PMI-2 only; the `mpich` wheel is built "
            "that way). Fix: %s, or use an MPI built with PMIx.\n",
            r, started, getenv("SLURM_STEP_ID") ? "srun --mpi=pmix" : l->name, mpic_loaded_path,
            getenv("SLURM_STEP_ID") ? "launch with srun --mpi=pmi2" : "launch with a PMI-2 launcher (srun --mpi=pmi2, "
            "or this MPI's own mpiexec)");
    fflush(stderr); /* (the library's own lines first) */
    mpic_launcher_abort(1);
    _exit(1);
  }
  int ompi_launcher = !strcmp(l->kind, "openmpi");
  int hydra_launcher = !strcmp(l->kind, "pmi") && !getenv("OMPI_COMM_WORLD_SIZE") &&
                       !getenv("SLURM_STEP_ID"); /* srun --mpi=pmi2 sets PMI_SIZE too */
  if ((ompi_launcher && mpic_family_id != MPIC_FAMILY_OPENMPI && !getenv("PMI_SIZE")) ||
      (hydra_launcher && mpic_family_id == MPIC_FAMILY_OPENMPI))
    mismatch(l, started, "cannot join the processes it started");
}

void mpic_check_launcher(int world_size, int world_rank) {
  int started = 0;
  const struct mpic_launcher *l = mpic_started_by(&started);
  if (!l) return;
  if (world_size == 1 && !strcmp(l->kind, "slurm")) {
    /* srun set no PMI variable: no plugin wired the processes together. */
    const char *r = getenv(l->rank_var);
    mpic_terminal_printf(
            "mpi-collectives: error: process %s of %d was started by srun without a PMI plugin (srun --mpi=none, "
            "or MpiDefault=none in slurm.conf), so the MPI library %s started it alone, as rank 0 of 1. "
            "Fix: srun --mpi=pmi2 (or the plugin your site's MPI was built for: `srun --mpi=list` shows them; "
            "pmix for Open MPI).\n",
            r ? r : "?", started, mpic_loaded_path);
    fflush(stderr); /* (the library's own lines first) */
    mpic_launcher_abort(1);
    _exit(1);
  }
  if (world_size == 1) mismatch(l, started, "sees a world of 1");
  if (world_size != started)
    mpic_log(0, "rank %d: the launcher says %s=%d but MPI_COMM_WORLD has %d processes", world_rank,
             l->size_var, started, world_size);
}

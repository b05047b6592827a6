/* Reading the native layer's settings (settings.h), once, when it is loaded.
 * A value that is not understood is an error, not a guess: the library is
 * then not loaded, and the first MPI call (or initialize()) says which
 * variable, which value, and what it may be (mpic_settings_error). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "family.h"
#include "settings.h"

struct mpic_settings mpic_settings = {.verbose = 0, .forced_family = 0, .thread_level = 3, .any_thread = 1,
                                      .check_splits = 1, .check_collectives = 1, .devices_timeout = 60,
                                      .libmpi = NULL};
char mpic_settings_error[512];

static const char *const thread_levels[] = {"single", "funneled", "serialized", "multiple"};

static void bad(const char *var, const char *value, const char *allowed) {
  if (!mpic_settings_error[0])
    snprintf(mpic_settings_error, sizeof mpic_settings_error, "%s=%s is not %s. Fix: correct %s or unset it",
             var, value, allowed, var);
}

/* A whole number, or an error naming the variable. */
static void read_int(const char *var, int *out, int lo, int hi) {
  const char *v = getenv(var);
  if (!v || !*v) return;
  char *end = NULL;
  long n = strtol(v, &end, 10);
  if (*end || n < lo || n > hi) {
    char allowed[64];
    snprintf(allowed, sizeof allowed, "a whole number from %d to %d", lo, hi);
    bad(var, v, allowed);
    return;
  }
  *out = (int)n;
}

void mpic_read_settings(void) {
  read_int("MPI_COLLECTIVES_VERBOSE", &mpic_settings.verbose, 0, 9);
  read_int("MPI_COLLECTIVES_ANY_THREAD", &mpic_settings.any_thread, 0, 1);
  read_int("MPI_COLLECTIVES_CHECK_SPLITS", &mpic_settings.check_splits, 0, 1);
  read_int("MPI_COLLECTIVES_CHECK_COLLECTIVES", &mpic_settings.check_collectives, 0, 1);
  read_int("MPI_COLLECTIVES_DEVICES_TIMEOUT", &mpic_settings.devices_timeout, 1, 86400);
  const char *l = getenv("MPI_COLLECTIVES_LIBMPI");
  if (l && *l) mpic_settings.libmpi = l;

  const char *abi = getenv("MPI_COLLECTIVES_ABI");
  if (abi && *abi) {
    mpic_settings.forced_family = -1;
    for (size_t i = 0; i < sizeof mpic_families / sizeof *mpic_families; i++)
      if (!strcasecmp(abi, mpic_families[i]->name)) mpic_settings.forced_family = mpic_families[i]->id;
    if (mpic_settings.forced_family < 0) bad("MPI_COLLECTIVES_ABI", abi, "one of mpich, openmpi, standard");
  }

  const char *t = getenv("MPI_COLLECTIVES_THREAD_LEVEL");
  if (t && *t) {
    int found = 0;
    for (int i = 0; i < 4; i++)
      if (!strcasecmp(t, thread_levels[i])) mpic_settings.thread_level = i, found = 1;
    if (!strcasecmp(t, "requested")) mpic_settings.thread_level = -1, found = 1;
    if (!found)
      bad("MPI_COLLECTIVES_THREAD_LEVEL", t, "one of single, funneled, serialized, multiple, requested");
  }
}

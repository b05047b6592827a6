/* Reading the native layer's settings (settings.h), once, when it is loaded. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "family.h"
#include "log.h"
#include "settings.h"

struct mpic_settings mpic_settings = {
    .verbose = 0, .forced_family = 0, .thread_level = 3, .any_thread = 1, .check_splits = 1, .libmpi = NULL};

static const char *const thread_levels[] = {"single", "funneled", "serialized", "multiple"};

void mpic_read_settings(void) {
  const char *v = getenv("MPI_COLLECTIVES_VERBOSE");
  if (v && *v) mpic_settings.verbose = atoi(v);
  const char *a = getenv("MPI_COLLECTIVES_ANY_THREAD");
  if (a && *a) mpic_settings.any_thread = atoi(a) != 0;
  const char *c = getenv("MPI_COLLECTIVES_CHECK_SPLITS");
  if (c && *c) mpic_settings.check_splits = atoi(c) != 0;
  const char *l = getenv("MPI_COLLECTIVES_LIBMPI");
  if (l && *l) mpic_settings.libmpi = l;

  const char *abi = getenv("MPI_COLLECTIVES_ABI");
  if (abi && *abi) {
    mpic_settings.forced_family = -1;
    for (size_t i = 0; i < sizeof mpic_families / sizeof *mpic_families; i++)
      if (!strcmp(abi, mpic_families[i]->name)) mpic_settings.forced_family = mpic_families[i]->id;
    if (mpic_settings.forced_family < 0)
      mpic_log(0, "MPI_COLLECTIVES_ABI=%s is not one of mpich, openmpi, standard; detecting the ABI instead", abi);
  }

  const char *t = getenv("MPI_COLLECTIVES_THREAD_LEVEL");
  if (t && *t) {
    int found = 0;
    for (int i = 0; i < 4; i++)
      if (!strcasecmp(t, thread_levels[i])) mpic_settings.thread_level = i, found = 1;
    if (!strcasecmp(t, "requested")) mpic_settings.thread_level = -1, found = 1;
    if (!found)
      mpic_log(0, "MPI_COLLECTIVES_THREAD_LEVEL=%s is not one of single, funneled, serialized, "
                  "multiple, requested; using multiple", t);
  }
}

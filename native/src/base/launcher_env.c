/* The launcher's environment variables (launcher_env.h). */
#include <stdio.h>
#include <stdlib.h>
#include "launcher_env.h"

#include "launchers.inc"

static const char *first_set(const char *const *vars) {
  for (size_t i = 0; vars[i]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return v;
  }
  return NULL;
}

const char *mpic_launcher_where(char *buf, size_t len) {
  const char *r = first_set(mpic_rank_vars), *n = first_set(mpic_size_vars);
  snprintf(buf, len, "rank %s/%s", r ? r : "?", n ? n : "?");
  return buf;
}

const struct mpic_launcher *mpic_started_by(int *started) {
  for (size_t i = 0; i < sizeof mpic_launchers / sizeof *mpic_launchers; i++) {
    const char *v = getenv(mpic_launchers[i].size_var);
    *started = v ? atoi(v) : 0;
    if (*started > 1) return &mpic_launchers[i];
  }
  return NULL;
}

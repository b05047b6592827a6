/* The launcher's environment variables (launcher_env.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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

const char *mpic_launcher_family(void) {
  for (size_t i = 0; i < sizeof mpic_launchers / sizeof *mpic_launchers; i++) {
    const char *size = getenv(mpic_launchers[i].size_var), *rank = getenv(mpic_launchers[i].rank_var);
    if ((size && *size) || (rank && *rank)) return *mpic_launchers[i].family ? mpic_launchers[i].family : NULL;
  }
  return NULL;
}

/* The parent of process `pid` (field 4 of /proc/PID/stat), or -1. */
static int parent_of(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t got = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[got] = 0;
  const char *end = strrchr(buf, ')'); /* the command name may hold anything */
  int ppid = -1;
  if (!end || sscanf(end + 1, " %*c %d", &ppid) != 1) return -1;
  return ppid;
}

const struct mpic_launcher_program *mpic_launcher_program(char *exe, size_t len) {
  int pid = getppid();
  for (int generation = 0; generation < 2 && pid > 1; generation++, pid = parent_of(pid)) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", pid);
    ssize_t n = readlink(path, exe, len - 1);
    if (n <= 0) continue;
    exe[n] = 0;
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    for (size_t i = 0; i < sizeof mpic_launcher_programs / sizeof *mpic_launcher_programs; i++)
      if (!strcmp(base, mpic_launcher_programs[i].program)) return &mpic_launcher_programs[i];
  }
  return NULL;
}

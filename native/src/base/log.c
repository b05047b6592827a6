#include <stdarg.h>
#include <stdio.h>
#include "launcher_env.h"
#include "log.h"
#include "settings.h"
#include "terminal.h"

void mpic_log(int level, const char *fmt, ...) {
  if (level > mpic_settings.verbose) return;
  char line[1024], where[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  mpic_terminal_printf("mpi-collectives [%s]: %s\n", mpic_launcher_where(where, sizeof where), line);
}

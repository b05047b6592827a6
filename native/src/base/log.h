/* Log lines on the terminal (terminal.h), `mpi-collectives [rank R/N]: ...`,
 * when MPI_COLLECTIVES_VERBOSE >= level (level 0: always). */
#ifndef MPI_COLLECTIVES_LOG_H
#define MPI_COLLECTIVES_LOG_H

#include "terminal.h"

void mpic_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

/* Log lines, `mpi-collectives [rank R/N]: ...`, when MPI_COLLECTIVES_VERBOSE >=
 * level (level 0: always); and every line the wrapper prints, on the stderr
 * the process had when the wrapper was loaded, whatever descriptor 2 is now
 * (log.c says why). */
#ifndef MPI_COLLECTIVES_LOG_H
#define MPI_COLLECTIVES_LOG_H

#include <stddef.h>

void mpic_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The terminal's descriptor, and writing to it (whole, one write where it fits:
 * ranks' lines do not run into each other). */
int mpic_terminal(void);
void mpic_terminal_write(const char *text, size_t len);
void mpic_terminal_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Python's copy of the stderr it had before pytest captured descriptor 2. */
int mpic_log_keep_terminal(int fd);

#endif

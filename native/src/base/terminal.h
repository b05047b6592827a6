/* Every line the wrapper prints goes to the stderr the process had when the
 * wrapper was loaded, whatever descriptor 2 is now: a line that ends a job
 * must reach the person who runs it, and pytest (or any program that
 * redirects descriptor 2 for a while) would keep it in a file nobody reads
 * once the job is gone. No dependency: pure harnesses link it. */
#ifndef MPI_COLLECTIVES_TERMINAL_H
#define MPI_COLLECTIVES_TERMINAL_H

#include <stddef.h>

int mpic_terminal(void);
/* The whole text, in one write where the descriptor takes it (ranks' lines do not run into each other). */
void mpic_terminal_write(const char *text, size_t len);
void mpic_terminal_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Python's copy of the stderr it had before pytest captured descriptor 2 (mpi_collectives/base/log.py). */
int mpic_terminal_keep(int fd);

#endif

/* Ending the job from a rank that stops before MPI_Init (launcher_abort.h).
 *
 * Hydra ends a job when a process dies of a signal, calls PMI's abort, or
 * exits after PMI init without finalizing; a process that exits before it
 * ever spoke PMI merely ended, and the other ranks wait in MPI_Init for it
 * (measured: MPICH 5.0.2's Hydra, one rank with MPI_COLLECTIVES_BIND_CPUS=7
 * or a wrong MPI_COLLECTIVES_LIBMPI, the other waited until killed). Open
 * MPI's mpirun ends the job when any process exits non-zero, so it needs
 * nothing. The PMI-1 wire protocol is lines of key=value over the descriptor
 * in PMI_FD: "cmd=init ...", answered "cmd=response_to_init ... rc=0", then
 * "cmd=abort exitcode=N"; Hydra and Slurm's pmi2 plugin take it from a
 * process that has not spoken before. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "family.h"
#include "launcher_abort.h"
#include "library.h"

static int init_begun = 0;

void mpic_launcher_init_begins(void) { __atomic_store_n(&init_begun, 1, __ATOMIC_SEQ_CST); }

static int write_all(int fd, const char *text, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, text, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    text += n;
    len -= (size_t)n;
  }
  return 1;
}

/* One answer line, waiting at most `ms` for each piece of it. */
static int read_line(int fd, char *line, size_t size, int ms) {
  size_t got = 0;
  while (got + 1 < size) {
    struct pollfd p = {fd, POLLIN, 0};
    int ready = poll(&p, 1, ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return 0;
    ssize_t n = read(fd, line + got, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    if (line[got++] == '\n') break;
  }
  line[got] = 0;
  return 1;
}

/* Has the library (ours, or one a program loaded first: mpi4py) begun MPI_Init? */
static int library_owns_the_connection(void) {
  int flag = 0;
  if (__atomic_load_n(&init_begun, __ATOMIC_SEQ_CST)) return 1;
  return mpic_family && mpic_next_Initialized(&flag) == 0 && flag;
}

int mpic_launcher_abort(int code) {
  const char *fd_text = getenv("PMI_FD"), *size_text = getenv("PMI_SIZE");
  if (!fd_text || !*fd_text || !size_text || atoi(size_text) < 2 || library_owns_the_connection()) return 0;
  int fd = atoi(fd_text);
  char line[256];
  fflush(stdout);
  fflush(stderr);
  /* Before the launcher ends every process: for it to forward this one's last lines, and for the
   * other ranks, where they stop the same way (every rank given the same wrong setting), to print
   * theirs: their start-up may lag this one's by a second on a loaded node. */
  sleep(3);
  static const char init[] = "cmd=init pmi_version=1 pmi_subversion=1\n";
  if (!write_all(fd, init, sizeof init - 1) || !read_line(fd, line, sizeof line, 5000)) return 0;
  if (strncmp(line, "cmd=response_to_init", 20) != 0 || !strstr(line, "rc=0")) return 0;
  int len = snprintf(line, sizeof line, "cmd=abort exitcode=%d\n", code);
  return write_all(fd, line, (size_t)len);
}

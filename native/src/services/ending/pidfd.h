/* pidfd_open(2), for the watchers: a descriptor that becomes readable when a
 * process (or, with PIDFD_THREAD, its main thread) has ended. */
#ifndef MPI_COLLECTIVES_PIDFD_H
#define MPI_COLLECTIVES_PIDFD_H

#include <fcntl.h>
#include <sys/syscall.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every Linux architecture */
#endif
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* Linux 6.9 on */
#endif

#endif

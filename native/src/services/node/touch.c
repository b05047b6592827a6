/* A window's share touched under a SIGBUS guard (internal.h).
 *
 * MPICH and Open MPI map a window's file (in /dev/shm, or Open MPI's
 * osc_sm_backing_directory) and its pages are made when first touched:
 * where the filesystem is full then (a container's 64 MiB /dev/shm, or the
 * windows of other communicators touched since their own look at the room),
 * the rank dies of SIGBUS in a copy. So each rank touches its whole share
 * once, when the window is made, where a SIGBUS is caught and becomes an
 * answer; the pages then count as used for every later look at the room.
 *
 * The guard is per thread (sigsetjmp/siglongjmp from a synchronous fault);
 * another thread's SIGBUS goes to the handler that was there before
 * (Python's faulthandler, or the default). */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include "internal.h"

static __thread sigjmp_buf *touching; /* this thread's guard, while it touches */
static struct sigaction before;       /* the handler that was there */
static pthread_mutex_t touch_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_sigbus(int sig, siginfo_t *info, void *context) {
  if (touching) siglongjmp(*touching, 1);
  if (before.sa_flags & SA_SIGINFO) {
    before.sa_sigaction(sig, info, context);
  } else if (before.sa_handler != SIG_IGN && before.sa_handler != SIG_DFL) {
    before.sa_handler(sig);
  } else {
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
  }
}

int mpic_node_touch(char *share, size_t bytes) {
  struct sigaction guard;
  memset(&guard, 0, sizeof guard);
  guard.sa_sigaction = on_sigbus;
  guard.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&guard.sa_mask);
  sigjmp_buf here;
  volatile int ok = 0;
  pthread_mutex_lock(&touch_lock);
  sigaction(SIGBUS, &guard, &before);
  if (!sigsetjmp(here, 1)) {
    touching = &here;
    memset(share, 0, bytes);
    ok = 1;
  }
  touching = NULL;
  sigaction(SIGBUS, &before, NULL);
  pthread_mutex_unlock(&touch_lock);
  return ok;
}

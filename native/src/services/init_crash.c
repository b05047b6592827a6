/* The note written when the MPI library crashes inside MPI_Init: why in
 * init_crash.h. The handler makes only async-signal-safe calls (write,
 * sigaction, raise); the note is written into a static buffer before MPI_Init
 * starts, never while it runs. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "terminal.h"
#include "common.h"
#include "init_crash.h"

static const char general[] =
    "mpi-collectives: error: the MPI library crashed inside MPI_Init, before the ranks could compare their "
    "settings. Ranks that start MPI with different settings of the library can crash there (MPICH, when one rank "
    "has an MPIR_CVAR_*_ALGORITHM of its own). Fix: give every rank the same MPI settings: export them in the job "
    "script before the launcher, not to some ranks only; if every rank has the same, the crash is the MPI "
    "library's own.\n";
static char note[4096];
static size_t note_len;
static const int signals[] = {SIGSEGV, SIGBUS};
static struct sigaction before[2];
static int installed[2];

MPIABI_EXPORT int mpic_set_init_crash_note(const char *text) {
  size_t n = strlen(text);
  if (n > sizeof note - 2) n = sizeof note - 2;
  memcpy(note, text, n);
  note[n++] = '\n';
  note_len = n;
  return 0;
}

static void on_crash(int sig, siginfo_t *info, void *context) {
  (void)context;
  const char *text = note_len ? note : general;
  size_t len = note_len ? note_len : sizeof general - 1;
  ssize_t wrote = write(mpic_terminal(), text, len);
  (void)wrote;
  for (int i = 0; i < 2; i++)
    if (signals[i] == sig) sigaction(sig, &before[i], NULL);
  /* A fault happens again when the handler returns, and meets the handler from
   * before; a signal sent by kill() would not, so it is raised again. */
  if (info == NULL || info->si_code <= 0) raise(sig);
}

void mpic_init_crash_begin(void) {
  struct sigaction ours;
  memset(&ours, 0, sizeof ours);
  ours.sa_sigaction = on_crash;
  ours.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&ours.sa_mask);
  for (int i = 0; i < 2; i++) installed[i] = sigaction(signals[i], &ours, &before[i]) == 0;
}

void mpic_init_crash_end(void) {
  for (int i = 0; i < 2; i++) {
    struct sigaction now;
    /* The MPI library (UCX, say) may have put a handler of its own in place meanwhile: it stays. */
    if (installed[i] && sigaction(signals[i], NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) &&
        now.sa_sigaction == on_crash)
      sigaction(signals[i], &before[i], NULL);
    installed[i] = 0;
  }
}

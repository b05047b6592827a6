/* A failed MPI call made for XLA (call_failed.h). XLA's communicators
 * return errors (comm_record.c sets their handler), so the wrapper, not the
 * library, says what happened: most often another rank died, which the
 * peer watch can name; else the library's own text, on one line. */
#include <stdio.h>
#include "call_failed.h"
#include "comm_record.h"
#include "common.h"
#include "end_job.h"
#include "peer_watch.h"

void mpic_end_if_a_peer_died(const char *function) {
  char dead[320];
  if (mpic_watch_dead_peer(500, dead, sizeof dead))
    mpic_fatal("%s ended while the job was still running, before finishing its program: killed (SIGKILL, the "
               "out-of-memory killer), crashed, called os._exit, or stopped by its MPI library's own error "
               "handler; rank %d's %s failed on it. Ending the whole job. Fix: see that rank's own output and "
               "the launcher's report (exit code, signal) for why it ended",
               dead, mpic_record_world_rank(), function);
}

void mpic_call_failed(const char *function, int code) {
  char text[1024] = "";
  int n = 0;
  if (mpic_next_Error_string(code, text, &n) != 0) snprintf(text, sizeof text, "error code %d", code);
  /* One line: MPICH's text is an error stack over several. */
  for (char *p = text; *p; p++)
    if (*p == '\n') *p = ' ';
  mpic_end_if_a_peer_died(function);
  mpic_fatal("rank %d: %s failed in a collective XLA runs: %s (the MPI library's words). Fix: see the "
             "first error of the job above; when ranks disagree about a collective's size, make every "
             "rank run the same collectives with the same shapes",
             mpic_record_world_rank(), function, text);
}

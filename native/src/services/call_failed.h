/* A failed MPI call made for XLA (call_failed.c): the job ends with the
 * library's words, or names the rank of this node that died first. Called
 * by every service that calls the library on XLA's behalf (dispatch.c,
 * agreement.c, arrivals.c, devices/). */
#ifndef MPI_COLLECTIVES_CALL_FAILED_H
#define MPI_COLLECTIVES_CALL_FAILED_H

__attribute__((noreturn)) void mpic_call_failed(const char *function, int code);
/* Something other than a library call failed on a peer's account (the node path reading a peer's memory,
 * `function` naming it): where a rank of this node has died, the job ends naming it, as above; else this
 * returns, for the caller's own sentence. */
void mpic_end_if_a_peer_died(const char *function);

#endif

/* XLA's point-to-point transfers on the communicators it created
 * (arrivals.h): its all-to-all (one MPI_Sendrecv per peer) and its
 * collective permute (MPI_Irecv, MPI_Isend, then MPI_Wait on each) make no
 * collective call to check first, so each arrival is checked instead: the
 * element count received must be the one expected. A larger message than
 * expected is the library's own "message truncated", which the
 * communicator's error handler returns and the job ends with its words.
 * Each transfer is in the flight record whatever the checks (comm_record.h);
 * MPI_COLLECTIVES_CHECK_COLLECTIVES=0 turns the count check off. */
#include <pthread.h>
#include <stdlib.h>
#include "agreement.h"
#include "arrivals.h"
#include "call_failed.h"
#include "comm_record.h"
#include "common.h"
#include "end_job.h"
#include "flight.h"
#include "dispatch.h"
#include "signature.h"

static __attribute__((noreturn)) void short_arrival(const char *what, int expected, int received,
                                                    MPIABI_Datatype type, int source) {
  const char *t = type == MPIABI_BYTE ? "bytes" : mpic_type_name(type);
  mpic_fatal("rank %d: %s expected %d %s from rank %d of XLA's communicator but received %d: the ranks "
             "disagree about the transfer's size. No result was returned. Fix: make every rank run the "
             "same collectives with the same shapes",
             mpic_record_world_rank(), what, expected, t ? t : "elements", source, received);
}

/* The count is read in bytes against the type's size taken when the
 * receive was posted: a program may free the datatype before the wait
 * (MPICH's pt2pt/dtype_send does; MPI allows it), and the freed handle must
 * not be asked. A cancelled receive received nothing, rightly. */
static void check_arrival(const char *what, const MPIABI_Status *status, int expected, MPIABI_Datatype type,
                          int type_size) {
  if (!mpic_agreement_on() || type_size <= 0) return;
  int bytes = 0, cancelled = 0;
  if (mpic_next_Test_cancelled(status, &cancelled) == 0 && cancelled) return;
  if (mpic_next_Get_count(status, MPIABI_BYTE, &bytes) != 0 || bytes == MPIABI_UNDEFINED) return;
  if ((long long)bytes != (long long)expected * type_size)
    short_arrival(what, expected, bytes / type_size, type, status->MPI_SOURCE);
}

static int type_size_of(MPIABI_Datatype type) {
  int size = 0;
  return mpic_next_Type_size(type, &size) == 0 ? size : 0;
}

/* XLA's all-to-all: one exchange with each peer. */
int mpic_arrival_sendrecv(struct mpic_record *r, const void *sendbuf, int sendcount, MPIABI_Datatype sendtype,
                          int dest, int sendtag, void *recvbuf, int recvcount, MPIABI_Datatype recvtype, int source,
                          int recvtag, MPIABI_Status *status) {
  MPIABI_Status own;
  MPIABI_Status *s = (status == MPIABI_STATUS_IGNORE || !status) ? &own : status;
  struct mpic_call c = {MPIC_ALL_TO_ALL, recvcount, recvtype, MPIABI_OP_NULL};
  struct mpic_sendrecv_args a = {sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                                 source, recvtag, r->comm, s};
  int ret = mpic_dispatch(r, &c, NULL, "MPI_Sendrecv", mpic_call_sendrecv, &a);
  if (source != MPIABI_PROC_NULL) check_arrival("an all-to-all", s, recvcount, recvtype, type_size_of(recvtype));
  return ret;
}

/* XLA's collective permute: MPI_Irecv, MPI_Isend, then MPI_Wait on each.
 * Receives on XLA's communicators are remembered until they complete, in a
 * table that grows as needed (XLA posts one receive per peer and step, and
 * waits for each; a fixed table would leave receives past it unchecked). */
struct receive {
  MPIABI_Request request;
  int count;
  MPIABI_Datatype type; /* for its name only: it may be freed before the wait */
  int type_size;
  mpic_ticket ticket; /* in the flight record: the permute ends when its receive does */
};
static struct receive *receives = NULL;
static int nreceives = 0, room = 0; /* nreceives read without the lock on the hot path */
static pthread_mutex_t receives_lock = PTHREAD_MUTEX_INITIALIZER;

int mpic_arrival_irecv(void *buf, int count, MPIABI_Datatype datatype, int source, int tag, MPIABI_Comm comm,
                         MPIABI_Request *request) {
  int ret = mpic_next_Irecv(buf, count, datatype, source, tag, comm, request);
  struct mpic_record *r = mpic_record_of(comm);
  if (!r) return ret;
  if (ret != 0) mpic_call_failed("MPI_Irecv", ret);
  if (source == MPIABI_PROC_NULL) return ret;
  struct mpic_call c = {MPIC_PERMUTE, count, datatype, MPIABI_OP_NULL};
  mpic_ticket ticket = mpic_record_begin(r, mpic_signature(&c));
  pthread_mutex_lock(&receives_lock);
  if (nreceives == room) {
    int more = room ? 2 * room : 64;
    struct receive *grown = realloc(receives, sizeof *grown * (size_t)more);
    if (!grown)
      mpic_fatal("rank %d: out of memory remembering %d pending receives of XLA's collective permutes. Fix: "
                 "give the job more memory",
                 mpic_record_world_rank(), nreceives);
    receives = grown, room = more;
  }
  receives[nreceives] = (struct receive){*request, count, datatype, type_size_of(datatype), ticket};
  __atomic_store_n(&nreceives, nreceives + 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&receives_lock);
  return ret;
}

/* The receive a request stands for, forgotten as it is returned; 0 if none. */
static int take_receive(MPIABI_Request request, struct receive *out) {
  if (!__atomic_load_n(&nreceives, __ATOMIC_ACQUIRE)) return 0;
  int found = 0;
  pthread_mutex_lock(&receives_lock);
  for (int i = 0; i < nreceives; i++)
    if (receives[i].request == request) {
      *out = receives[i];
      receives[i] = receives[nreceives - 1];
      __atomic_store_n(&nreceives, nreceives - 1, __ATOMIC_RELEASE);
      found = 1;
      break;
    }
  pthread_mutex_unlock(&receives_lock);
  return found;
}

int mpic_arrival_wait(MPIABI_Request *request, MPIABI_Status *status) {
  struct receive r;
  if (!request || !take_receive(*request, &r)) return mpic_next_Wait(request, status);
  MPIABI_Status own;
  MPIABI_Status *s = (status == MPIABI_STATUS_IGNORE || !status) ? &own : status;
  int ret = mpic_next_Wait(request, s);
  if (ret != 0) mpic_call_failed("MPI_Wait", ret);
  mpic_flight_end(r.ticket);
  check_arrival("a collective permute", s, r.count, r.type, r.type_size);
  return ret;
}

int mpic_arrival_waitall(int count, MPIABI_Request array_of_requests[], MPIABI_Status *array_of_statuses) {
  if (!__atomic_load_n(&nreceives, __ATOMIC_ACQUIRE) || count <= 0)
    return mpic_next_Waitall(count, array_of_requests, array_of_statuses);
  struct receive *rs = calloc((size_t)count, sizeof *rs);
  char *is_receive = calloc((size_t)count, 1);
  int any = 0;
  for (int i = 0; rs && is_receive && i < count; i++) any |= is_receive[i] = (char)take_receive(array_of_requests[i], &rs[i]);
  if (!any) {
    free(rs);
    free(is_receive);
    return mpic_next_Waitall(count, array_of_requests, array_of_statuses);
  }
  MPIABI_Status *s = array_of_statuses;
  MPIABI_Status *own = NULL;
  if (s == MPIABI_STATUSES_IGNORE || !s) s = own = calloc((size_t)count, sizeof *own);
  int ret = mpic_next_Waitall(count, array_of_requests, s ? s : MPIABI_STATUSES_IGNORE);
  if (ret != 0) mpic_call_failed("MPI_Waitall", ret);
  for (int i = 0; i < count; i++)
    if (is_receive[i]) mpic_flight_end(rs[i].ticket);
  for (int i = 0; s && i < count; i++)
    if (is_receive[i]) check_arrival("a collective permute", &s[i], rs[i].count, rs[i].type, rs[i].type_size);
  free(own);
  free(rs);
  free(is_receive);
  return ret;
}

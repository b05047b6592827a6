/* Step 6 (devices.h): point-to-point on a device communicator (XLA's
 * collective permute and all-to-all). Between two devices of this process a
 * transfer is a copy through the group's mailbox; between processes it is a
 * message on the group's process communicator whose tag names both devices. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "call_failed.h"
#include "arrivals.h"
#include "end_job.h"
#include "internal.h"
#include "waits.h"

struct message {
  int from, to; /* keys */
  void *buf;
  size_t bytes;
  int tag, done, is_receive;
  struct message *next;
  struct group *g;
};
static __attribute__((noreturn)) void sizes_differ(struct group *g, int from, int to, size_t sent, size_t expected) {
  mpic_fatal("rank %d: device %d of group %d expected %zu bytes from device %d but %zu were sent: the devices "
             "disagree about the transfer's size. No result was returned. Fix: make every device run the same "
             "collectives with the same shapes",
             mpic_device_world_rank(), to, g->color, expected, from, sent);
}

/* The first waiting message from `from` to `to` in a list, taken out of it. */
static struct message *take(struct message **list, int from, int to, int tag) {
  for (struct message **at = list; *at; at = &(*at)->next)
    if ((*at)->from == from && (*at)->to == to && (*at)->tag == tag) {
      struct message *found = *at;
      *at = found->next;
      return found;
    }
  return NULL;
}

static void append(struct message **list, struct message *msg) {
  while (*list) list = &(*list)->next;
  msg->next = NULL;
  *list = msg;
}

static int tag_for(struct group *g, int from, int to, int tag) {
  return tag * MPIC_MAX_LOCAL_DEVICES * MPIC_MAX_LOCAL_DEVICES + g->slot_of_key[from] * MPIC_MAX_LOCAL_DEVICES +
         g->slot_of_key[to];
}

static int local_transfer(struct group *g, int is_receive, void *buf, size_t bytes, int from, int to, int tag,
                          MPIABI_Request *request) {
  pthread_mutex_lock(&g->mu);
  struct message *other = take(is_receive ? &g->sends : &g->receives, from, to, tag);
  if (other) {
    struct message *send = is_receive ? other : NULL, *recv = is_receive ? NULL : other;
    void *dst = is_receive ? buf : recv->buf;
    const void *src = is_receive ? send->buf : buf;
    size_t sent = is_receive ? send->bytes : bytes, expected = is_receive ? bytes : recv->bytes;
    if (sent != expected) sizes_differ(g, from, to, sent, expected);
    memcpy(dst, src, sent);
    other->done = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    *request = MPIABI_REQUEST_NULL;
    return 0;
  }
  struct message *msg = calloc(1, sizeof *msg);
  if (!msg) mpic_fatal("rank %d: out of memory for a transfer between local CPU devices", mpic_device_world_rank());
  *msg = (struct message){from, to, buf, bytes, tag, 0, is_receive, NULL, g};
  append(is_receive ? &g->receives : &g->sends, msg);
  pthread_mutex_unlock(&g->mu);
  *request = mpic_device_request_new(msg);
  return 0;
}

static int transfer(MPIABI_Comm comm, int is_receive, void *buf, int count, MPIABI_Datatype type, int peer, int tag,
                    MPIABI_Request *request) {
  struct handle *h = mpic_device_handle(comm);
  struct group *g = h->g;
  if (peer == MPIABI_PROC_NULL) {
    *request = MPIABI_REQUEST_NULL;
    return 0;
  }
  if (peer < 0 || peer >= g->n)
    mpic_fatal("rank %d: a transfer with device %d of a group of %d devices", mpic_device_world_rank(), peer, g->n);
  int from = is_receive ? peer : h->key, to = is_receive ? h->key : peer;
  if (g->proc_of_key[peer] == g->pos)
    return local_transfer(g, is_receive, buf, (size_t)count * mpic_device_type_size(type), from, to, tag, request);
  int t = tag_for(g, from, to, tag);
  return is_receive ? mpic_arrival_irecv(buf, count, type, g->proc_of_key[peer], t, g->pc, request)
                    : mpic_next_Isend(buf, count, type, g->proc_of_key[peer], t, g->pc, request);
}

int mpic_device_irecv(void *buf, int count, MPIABI_Datatype type, int source, int tag, MPIABI_Comm comm,
                      MPIABI_Request *request) {
  return transfer(comm, 1, buf, count, type, source, tag, request);
}

int mpic_device_isend(const void *buf, int count, MPIABI_Datatype datatype, int dest, int tag, MPIABI_Comm comm,
                      MPIABI_Request *request) {
  int ret = transfer(comm, 0, (void *)buf, count, datatype, dest, tag, request);
  if (ret != 0) mpic_call_failed("MPI_Isend", ret);
  return ret;
}

int mpic_device_wait(MPIABI_Request *request, MPIABI_Status *status) {
  struct message *msg = mpic_device_request_message(*request);
  struct group *g = msg->g;
  pthread_mutex_lock(&g->mu);
  mpic_wait_begin();
  while (!msg->done) pthread_cond_wait(&g->cv, &g->mu);
  mpic_wait_end();
  pthread_mutex_unlock(&g->mu);
  if (status && status != MPIABI_STATUS_IGNORE) {
    status->MPI_SOURCE = msg->from;
    status->MPI_TAG = msg->tag;
    status->MPI_ERROR = 0;
  }
  free(msg);
  mpic_device_request_release(*request);
  *request = MPIABI_REQUEST_NULL;
  return 0;
}

/* XLA's all-to-all: one exchange with each device, in turn. */
int mpic_device_sendrecv(const void *sendbuf, int sendcount, MPIABI_Datatype sendtype, int dest, int sendtag,
                         void *recvbuf, int recvcount, MPIABI_Datatype recvtype, int source, int recvtag,
                         MPIABI_Comm comm, MPIABI_Status *status) {
  MPIABI_Request r[2];
  int ret = transfer(comm, 1, recvbuf, recvcount, recvtype, source, recvtag, &r[0]);
  if (ret == 0) ret = transfer(comm, 0, (void *)sendbuf, sendcount, sendtype, dest, sendtag, &r[1]);
  if (ret != 0) mpic_call_failed("MPI_Sendrecv", ret);
  for (int i = 0; i < 2; i++) {
    MPIABI_Status *s = i == 0 ? status : MPIABI_STATUS_IGNORE;
    ret = mpic_is_device_request(r[i]) ? mpic_device_wait(&r[i], s) : mpic_arrival_wait(&r[i], s);
    if (ret != 0) mpic_call_failed("MPI_Wait", ret);
  }
  return 0;
}


/* What the files of devices/ share (devices.h has the design): a group of
 * devices as this process holds it, the handles that stand for its members,
 * and the helpers every step uses. Not for callers outside devices/. */
#ifndef MPI_COLLECTIVES_DEVICES_INTERNAL_H
#define MPI_COLLECTIVES_DEVICES_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include "comm_record.h"
#include "common.h"
#include "devices.h"

struct post { /* one local device's collective call (collectives.c) */
  int kind, count; /* kind: agreement.h's MPIC_ALL_REDUCE, ... */
  MPIABI_Datatype type;
  MPIABI_Op op;
  const void *send;
  void *recv;
  int posted;
};

struct message; /* the mailbox of transfers.c */

/* A group of devices that includes one or more of this process's, which XLA
 * uses through device communicators (groups.c makes it). */
struct group {
  int color, n;          /* XLA's color (its first device's id) and the number of devices */
  int m;                 /* of them in this process */
  int keys[MPIC_MAX_LOCAL_DEVICES]; /* this process's members, ascending */
  int q, pos;            /* processes in the group, and this one's place among them */
  MPIABI_Comm pc;        /* the processes' communicator; MPIABI_COMM_NULL when q == 1 */
  struct mpic_record *record; /* pc's (comm_record.h); NULL when q == 1 */
  int *proc_of_key;      /* n: the place of the process holding each key */
  int *slot_of_key;      /* n: the key's place among that process's members */
  int *count_of_proc;    /* q: members per process */
  int *first_of_proc;    /* q: the sum of the counts before it */
  int blocked;           /* every process holds m keys, in one block, in process order */
  int live;              /* handles XLA has not freed */
  /* the rendezvous (collectives.c) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned long round;
  int arrived;
  struct post posts[MPIC_MAX_LOCAL_DEVICES];
  void *scratch;
  size_t scratch_size;
  /* point to point among this process's members (transfers.c) */
  struct message *sends, *receives;
};

/* What a device communicator handle stands for (handles.c). */
struct handle {
  struct group *g;
  int key;  /* the device's rank in the group */
  int slot; /* its place among this process's members of the group */
};

/* ---- handles.c ---- */
/* The handle XLA holds for device communicator `comm` (mpic_is_device_comm). */
struct handle *mpic_device_handle(MPIABI_Comm comm);
/* New device communicators for the m members of g in this process: out[s]
 * for the member in slot s. */
void mpic_device_handles_new(struct group *g, MPIABI_Comm *out);
/* A request handle for a pending local transfer, and back. */
MPIABI_Request mpic_device_request_new(struct message *msg);
struct message *mpic_device_request_message(MPIABI_Request request);
void mpic_device_request_release(MPIABI_Request request);

/* ---- helpers (handles.c) ---- */
int mpic_device_world_rank(void);
/* The group's scratch buffer, at least `bytes` long. */
void *mpic_device_scratch(struct group *g, size_t bytes);
size_t mpic_device_type_size(MPIABI_Datatype type);

#endif

/* One record per communicator XLA uses (comm_record.c): what every service
 * that acts on XLA's communicators attaches to. The split that made it (its
 * id, the same on every member), its collectives so far, its members' ranks
 * in MPI_COMM_WORLD. Kept for every communicator XLA creates, whatever the
 * checks: the flight record, the stall report and the failure's sentence
 * need it as much as the agreement check does. Created by xla_policy.c (XLA's
 * splits) and devices/ (process communicators of device groups); found by
 * entry/xla_calls.c, which routes a call on one to dispatch.c's services. */
#ifndef MPI_COLLECTIVES_COMM_RECORD_H
#define MPI_COLLECTIVES_COMM_RECORD_H

#include <stdint.h>
#include "common.h"
#include "flight.h"

struct mpic_node; /* the node path's window (node/internal.h), NULL where there is none */

struct mpic_record {
  MPIABI_Comm comm;
  int live;     /* 0: free for the next communicator */
  int id;       /* the split of the world that made it (flight.h: mpic_flight_new_split); -1: none */
  unsigned seq; /* its collectives so far */
  unsigned block_streak; /* agreed calls in a row that a small check block could carry (agreement.c) */
  int size, rank;
  int *members; /* size ranks in MPI_COMM_WORLD, or NULL when they could not be read */
  struct mpic_node *node; /* set once the node path attached a window at the first call it takes */
  int node_state;         /* MPIC_NODE_UNKNOWN until then; MPIC_NODE_ATTACHED; MPIC_NODE_LIBRARY for good */
  int round;              /* the node path's one round (node/round.c): MPIC_ROUND_UNDECIDED until the first
                           * checked call agreed; then MPIC_ROUND_ON or MPIC_ROUND_OFF, the same on every member */
};
/* Agreed calls in a row that fit the small check block before it is used; a new communicator's
 * checks begin with it (agreement.c). */
#define MPIC_BLOCK_STREAK_START 16
enum { MPIC_NODE_UNKNOWN = 0, MPIC_NODE_ATTACHING, MPIC_NODE_ATTACHED, MPIC_NODE_LIBRARY };
enum { MPIC_ROUND_UNDECIDED = 0, MPIC_ROUND_ON, MPIC_ROUND_OFF };

/* A communicator XLA has just created: recorded, its errors returned to the
 * wrapper (dispatch.c ends the job with the library's words). Ends the job
 * with a sentence when more than MPIC_MAX_RECORDS are alive at once. */
#define MPIC_MAX_RECORDS 4096
struct mpic_record *mpic_record_add(MPIABI_Comm comm, int id);
/* Its record, or NULL: a communicator XLA did not create (mpi4py's, the
 * user's, MPI_COMM_WORLD). Takes no lock. */
struct mpic_record *mpic_record_of(MPIABI_Comm comm);
/* The live record of the split with id `id` (the same on every member), or NULL. */
struct mpic_record *mpic_record_by_id(int id);
/* MPI_Comm_free: the record is forgotten first (the library may hand the
 * handle to someone else's communicator next), its slot free again. */
int mpic_record_free(MPIABI_Comm *comm);
/* The next collective on it begins in the flight record. */
mpic_ticket mpic_record_begin(struct mpic_record *r, uint64_t sig);
/* The world ranks of the members of the communicator with id `id` (at most
 * max into out); returns how many it has, -1 for none recorded. */
int mpic_record_members(int id, int *out, int max);
/* This process's rank in MPI_COMM_WORLD, once a communicator was recorded; -1 before. */
int mpic_record_world_rank(void);

#endif

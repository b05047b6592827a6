/* Step 4 of an event (groups.c), called by events.c for each planned group
 * with members in this process. */
#ifndef MPI_COLLECTIVES_DEVICES_GROUPS_H
#define MPI_COLLECTIVES_DEVICES_GROUPS_H

#include "common.h"
#include "plan.h"

/* One local device's split, waiting in its event (events.c). */
struct mpic_device_arrival {
  int color, key;
  int taken, done;
  MPIABI_Comm result; /* what the device gets back */
};

/* Give each of the batch's devices in planned group p its communicator: pc
 * (the group's process communicator from step 3, MPIABI_COMM_NULL when it
 * has none; id: the split that made it, flight.h) or a device communicator. */
void mpic_device_group_give(const struct mpic_planned *p, const int *entries, MPIABI_Comm pc, int id,
                            struct mpic_device_arrival **batch, int nb, int me);

#endif

/* Several CPU devices per process over MPI: the design, and what the rest of
 * the wrapper calls. entry/xla_calls.c routes XLA's calls here.
 *
 * What XLA does. With L CPU devices per process, every device runs the
 * program on a thread of its own. A collective's first use on a device
 * group makes each local device in it call MPI_Comm_split(MPI_COMM_WORLD,
 * color, key) from its own thread, at about the same time: color is the
 * global id of the group's first device (process * 2048 + local index), key
 * the device's place in the group. XLA then treats the communicator it gets
 * as one rank per device: MPI_Comm_rank must be the key and MPI_Comm_size
 * the group's size, and it calls MPI_Allreduce, MPI_Allgather,
 * MPI_Reduce_scatter, MPI_Irecv + MPI_Isend + MPI_Wait (collective permute)
 * and MPI_Sendrecv (all-to-all) on it with device ranks, from each device's
 * thread. MPI cannot express this: a process is one rank, and L concurrent
 * splits of one communicator pair up wrongly.
 *
 * What the wrapper does instead (L, the number of local devices, told by the
 * Python layer from JAX's settings: mpic_devices_set_local), one file per step:
 *
 * 1. (events.c) Splits are gathered into events. The L splits of one collective's first
 *    use in a process (one per local device) form an event; the thread that
 *    brings the L-th runs it, events strictly one after another, in the
 *    order they filled up. Every process therefore runs its k-th event at
 *    the same point as every other process, as XLA's splits would have to.
 *    A device that does not come within MPI_COLLECTIVES_DEVICES_TIMEOUT
 *    seconds (a program over some of a process's devices only) ends the job
 *    with one sentence: XLA would wait forever for the other processes'
 *    devices in the same situation.
 * 2. (events.c, plan.c) An event is one MPI_Allgather over MPI_COMM_WORLD of every process's L
 *    (color, key) pairs. Every process then sees all groups of the
 *    collective and judges them the same way: each color's keys must be
 *    exactly 0..n-1, every group of the same size n, every process with L
 *    pairs. Anything else means the processes are creating different
 *    groups (programs in different orders, two dispatching threads): the
 *    job ends with one sentence, never a wrong communicator.
 * 3. (plan.c, events.c) One communicator of processes per group that spans processes, made by
 *    MPI_Comm_split over the world: groups are put in rounds in which no
 *    process takes part twice, and each round is one split (a process in
 *    none of that round's groups passes MPI_UNDEFINED), so an event costs at
 *    most L splits. A process's rank in it follows its smallest key.
 * 4. (groups.c, handles.c) What XLA gets back:
 *    - a group with one device on each of its processes: that process
 *      communicator itself, whose rank is then the key. No cost at all, and
 *      the usual checks of agreement.c apply.
 *    - any other group (several local devices, or only local ones): a
 *      device communicator, a handle the wrapper reserved (an address in a
 *      PROT_NONE mapping of its own, which no library handle can equal)
 *      standing for (group, key).
 * 5. (collectives.c) A collective on a device communicator is a rendezvous of the group's
 *    local devices: each posts its call; the last to arrive checks that all
 *    posted the same collective (kind, count, datatype, reduction), combines
 *    the local parts in key order (MPI_Reduce_local for reductions), makes
 *    one MPI call over the process communicator (after agreement.c's
 *    signature check there), and copies each device's part out; then the
 *    others return. All-reduce and reduce-scatter reduce the local parts
 *    first; all-gather places them; when each process's keys are one
 *    block in process order (the usual layout) the MPI call works in place
 *    in a device's own output, otherwise through a reordering buffer.
 * 6. (transfers.c) Point-to-point (permute, all-to-all): a transfer between two devices of
 *    one process is a copy through the group's mailbox (first send to a
 *    device matched with its first receive from that device, as MPI orders
 *    messages); between processes it is MPI_Isend/MPI_Irecv on the process
 *    communicator with a tag naming both devices (their places among their
 *    process's members, and XLA's tag). A transfer that cannot complete at
 *    once returns a request the wrapper reserved; MPI_Wait on it waits for
 *    the copy.
 *
 * Order safety stays as with one device per process: the splits of an event
 * must match across processes (checked in 2), each collective's signature
 * must match across processes (services/agreement.c) and across the local devices
 * (checked in 5), and one device may not run two collectives on one group
 * at once (two dispatching threads: checked in 5).
 *
 * What this cannot see: XLA keeps each device's communicator per group, so a
 * collective whose groups repeat some of an earlier collective's (two meshes
 * that arrange the same devices differently) makes only the devices of its
 * new groups split. A process's event then takes splits of two collectives,
 * and the check in 2 stops the job; a process none of whose devices is in a
 * new group makes no split at all, and the others wait for it in the
 * exchange (as XLA's own splits of MPI_COMM_WORLD wait with one device per
 * process) until it finishes its program and mpi_collectives.services.peers names
 * it. The split's color and key do not say which devices a group holds or
 * how many, so no process can tell a repeated group from a missing one. */
#ifndef MPI_COLLECTIVES_DEVICES_H
#define MPI_COLLECTIVES_DEVICES_H

#include "common.h"

#define MPIC_MAX_LOCAL_DEVICES 8

/* CPU devices per process (1 until told): above 1, XLA's splits of
 * MPI_COMM_WORLD go to mpic_device_split (events.c). */
extern int mpic_local_devices;
/* Told by the Python layer before the first collective; -1 outside 1..8. */
int mpic_devices_set_local(int n);
/* The count JAX's environment asks for (JAX_NUM_CPU_DEVICES, XLA_FLAGS), so
 * that a program that never calls initialize() is served too; 1 when it
 * names none, MPIC_MAX_LOCAL_DEVICES + 1 for more than the wrapper serves. */
int mpic_devices_from_environment(void);

/* One local device's MPI_Comm_split(MPI_COMM_WORLD, color, key) for XLA (events.c). */
int mpic_device_split(int color, int key, MPIABI_Comm *newcomm);

/* Is this handle one of the communicators or requests devices/ made? (handles.c) */
int mpic_is_device_comm(MPIABI_Comm comm);
int mpic_is_device_request(MPIABI_Request request);

/* XLA's calls on a device communicator. */
int mpic_device_comm_rank(MPIABI_Comm comm, int *rank); /* handles.c */
int mpic_device_comm_size(MPIABI_Comm comm, int *size);
int mpic_device_comm_free(MPIABI_Comm *comm);
int mpic_device_allreduce(const void *sendbuf, void *recvbuf, int count, MPIABI_Datatype type, MPIABI_Op op,
                          MPIABI_Comm comm); /* collectives.c */
int mpic_device_allgather(const void *sendbuf, int count, MPIABI_Datatype type, void *recvbuf, MPIABI_Comm comm);
int mpic_device_reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPIABI_Datatype type,
                               MPIABI_Op op, MPIABI_Comm comm);
int mpic_device_irecv(void *buf, int count, MPIABI_Datatype type, int source, int tag, MPIABI_Comm comm,
                      MPIABI_Request *request); /* transfers.c */
int mpic_device_isend(const void *buf, int count, MPIABI_Datatype type, int dest, int tag, MPIABI_Comm comm,
                      MPIABI_Request *request);
int mpic_device_sendrecv(const void *sendbuf, int sendcount, MPIABI_Datatype sendtype, int dest, int sendtag,
                         void *recvbuf, int recvcount, MPIABI_Datatype recvtype, int source, int recvtag,
                         MPIABI_Comm comm, MPIABI_Status *status);
/* MPI_Wait on a request mpic_is_device_request() names. */
int mpic_device_wait(MPIABI_Request *request, MPIABI_Status *status);

#endif

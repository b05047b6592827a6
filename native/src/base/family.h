/* An MPI ABI family, as the loader and the conversions see it: one record per
 * family, defined in that family's file (families/<name>.c), which holds
 * everything special about it. */
#ifndef MPI_COLLECTIVES_FAMILY_H
#define MPI_COLLECTIVES_FAMILY_H

#include <stddef.h>
#include <stdint.h>

enum { MPIC_FAMILY_NONE = 0, MPIC_FAMILY_MPICH = 1, MPIC_FAMILY_OPENMPI = 2, MPIC_FAMILY_STANDARD = 3 };

/* Where a family's MPI_Status keeps its public fields, in bytes. The bytes
 * that are not public fields (priv_off, priv_len) travel in the front of
 * MPIABI_Status, which holds the whole native status when it fits in 24. */
struct mpic_status_layout {
  size_t size, source, tag, error, priv_off, priv_len;
};

/* The library calls that size handle arrays (convert.c: an MPI_Alltoallw's
 * datatypes, one per rank or neighbour), as the family's own forwarders
 * (generated into <family>_forwarders.inc), so that sizing an array inside a
 * forwarder never goes back up through the dispatch. */
struct mpic_sizing {
  int (*comm_test_inter)(uintptr_t comm, int *flag);
  int (*comm_remote_size)(uintptr_t comm, int *size);
  int (*comm_size)(uintptr_t comm, int *size);
  int (*comm_rank)(uintptr_t comm, int *rank);
  int (*topo_test)(uintptr_t comm, int *status);
  int (*dist_graph_neighbors_count)(uintptr_t comm, int *indegree, int *outdegree, int *weighted);
  int (*cartdim_get)(uintptr_t comm, int *ndims);
  int (*graph_neighbors_count)(uintptr_t comm, int rank, int *nneighbors);
};

struct mpic_family {
  int id;                               /* MPIC_FAMILY_* */
  const char *name;                     /* as MPI_COLLECTIVES_ABI names it */
  const char *const *library_names;     /* sonames to look for, NULL-terminated */
  int searched_by_default;              /* looked for when MPI_COLLECTIVES_ABI is unset */
  /* Does this loaded library speak the family's ABI? If so, says why in `why`. */
  int (*recognizes)(void *lib, char *why, size_t whylen);
  void **functions;                     /* <family>_fn, bound in mpic_function_symbols order */
  /* A stand-in for a function the library lacks, or NULL. */
  void *(*fallback)(void *lib, const char *symbol);
  void (*set_constants)(void *lib);     /* fills in every exported MPIABI_* constant */
  /* Once the library is chosen, before MPI_Init: the family's quirks. */
  void (*activate)(void *lib, const char *path);
  size_t handle_size;                   /* bytes of a native handle other than MPI_File */
  const struct mpic_status_layout *status;
  const struct mpic_sizing *sizing;
};

extern const struct mpic_family mpic_family_mpich, mpic_family_openmpi, mpic_family_standard;
/* In the order in which they are recognized: the standard ABI and Open MPI
 * by what they export, the MPICH ABI as what remains. */
extern const struct mpic_family *const mpic_families[3];

/* The loaded family (NULL before or without one), and its id, on which every
 * exported function dispatches. */
extern const struct mpic_family *mpic_family;
extern int mpic_family_id;

/* Room for any family's native status (the standard ABI's is the largest, 32). */
typedef union {
  int ints[8];
  int64_t aligned[4];
} mpic_native_status;

#endif

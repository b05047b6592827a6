/* Zero-filled allocations while MPI_Init runs under Slurm's PMI: why in
 * init_memory.h. Only for the length of MPI_Init (a memset per allocation
 * would slow every later one), and only under srun's PMI, whose server cuts
 * long requests (Hydra's and PMIx's do not).
 *
 * glibc's M_PERTURB fills a block its allocator hands out with the byte's
 * complement (0xff: zeros), but not a block from the thread's cache of
 * recently freed small blocks (tcache, up to 1032 bytes, 7 a size by
 * default), which is handed out as it was freed: Python's text included. So
 * the calling thread's cache is emptied first, by taking its blocks (and a
 * few more) until MPI_Init returns: MPI_Init's small blocks then come from
 * the allocator itself, zero-filled. Measured on the simulated cluster: with
 * M_PERTURB alone the Orbax test's launch still failed; with the cache
 * emptied as well it passed. Another malloc (jemalloc, tcmalloc preloaded)
 * takes no notice of glibc's mallopt: nothing changes there. */
#include <malloc.h>
#include <stdlib.h>

#include "common.h"
#include "init_memory.h"
#include "log.h"

#ifndef M_PERTURB
#define M_PERTURB -6
#endif

/* glibc's tcache: 64 sizes of block, 32 to 1040 bytes 16 apart (requests up to
 * 16 s + 24 bytes land in size s), 7 blocks a size
 * unless GLIBC_TUNABLES says otherwise; 16 a size covers a raised count. */
enum { CACHED_SIZES = 64, TAKEN_PER_SIZE = 16 };
static void *taken[CACHED_SIZES * TAKEN_PER_SIZE];

int mpic_init_memory_begin(void) {
  if (!getenv("PMI_FD") || !getenv("SLURM_MPI_TYPE")) return 0;
  if (!mallopt(M_PERTURB, 0xff)) return 0;
  malloc_trim(0); /* every whole free page back to the kernel: zeros when touched again */
  for (int s = 0; s < CACHED_SIZES; s++)
    for (int i = 0; i < TAKEN_PER_SIZE; i++) taken[s * TAKEN_PER_SIZE + i] = malloc((size_t)(16 * s + 24));
  mpic_log(1, "MPI_Init under Slurm's PMI: allocations zero-filled until it returns (MPICH issue 6924)");
  return 1;
}

void mpic_init_memory_end(int begun) {
  if (!begun) return;
  const char *own = getenv("MALLOC_PERTURB_"); /* what glibc read at start, the user's */
  mallopt(M_PERTURB, own ? atoi(own) & 0xff : 0);
  for (size_t i = 0; i < sizeof taken / sizeof *taken; i++) {
    free(taken[i]);
    taken[i] = NULL;
  }
}

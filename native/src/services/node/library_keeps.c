/* Whether the MPI library keeps the large collectives whatever the path could take (internal.h): asked by
 * the policy (policy.c) and by a window's making (window.c: a window for the round alone is smaller), so
 * it lies below both.
 *
 * Intel MPI's own shared-memory all-reduce is within 1.2-1.5x of the copy floor on a 16-core node (issue
 * 55's measurements), and on a 2-core VM it was faster than the path at 1 MiB and from 64 MiB:
 * MPI_COLLECTIVES_NODE_PATH=2 (the default) leaves it its own. */
#include <string.h>
#include "internal.h"
#include "settings.h"

static int library_is_intel(void) {
  static int known = -1;
  if (known < 0) {
    char text[8192] = "";
    int len = 0;
    known = mpic_next_Get_library_version(text, &len) == 0 && strstr(text, "Intel(R) MPI") != NULL;
  }
  return known;
}

int mpic_node_library_keeps_large(void) { return mpic_settings.node_path == 2 && library_is_intel(); }

/* Runs the devices' plan (native/src/services/devices/plan.c) on entries given
 * on the command line, without MPI, for tests/native/test_plan.py:
 *   plan_harness SIZE L ME COLOR KEY PROCESS [COLOR KEY PROCESS ...]
 * prints "wrong: WHY", or "groups NG rounds R" and a line per group in the
 * order of the sorted entries: "COLOR N Q ROUND MINE". */
#include <stdio.h>
#include <stdlib.h>
#include "plan.h"

int main(int argc, char **argv) {
  if (argc < 4 || (argc - 4) % 3) {
    fprintf(stderr, "usage: %s SIZE L ME [COLOR KEY PROCESS]...\n", argv[0]);
    return 2;
  }
  int size = atoi(argv[1]), L = atoi(argv[2]), me = atoi(argv[3]), ne = (argc - 4) / 3;
  int *entries = malloc(sizeof(int) * 3 * (size_t)(ne ? ne : 1));
  for (int i = 0; i < 3 * ne; i++) entries[i] = atoi(argv[4 + i]);
  mpic_device_entries_sort(entries, ne);
  struct mpic_device_plan plan;
  char why[512];
  int wrong = mpic_device_plan_make(entries, ne, size, L, me, &plan, why, sizeof why);
  if (wrong) {
    printf("wrong: %s\n", why);
    return 0;
  }
  printf("groups %d rounds %d\n", plan.ng, plan.rounds);
  for (int k = 0; k < plan.ng; k++) {
    const struct mpic_planned *g = &plan.groups[k];
    printf("%d %d %d %d %d\n", g->color, g->n, g->q, g->round, g->mine);
  }
  mpic_device_plan_free(&plan);
  free(entries);
  return 0;
}

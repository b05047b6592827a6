/* Steps 2 and 3 of an event, pure (plan.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include "plan.h"
#include "split_plan.h"

static int by_color_key(const void *a, const void *b) {
  const int *x = a, *y = b;
  if (x[0] != y[0]) return (x[0] > y[0]) - (x[0] < y[0]);
  return (x[1] > y[1]) - (x[1] < y[1]);
}

void mpic_device_entries_sort(int *entries, int ne) { qsort(entries, (size_t)ne, 3 * sizeof(int), by_color_key); }

/* Step 3: each group that spans processes gets the first round in which none
 * of its processes is busy yet. */
static int plan_rounds(const int *entries, int size, int L, struct mpic_device_plan *plan) {
  char *busy = calloc((size_t)size * (size_t)(L * size + 1), 1);
  if (!busy) return 0;
  for (int k = 0; k < plan->ng; k++) {
    struct mpic_planned *g = &plan->groups[k];
    if (g->q < 2) continue;
    for (int r = 0;; r++) {
      int clash = 0;
      for (int e = g->first; e < g->first + g->n; e++) clash |= busy[(size_t)r * size + entries[3 * e + 2]];
      if (clash) continue;
      for (int e = g->first; e < g->first + g->n; e++) busy[(size_t)r * size + entries[3 * e + 2]] = 1;
      g->round = r;
      if (r + 1 > plan->rounds) plan->rounds = r + 1;
      break;
    }
  }
  free(busy);
  return 1;
}

int mpic_device_plan_make(const int *entries, int ne, int size, int L, int me, struct mpic_device_plan *plan,
                          char *why, size_t whylen) {
  *plan = (struct mpic_device_plan){NULL, 0, 0};
  /* Step 2: each color's keys 0..n-1, every group of one size (as for XLA's
   * own splits: split_plan.c); device colors are never INT_MIN. */
  if (mpic_split_plan_is_wrong(entries, ne, 3, INT_MIN, "devices", "collective", why, whylen)) return 1;
  plan->groups = calloc((size_t)(ne ? ne : 1), sizeof *plan->groups);
  if (!plan->groups) {
    snprintf(why, whylen, "out of memory planning %d device splits", ne);
    return 2;
  }
  for (int i = 0; i < ne;) {
    int j = i;
    while (j < ne && entries[3 * j] == entries[3 * i]) j++;
    struct mpic_planned *g = &plan->groups[plan->ng++];
    *g = (struct mpic_planned){entries[3 * i], j - i, i, 0, -1, 0};
    for (int k = i; k < j; k++) {
      int p = entries[3 * k + 2], earlier = 0;
      for (int l = i; l < k; l++) earlier |= entries[3 * l + 2] == p;
      if (!earlier) g->q++;
      if (p == me) g->mine++;
    }
    i = j;
  }
  if (ne != size * L) {
    snprintf(why, whylen, "%d device splits where %d processes with %d devices each make %d", ne, size, L, size * L);
    mpic_device_plan_free(plan);
    return 1;
  }
  if (!plan_rounds(entries, size, L, plan)) {
    snprintf(why, whylen, "out of memory planning %d device splits", ne);
    mpic_device_plan_free(plan);
    return 2;
  }
  return 0;
}

void mpic_device_plan_free(struct mpic_device_plan *plan) {
  free(plan->groups);
  *plan = (struct mpic_device_plan){NULL, 0, 0};
}

/* The check of one collective's groups (split_plan.h). */
#include <stdio.h>
#include <stdlib.h>
#include "split_plan.h"

static int int_cmp(const void *a, const void *b) {
  return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

int mpic_split_plan_is_wrong(const int *pairs, int n, int stride, int undefined, const char *members,
                             const char *what, char *why, size_t whylen) {
  int *keys = malloc(sizeof(int) * (size_t)(n ? n : 1));
  char *seen = calloc((size_t)(n ? n : 1), 1);
  int group_size = -1, wrong = 0;
  if (!keys || !seen) {
    free(keys);
    free(seen);
    return 0; /* a few bytes short: the split goes on unchecked, as with the checks off */
  }
  for (int i = 0; i < n && !wrong; i++) {
    int color = pairs[stride * i];
    if (seen[i] || color == undefined) continue;
    int m = 0;
    for (int j = i; j < n; j++)
      if (!seen[j] && pairs[stride * j] == color) {
        seen[j] = 1;
        keys[m++] = pairs[stride * j + 1];
      }
    qsort(keys, (size_t)m, sizeof(int), int_cmp);
    for (int k = 0; k < m && !wrong; k++)
      if (keys[k] != k) {
        snprintf(why, whylen, "the %d %s with color %d have keys that are not 0..%d", m, members, color, m - 1);
        wrong = 1;
      }
    if (!wrong && group_size >= 0 && m != group_size) {
      snprintf(why, whylen, "groups of %d and of %d %s in one %s", group_size, m, members, what);
      wrong = 1;
    }
    group_size = m;
  }
  free(keys);
  free(seen);
  return wrong;
}

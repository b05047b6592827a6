/* The test build's hooks (test_hooks.h); empty in every other build. */
#include "test_hooks.h"

#ifdef MPIC_TEST_HOOKS
#include <stdlib.h>

long mpic_test_hook(const char *name, long otherwise) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 0) : otherwise;
}
#else
typedef int mpic_test_hooks_unused; /* ISO C wants a translation unit to declare something */
#endif

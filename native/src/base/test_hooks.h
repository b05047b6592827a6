/* Hooks for the tests of faults that a run cannot otherwise reach (issue 71's suspects: an
 * allocation that fails after the ranks agreed, a communicator's 2^32nd collective, a waiter
 * descheduled after a peer's vote, more given-up calls than a test can wait out at 2 s each).
 *
 * Compiled in only where the wrapper is built with MPI_COLLECTIVES_TEST_HOOKS=1
 * (native/build_native.py; tests/conftest.py's checked_package makes that build): there each hook reads its
 * MPI_COLLECTIVES_TEST_* variable. In every other build a hook is its default, a constant the
 * compiler folds: no user's wrapper reads these variables. */
#ifndef MPI_COLLECTIVES_TEST_HOOKS_H
#define MPI_COLLECTIVES_TEST_HOOKS_H

#ifdef MPIC_TEST_HOOKS
/* The variable `name` as a number, or `otherwise` where it is unset. */
long mpic_test_hook(const char *name, long otherwise);
#else
#define mpic_test_hook(name, otherwise) (otherwise)
#endif

#endif

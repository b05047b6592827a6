/* Finding the MPI library, recognizing its ABI family from the families'
 * records, and binding its functions. */
#ifndef MPI_COLLECTIVES_LOADER_H
#define MPI_COLLECTIVES_LOADER_H

extern char mpic_loaded_path[4096];   /* the loaded library, or "" */
extern char mpic_search_report[8192];    /* what was tried and why it failed */
extern char mpic_missing[4096];        /* functions the library lacks */
extern char mpic_family_reason[512];   /* why this family */
extern char mpic_load_rule[1024];      /* which rule chose the library */
extern char mpic_passed_over[4096];    /* the other libraries the rules could have taken, and why not */

/* Load the library (MPI_COLLECTIVES_LIBMPI, else search) and make its family
 * the current one. Called once, from the constructor. */
void mpic_load(void);

/* An MPI call in a process whose MPI library could not be loaded: ends this
 * process with the one sentence that says so. */
__attribute__((noreturn)) void mpic_not_loaded(const char *function);
const char *mpic_not_loaded_message(void);

#endif

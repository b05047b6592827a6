/* MPI's predefined attribute callbacks (predefined.c), which the families'
 * constant tables need. (The user's callbacks are wrapped by
 * entry/callbacks.c.) */
#ifndef MPI_COLLECTIVES_PREDEFINED_H
#define MPI_COLLECTIVES_PREDEFINED_H

#include "common.h"

/* The values of the exported MPIABI_*_DUP_FN / *_NULL_*_FN constants. */
int mpic_copy_dup(MPIABI_Comm old, int keyval, void *extra, void *in, void *out, int *flag);
int mpic_copy_null(MPIABI_Comm old, int keyval, void *extra, void *in, void *out, int *flag);
int mpic_delete_null(MPIABI_Comm obj, int keyval, void *value, void *extra);
#define mpic_comm_dup_fn mpic_copy_dup
#define mpic_type_dup_fn mpic_copy_dup
#define mpic_win_dup_fn mpic_copy_dup
#define mpic_dup_fn mpic_copy_dup
#define mpic_comm_null_copy_fn mpic_copy_null
#define mpic_type_null_copy_fn mpic_copy_null
#define mpic_win_null_copy_fn mpic_copy_null
#define mpic_null_copy_fn mpic_copy_null
#define mpic_comm_null_delete_fn mpic_delete_null
#define mpic_type_null_delete_fn mpic_delete_null
#define mpic_win_null_delete_fn mpic_delete_null
#define mpic_null_delete_fn mpic_delete_null
#define mpic_conversion_fn_null NULL

#endif

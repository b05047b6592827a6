/* Callbacks: the library calls a user's reduction op, error handler,
 * attribute copy/delete function, generalized request or data
 * representation with native handles and statuses; the user's function must
 * see MPIABI ones (callbacks.c). */
#ifndef MPI_COLLECTIVES_CALLBACKS_H
#define MPI_COLLECTIVES_CALLBACKS_H

#include "common.h"

/* MPI's predefined attribute callbacks, at the MPIABI level: the values of
 * the exported MPIABI_*_DUP_FN / *_NULL_*_FN constants. */
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

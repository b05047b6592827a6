/* MPI's predefined attribute callbacks at the MPIABI level (predefined.h):
 * the families' constant tables point MPIABI_*_DUP_FN and friends here. */
#include "predefined.h"

int mpic_copy_dup(MPIABI_Comm old, int keyval, void *extra, void *in, void *out, int *flag) {
  (void)old, (void)keyval, (void)extra;
  *(void **)out = in;
  *flag = 1;
  return 0;
}
int mpic_copy_null(MPIABI_Comm old, int keyval, void *extra, void *in, void *out, int *flag) {
  (void)old, (void)keyval, (void)extra, (void)in, (void)out;
  *flag = 0;
  return 0;
}
int mpic_delete_null(MPIABI_Comm obj, int keyval, void *value, void *extra) {
  (void)obj, (void)keyval, (void)value, (void)extra;
  return 0;
}

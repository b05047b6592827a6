/* Conversions between MPIABI and a family's native statuses and arrays of
 * handles, driven by the family's record (family.h), for the generated
 * forwarders. Single handles convert in the family's own file. */
#ifndef MPI_COLLECTIVES_CONVERT_H
#define MPI_COLLECTIVES_CONVERT_H

#include <stdlib.h>
#include <string.h>
#include "common.h"
#include "family.h"

/* ---- statuses ----
 * When the native status fits in the 24-byte front of MPIABI_Status, the
 * library writes it in place and we mirror the three public fields to the
 * end; otherwise it goes through a temporary. */
static inline int mpic_status_in_place(const struct mpic_status_layout *L) { return L->size <= 24; }

static inline int mpic_status_ignored(const void *s) {
  return !s || s == (const void *)MPIABI_STATUS_IGNORE || s == (const void *)MPIABI_STATUSES_IGNORE;
}

/* Native status -> MPIABI status. */
static inline void mpic_status_to_abi(MPIABI_Status *s, const void *n, const struct mpic_status_layout *L) {
  if ((const void *)s != n) {
    if (mpic_status_in_place(L))
      memcpy(s->mpi_native.bytes, n, L->size);
    else
      memcpy(s->mpi_native.bytes, (const char *)n + L->priv_off, L->priv_len);
  }
  memcpy(&s->MPI_SOURCE, (const char *)n + L->source, sizeof(int));
  memcpy(&s->MPI_TAG, (const char *)n + L->tag, sizeof(int));
  memcpy(&s->MPI_ERROR, (const char *)n + L->error, sizeof(int));
}
/* MPIABI status -> native status in n (which may be s itself). */
static inline void mpic_status_from_abi(const MPIABI_Status *s, void *n, const struct mpic_status_layout *L) {
  if ((const void *)s != n) {
    if (mpic_status_in_place(L))
      memcpy(n, s->mpi_native.bytes, L->size);
    else
      memcpy((char *)n + L->priv_off, s->mpi_native.bytes, L->priv_len);
  }
  memcpy((char *)n + L->source, &s->MPI_SOURCE, sizeof(int));
  memcpy((char *)n + L->tag, &s->MPI_TAG, sizeof(int));
  memcpy((char *)n + L->error, &s->MPI_ERROR, sizeof(int));
}

static inline void *mpic_status_inout_begin(MPIABI_Status *s, mpic_native_status *buf,
                                            const struct mpic_status_layout *L) {
  if (mpic_status_ignored(s)) return s;
  void *n = mpic_status_in_place(L) ? (void *)s->mpi_native.bytes : (void *)buf;
  mpic_status_from_abi(s, n, L);
  return n;
}
static inline void mpic_status_inout_end(MPIABI_Status *s, void *n, const struct mpic_status_layout *L) {
  if (!mpic_status_ignored(s)) mpic_status_to_abi(s, n, L);
}
static inline const void *mpic_status_in(const MPIABI_Status *s, mpic_native_status *buf,
                                         const struct mpic_status_layout *L) {
  if (mpic_status_ignored(s)) return s;
  mpic_status_from_abi(s, buf, L);
  return buf;
}
static inline void *mpic_statuses_begin(MPIABI_Status *s, int n, const struct mpic_status_layout *L) {
  if (mpic_status_ignored(s) || n <= 0) return s;
  return calloc((size_t)n, L->size);
}
static inline void mpic_statuses_end(MPIABI_Status *s, void *native, int n, const struct mpic_status_layout *L) {
  if (native == (void *)s) return;
  for (int i = 0; i < n && native; i++) mpic_status_to_abi(&s[i], (char *)native + (size_t)i * L->size, L);
  free(native);
}

/* ---- arrays of handles ----
 * Pointer-sized native handles are stored in MPIABI handles as they are, so
 * such an array is passed through; 4-byte ones (the MPICH ABI's integers,
 * zero-extended in MPIABI) are copied, onto the caller's stack when short. */
static inline void *mpic_harray_in(const uintptr_t *a, int n, void *stack, size_t native_size) {
  if (native_size == sizeof(uintptr_t) || !a) return (void *)a;
  if (n < 0) n = 0;
  uint32_t *out = (stack && n <= 16) ? stack : malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
  for (int i = 0; out && i < n; i++) out[i] = (uint32_t)a[i];
  return out;
}
static inline void mpic_harray_out(uintptr_t *a, int n, const void *native, size_t native_size) {
  if (native == (const void *)a || !a) return;
  for (int i = 0; i < n; i++) a[i] = (uintptr_t)((const uint32_t *)native)[i];
  (void)native_size;
}
static inline void mpic_harray_free(void *native, void *stack, const void *orig) {
  if (native && native != stack && native != orig) free(native);
}

/* Lengths of the datatype arrays of MPI_Alltoallw (one per process of the
 * (remote) group) and of the neighbourhood collectives (out- or indegree). */
int mpic_alltoallw_count(MPIABI_Comm comm);
int mpic_neighbor_count(MPIABI_Comm comm, int outgoing);

/* ---- arrays that a nonblocking call may read until it completes ---- */
void mpic_keep_until_complete(uintptr_t request, void *a, void *b);
uintptr_t *mpic_pending_snapshot(const uintptr_t *reqs, int n);
void mpic_pending_release(uintptr_t *before, const uintptr_t *after, int n);

#endif

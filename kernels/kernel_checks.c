/* Argument checks of the local kernels (kernels_impl.h). */
#include <stdio.h>

#include "kernels_impl.h"

int adj_check_input(const char *who, const char *name, const adj_tensor *x, int rank) {
  ADJ_CHECK(x, ADJ_ERR_ARG, "%s: %s is NULL", who, name);
  ADJ_CALL(adj_dtype_check_compute(who, name, x->dtype));
  ADJ_CHECK(x->rank == rank, ADJ_ERR_SIZE, "%s: %s has rank %d but needs rank %d", who, name, x->rank, rank);
  return ADJ_SUCCESS;
}

int adj_check_optional(const char *who, const char *name, const adj_tensor *t, adj_dtype dtype, int rank,
                       const int64_t *shape) {
  if (!t) return ADJ_SUCCESS;
  ADJ_CHECK(t->dtype == dtype, ADJ_ERR_DTYPE, "%s: %s is %s but the input is %s", who, name,
            adj_dtype_name(t->dtype), adj_dtype_name(dtype));
  adj_tensor want = {.rank = rank};
  for (int i = 0; i < rank; i++) want.shape[i] = shape[i];
  char have_text[160], want_text[160];
  ADJ_CHECK(adj_tensor_same_shape(t, &want), ADJ_ERR_SIZE, "%s: %s has shape %s but needs %s", who, name,
            adj_shape_format(have_text, sizeof have_text, t->rank, t->shape),
            adj_shape_format(want_text, sizeof want_text, rank, shape));
  return ADJ_SUCCESS;
}

int adj_check_tensor(const char *who, const char *name, const adj_tensor *t, adj_dtype dtype, int rank,
                     const int64_t *shape) {
  ADJ_CHECK(t, ADJ_ERR_ARG, "%s: %s is NULL", who, name);
  return adj_check_optional(who, name, t, dtype, rank, shape);
}

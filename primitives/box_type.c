#include <limits.h>

#include "box_type_impl.h"
#include "error_impl.h"

/* Row-major boxes are contiguous when they are one entry thick up to some
 * dimension and span the tensor after it. */
bool adj_box_run(const adj_box *box, const int64_t *shape, int64_t *displacement) {
  int d = 0;
  while (d < box->rank && box->extent[d] == 1) d++;
  for (int j = d + 1; j < box->rank; j++)
    if (box->extent[j] != shape[j]) return false;
  *displacement = 0;
  for (int j = 0; j < box->rank; j++) *displacement = *displacement * shape[j] + box->start[j];
  return true;
}

int adj_box_type_create(const char *who, const adj_box *box, const int64_t *shape, MPI_Datatype element,
                        adj_box_type *out) {
  int rank = box->rank;
  *out = (adj_box_type){.type = element, .count = 1};
  if (adj_box_run(box, shape, &out->displacement)) {
    int64_t volume = adj_box_volume(box);
    ADJ_CHECK(volume <= INT_MAX, ADJ_ERR_SIZE, "%s: a message of %lld elements exceeds MPI's int count", who,
              (long long)volume);
    out->count = (int)volume;
    return ADJ_SUCCESS;
  }
  int sizes[ADJ_MAX_RANK], subsizes[ADJ_MAX_RANK], starts[ADJ_MAX_RANK];
  for (int d = 0; d < rank; d++) {
    ADJ_CHECK(shape[d] <= INT_MAX, ADJ_ERR_SIZE, "%s: local extent %lld exceeds MPI's int", who, (long long)shape[d]);
    sizes[d] = (int)shape[d], subsizes[d] = (int)box->extent[d], starts[d] = (int)box->start[d];
  }
  ADJ_CALL_MPI(MPI_Type_create_subarray(rank, sizes, subsizes, starts, MPI_ORDER_C, element, &out->type));
  out->derived = true;
  ADJ_CALL_MPI(MPI_Type_commit(&out->type));
  return ADJ_SUCCESS;
}

void adj_box_type_free(adj_box_type *t) {
  if (!t || !t->derived) return;
  MPI_Type_free(&t->type);
  t->derived = false;
}

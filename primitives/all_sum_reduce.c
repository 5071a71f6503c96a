/* All-sum-reduce over chosen partition dimensions (DistDL paper, section 3).
 *
 * A = B R is self-adjoint, so forward and adjoint are the same routine: one
 * MPI_Iallreduce, or MPI_Allreduce when the application blocks, always in
 * place, over the group
 * of workers that share coordinates on every dimension not reduced.  Groups
 * are disjoint, so MPI_Comm_split builds them all in one call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "adjoin/all_sum_reduce.h"
#include "op_impl.h"
#include "dtype_mpi_impl.h"

typedef struct adj_asr {
  MPI_Comm group;        /* workers summed together; null when inactive */
  int group_size;
  int count;             /* elements of the local block */
  MPI_Datatype type;
  int nrequests;
  MPI_Request request;
} adj_asr;

/* Both directions: out = sum over the group of in.  in and out may be the same
 * tensor, in which case no copy is made.  MPI allows MPI_IN_PLACE only on
 * every member at once, and whether a member's tensors coincide is its
 * caller's choice, so every member reduces in place in out, after copying in
 * there when they differ. */
static int adj_asr_begin(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  (void)direction;
  adj_asr *a = op->impl;
  a->nrequests = 0;
  size_t bytes = (size_t)a->count * adj_dtype_size(op->dtype);
  if (out->data != in->data) memcpy(out->data, in->data, bytes);
  if (a->group_size < 2 || a->count == 0) return ADJ_SUCCESS;
  if (adj_op_may_block(op)) {
    ADJ_CALL_MPI(MPI_Allreduce(MPI_IN_PLACE, out->data, a->count, a->type, MPI_SUM, a->group));
  } else {
    ADJ_CALL_MPI(MPI_Iallreduce(MPI_IN_PLACE, out->data, a->count, a->type, MPI_SUM, a->group, &a->request));
    a->nrequests = 1;
  }
  adj_op_count_send(op, bytes);
  adj_op_count_recv(op, bytes);
  return ADJ_SUCCESS;
}

static int adj_asr_end(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  (void)direction, (void)in, (void)out;
  adj_asr *a = op->impl;
  int count = a->nrequests;
  a->nrequests = 0;
  return adj_wait_all(count, &a->request, op->wait);
}

static int adj_asr_test(adj_op *op, int *done) {
  adj_asr *a = op->impl;
  *done = 1;
  if (!a->nrequests) return ADJ_SUCCESS;
  ADJ_CALL_MPI(MPI_Test(&a->request, done, MPI_STATUS_IGNORE));
  return ADJ_SUCCESS;
}

static void adj_asr_destroy(adj_op *op) {
  adj_asr *a = op->impl;
  if (!a) return;
  if (a->group != MPI_COMM_NULL) MPI_Comm_free(&a->group);
  free(a);
  op->impl = NULL;
}

/* Checks every rank makes identically from the shared arguments. */
static int adj_asr_validate(adj_dtype dtype, const adj_partition *p, int rank, int ndims, const int *dims,
                            adj_op **op) {
  ADJ_CHECK(op, ADJ_ERR_ARG, "all-sum-reduce: output operator pointer is NULL");
  *op = NULL;
  ADJ_CHECK(adj_dtype_valid(dtype), ADJ_ERR_DTYPE, "all-sum-reduce: invalid dtype %d (expected float32, float64, int32, int64 or uint8)",
            (int)dtype);
  ADJ_CHECK(p, ADJ_ERR_ARG, "all-sum-reduce: partition is NULL");
  ADJ_CHECK(rank >= 1 && rank <= ADJ_MAX_RANK, ADJ_ERR_ARG,
            "all-sum-reduce: tensor rank %d is outside 1..%d (hold a scalar as shape [1])", rank, ADJ_MAX_RANK);
  int ndim = adj_partition_ndim(p);
  /* Distinct entries in range also bound ndims by the partition's ndim. */
  ADJ_CHECK(ndims >= 0, ADJ_ERR_ARG, "all-sum-reduce: negative number of dimensions %d", ndims);
  ADJ_CHECK(ndims == 0 || dims, ADJ_ERR_ARG, "all-sum-reduce: dims is NULL");
  for (int i = 0; i < ndims; i++) {
    ADJ_CHECK(dims[i] >= 0 && dims[i] < ndim, ADJ_ERR_ARG,
              "all-sum-reduce: dimension %d (entry %d of dims) is outside the partition's 0..%d", dims[i], i, ndim - 1);
    for (int j = 0; j < i; j++)
      ADJ_CHECK(dims[j] != dims[i], ADJ_ERR_ARG, "all-sum-reduce: dimension %d is listed twice (entries %d and %d)",
                dims[i], j, i);
  }
  return ADJ_SUCCESS;
}

/* This worker's block shape: the caller's when active, zero volume otherwise.
 * A bad shape is a local error (only this rank sees it). */
static int adj_asr_local_shape(const adj_partition *p, int rank, const int64_t *local_shape, int64_t *shape) {
  memset(shape, 0, sizeof(int64_t) * ADJ_MAX_RANK);
  if (!adj_partition_active(p)) return ADJ_SUCCESS;
  ADJ_CHECK(local_shape, ADJ_ERR_ARG, "all-sum-reduce: local_shape is NULL on an active worker");
  int64_t volume = 1;
  for (int i = 0; i < rank; i++) {
    ADJ_CHECK(local_shape[i] >= 0, ADJ_ERR_ARG, "all-sum-reduce: local extent %lld in dimension %d is negative",
              (long long)local_shape[i], i);
    shape[i] = local_shape[i];
    volume *= shape[i];
  }
  ADJ_CHECK(volume <= 0x7fffffff, ADJ_ERR_SIZE,
            "all-sum-reduce: local block has %lld elements, more than one MPI message carries", (long long)volume);
  return ADJ_SUCCESS;
}

/* Color of this worker's group: its row-major index over the dimensions not
 * reduced, MPI_UNDEFINED when inactive. */
static int adj_asr_color(const adj_partition *p, int ndims, const int *dims) {
  if (!adj_partition_active(p)) return MPI_UNDEFINED;
  bool reduced[ADJ_MAX_RANK] = {false};
  for (int i = 0; i < ndims; i++) reduced[dims[i]] = true;
  const int *shape = adj_partition_shape(p), *coords = adj_partition_coords(p);
  int color = 0;
  for (int i = 0; i < adj_partition_ndim(p); i++)
    if (!reduced[i]) color = color * shape[i] + coords[i];
  return color;
}

/* Members of a group must hold equal shapes: the element-wise maximum of
 * (shape, -shape) over the group gives its largest and smallest extents, and a
 * worker that sees them differ reports the mismatch with its own shape. */
static int adj_asr_check_group_shapes(adj_op *op, const adj_partition *p, const adj_asr *a, int rank,
                                      const int64_t *shape) {
  if (a->group == MPI_COMM_NULL) return ADJ_SUCCESS;
  int64_t mine[2 * ADJ_MAX_RANK], extreme[2 * ADJ_MAX_RANK];
  for (int i = 0; i < ADJ_MAX_RANK; i++) {
    mine[i] = shape[i];
    mine[ADJ_MAX_RANK + i] = -shape[i];
  }
  MPI_Request request;
  ADJ_CALL_MPI(MPI_Iallreduce(mine, extreme, 2 * ADJ_MAX_RANK, MPI_INT64_T, MPI_MAX, a->group, &request));
  ADJ_CALL(adj_wait_all(1, &request, op->wait));
  int bad = 0;
  while (bad < rank && extreme[bad] == -extreme[ADJ_MAX_RANK + bad]) bad++;
  if (bad == rank) return ADJ_SUCCESS;
  int ndim = adj_partition_ndim(p);
  int64_t coords[ADJ_MAX_RANK];
  for (int d = 0; d < ndim; d++) coords[d] = adj_partition_coords(p)[d];
  char own[160], where[96];
  return adj_error_set(ADJ_ERR_SIZE,
                       "all-sum-reduce: worker at coordinates %s has local shape %s but its group holds extents "
                       "%lld to %lld in dimension %d (members of a group must pass equal shapes)",
                       adj_shape_format(where, sizeof where, ndim, coords), adj_shape_format(own, sizeof own, rank, shape),
                       (long long)-extreme[ADJ_MAX_RANK + bad], (long long)extreme[bad], bad);
}

/* Splits the operator's communicator into the groups (ordered by grid index)
 * and checks their shapes.  Collective on the operator's communicator. */
static int adj_asr_setup(adj_op *op, const adj_partition *p, int rank, const int64_t *shape, int ndims,
                         const int *dims) {
  adj_asr *a = op->impl;
  int base_rank;
  MPI_Comm_rank(op->comm, &base_rank);
  int key = adj_partition_index_of_rank(p, base_rank);
  ADJ_CALL_MPI(MPI_Comm_split(op->comm, adj_asr_color(p, ndims, dims), key, &a->group));
  a->group_size = 0;
  if (a->group != MPI_COMM_NULL) MPI_Comm_size(a->group, &a->group_size);
  return adj_asr_check_group_shapes(op, p, a, rank, shape);
}

int adj_all_sum_reduce_create(adj_dtype dtype, const adj_partition *p, int rank, const int64_t *local_shape,
                              int ndims, const int *dims, adj_op **op) {
  ADJ_CALL(adj_asr_validate(dtype, p, rank, ndims, dims, op));
  int64_t shape[ADJ_MAX_RANK];
  int status = adj_asr_local_shape(p, rank, local_shape, shape);
  adj_asr *a = status ? NULL : calloc(1, sizeof *a);
  if (!status && !a) status = adj_error_set(ADJ_ERR_MEM, "all-sum-reduce: out of memory");
  MPI_Comm base = adj_partition_base_comm(p);
  status = adj_status_agree(base, status, adj_partition_wait_policy(p));
  if (status) {
    free(a);
    return status;
  }
  a->group = MPI_COMM_NULL;
  a->type = adj_dtype_mpi(dtype);
  adj_box whole = adj_box_whole(rank, shape);
  a->count = (int)adj_box_volume(&whole);
  static const adj_op_methods methods = {adj_asr_begin, adj_asr_end, adj_asr_destroy};
  status = adj_op_alloc("all-sum-reduce", base, dtype, rank, shape, rank, shape, &methods, a, op);
  if (status) {
    free(a);
    return status;
  }
  (*op)->test = adj_asr_test;
  status = adj_asr_setup(*op, p, rank, shape, ndims, dims);
  /* A worker alone in its group (or with nothing to sum) keeps its block. */
  (*op)->identity = a->group_size < 2 || a->count == 0;
  status = adj_status_agree((*op)->comm, status, (*op)->wait);
  if (status) adj_op_destroy(op);
  return status;
}

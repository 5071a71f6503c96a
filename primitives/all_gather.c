/* All-gather and reduce-scatter along one partition dimension.
 *
 * The workers that share every coordinate but `dim` form a group (a
 * sub-communicator split from the operator's own).  Ordered by their
 * coordinate along `dim`, their blocks tile the full extent of tensor dimension
 * `dim`.  All-gather concatenates the members' blocks with MPI_Iallgatherv and
 * unpacks member k's part into its box of the full-extent tensor; its adjoint,
 * reduce-scatter, packs the full-extent tensor into per-member chunks in the
 * same order and sums them onto their owners with MPI_Ireduce_scatter.  One
 * implementation serves both operators: `gather_forward` says which of the two
 * the forward direction is.
 *
 * When every tensor dimension before `dim` has extent 1, the concatenation is
 * already the full-extent tensor's row-major layout, so MPI reads or writes the
 * tensor directly and the pack / unpack step disappears. */
#include <limits.h>
#include <stdlib.h>

#include "adjoin/agree.h"
#include "adjoin/all_gather.h"
#include "op_impl.h"
#include "dtype_mpi_impl.h"

typedef struct adj_all_gather {
  bool gather_forward; /* forward is all-gather (else reduce-scatter) */
  MPI_Comm group;      /* members along dim, ranked by coordinate; MPI_COMM_NULL when inactive */
  int members;
  int mine;            /* my position in the group */
  int *counts;         /* (members) elements of each member's block */
  int *displs;         /* (members) offsets of the blocks in the concatenation */
  adj_box *boxes;      /* (members) each block inside the full-extent tensor */
  bool direct;         /* the concatenation is the full-extent tensor's own layout */
  char *buffer;        /* the concatenation, unless direct */
  MPI_Datatype type;
  MPI_Request request;
} adj_all_gather;

static void adj_all_gather_destroy(adj_op *op) {
  adj_all_gather *g = op->impl;
  if (!g) return;
  if (g->group != MPI_COMM_NULL) MPI_Comm_free(&g->group);
  free(g->counts);
  free(g->displs);
  free(g->boxes);
  free(g->buffer);
  free(g);
}

static bool adj_all_gather_is_gather(const adj_all_gather *g, adj_direction direction) {
  return (direction == ADJ_FORWARD) == g->gather_forward;
}

/* Sends my block to the group; end unpacks the concatenation. */
static int adj_all_gather_post(adj_op *op, adj_all_gather *g, const adj_tensor *block, adj_tensor *full) {
  size_t esize = adj_dtype_size(op->dtype);
  void *concatenation = g->direct ? full->data : g->buffer;
  ADJ_CALL_MPI(MPI_Iallgatherv(block->data, g->counts[g->mine], g->type, concatenation, g->counts, g->displs, g->type,
                               g->group, &g->request));
  int64_t total = g->displs[g->members - 1] + g->counts[g->members - 1];
  adj_op_count_send(op, (size_t)g->counts[g->mine] * esize);
  adj_op_count_recv(op, (size_t)(total - g->counts[g->mine]) * esize);
  return ADJ_SUCCESS;
}

/* Packs each member's chunk of the full-extent tensor and sums the chunks onto
 * their owners; my block is written by MPI itself, so end has nothing to do. */
static int adj_reduce_scatter_post(adj_op *op, adj_all_gather *g, const adj_tensor *full, adj_tensor *block) {
  size_t esize = adj_dtype_size(op->dtype);
  if (!g->direct)
    for (int k = 0; k < g->members; k++)
      adj_tensor_pack(full, &g->boxes[k], g->buffer + (int64_t)g->displs[k] * (int64_t)esize);
  const void *chunks = g->direct ? full->data : g->buffer;
  ADJ_CALL_MPI(MPI_Ireduce_scatter(chunks, block->data, g->counts, g->type, MPI_SUM, g->group, &g->request));
  int64_t total = g->displs[g->members - 1] + g->counts[g->members - 1];
  adj_op_count_send(op, (size_t)(total - g->counts[g->mine]) * esize);
  adj_op_count_recv(op, (size_t)g->counts[g->mine] * (size_t)(g->members - 1) * esize);
  return ADJ_SUCCESS;
}

static int adj_all_gather_begin(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  adj_all_gather *g = op->impl;
  if (g->group == MPI_COMM_NULL) return ADJ_SUCCESS;
  return adj_all_gather_is_gather(g, direction) ? adj_all_gather_post(op, g, in, out)
                                                 : adj_reduce_scatter_post(op, g, in, out);
}

static int adj_all_gather_end(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  (void)in;
  adj_all_gather *g = op->impl;
  if (g->group == MPI_COMM_NULL) return ADJ_SUCCESS;
  ADJ_CALL(adj_wait_all(1, &g->request, op->wait));
  if (!adj_all_gather_is_gather(g, direction) || g->direct) return ADJ_SUCCESS;
  size_t esize = adj_dtype_size(op->dtype);
  for (int k = 0; k < g->members; k++)
    adj_tensor_unpack(out, &g->boxes[k], g->buffer + (int64_t)g->displs[k] * (int64_t)esize, ADJ_UNPACK_COPY);
  return ADJ_SUCCESS;
}

/* Member k's block, placed in the full-extent tensor: it starts at the cut
 * along dim and at 0 elsewhere (the other extents are the whole local ones). */
static adj_box adj_member_box(const adj_decomposition *d, const int *coords, int dim, int k) {
  int c[ADJ_MAX_RANK];
  for (int i = 0; i < adj_decomposition_rank(d); i++) c[i] = coords[i];
  c[dim] = k;
  adj_box b = adj_decomposition_block(d, c);
  for (int i = 0; i < b.rank; i++)
    if (i != dim) b.start[i] = 0;
  return b;
}

static int adj_all_gather_plan_members(adj_all_gather *g, const adj_decomposition *d, const int *coords, int dim,
                                       size_t esize) {
  g->counts = malloc(sizeof *g->counts * (size_t)g->members);
  g->displs = malloc(sizeof *g->displs * (size_t)g->members);
  g->boxes = malloc(sizeof *g->boxes * (size_t)g->members);
  ADJ_CHECK(g->counts && g->displs && g->boxes, ADJ_ERR_MEM, "all_gather: out of memory for %d members", g->members);
  int64_t total = 0;
  for (int k = 0; k < g->members; k++) {
    g->boxes[k] = adj_member_box(d, coords, dim, k);
    g->counts[k] = (int)adj_box_volume(&g->boxes[k]);
    g->displs[k] = (int)total;
    total += adj_box_volume(&g->boxes[k]);
    ADJ_CHECK(total <= INT_MAX, ADJ_ERR_SIZE, "all_gather: the gathered tensor exceeds %d elements", INT_MAX);
  }
  int64_t outer = 1;
  for (int i = 0; i < dim; i++) outer *= g->boxes[0].extent[i];
  g->direct = outer == 1;
  if (g->direct) return ADJ_SUCCESS;
  g->buffer = malloc(total > 0 ? (size_t)total * esize : 1);
  ADJ_CHECK(g->buffer, ADJ_ERR_MEM, "all_gather: cannot allocate %lld bytes", (long long)total * (long long)esize);
  return ADJ_SUCCESS;
}

/* Splits the group off the operator's communicator and lays out the members. */
static int adj_all_gather_plan(adj_op *op, const adj_decomposition *d, int dim) {
  adj_all_gather *g = op->impl;
  const adj_partition *p = adj_decomposition_partition(d);
  int color = MPI_UNDEFINED, key = 0, c[ADJ_MAX_RANK];
  if (adj_partition_active(p)) {
    /* The group is named by its member at coordinate 0 along dim. */
    for (int i = 0; i < adj_partition_ndim(p); i++) c[i] = adj_partition_coords(p)[i];
    key = c[dim];
    c[dim] = 0;
    color = adj_partition_index(p, c);
  }
  ADJ_CALL_MPI(MPI_Comm_split(op->comm, color, key, &g->group));
  if (g->group == MPI_COMM_NULL) return ADJ_SUCCESS;
  g->members = adj_partition_shape(p)[dim];
  g->mine = key;
  return adj_all_gather_plan_members(g, d, adj_partition_coords(p), dim, adj_dtype_size(op->dtype));
}

static int adj_all_gather_validate(const char *name, adj_dtype dtype, const adj_decomposition *d, int dim) {
  ADJ_CHECK(adj_dtype_valid(dtype), ADJ_ERR_DTYPE, "%s: invalid dtype %d", name, (int)dtype);
  int ndim = adj_decomposition_rank(d);
  ADJ_CHECK(dim >= 0 && dim < ndim, ADJ_ERR_ARG, "%s: dim %d is outside 0..%d of the %d-dimensional partition", name,
            dim, ndim - 1, ndim);
  return ADJ_SUCCESS;
}

static int adj_all_gather_create_named(const char *name, adj_dtype dtype, const adj_decomposition *d, int dim,
                                       bool gather_forward, adj_op **op) {
  ADJ_CHECK(op, ADJ_ERR_ARG, "%s: output operator pointer is NULL", name);
  *op = NULL;
  ADJ_CHECK(d, ADJ_ERR_ARG, "%s: decomposition is NULL", name);
  const adj_partition *p = adj_decomposition_partition(d);
  MPI_Comm base = adj_partition_base_comm(p);
  int status = adj_all_gather_validate(name, dtype, d, dim);
  adj_all_gather *g = status ? NULL : calloc(1, sizeof *g);
  if (!status && !g) status = adj_error_set(ADJ_ERR_MEM, "%s: out of memory", name);
  /* Agreed although argument errors are found by every rank alike, so ranks
   * given different arguments fail together instead of hanging. */
  status = adj_status_agree(base, status, adj_partition_wait_policy(p));
  if (status) {
    free(g);
    return status;
  }
  adj_box block = adj_decomposition_local_block(d), full = block;
  if (adj_partition_active(p)) full.extent[dim] = adj_decomposition_global_shape(d)[dim];
  const adj_box *domain = gather_forward ? &block : &full, *range = gather_forward ? &full : &block;
  *g = (adj_all_gather){.gather_forward = gather_forward, .group = MPI_COMM_NULL,
                        .type = adj_dtype_mpi(dtype)};
  static const adj_op_methods methods = {adj_all_gather_begin, adj_all_gather_end, adj_all_gather_destroy};
  status = adj_op_alloc(name, base, dtype, domain->rank, domain->extent, range->rank, range->extent, &methods, g, op);
  if (status) {
    free(g);
    return status;
  }
  status = adj_status_agree((*op)->comm, adj_all_gather_plan(*op, d, dim), (*op)->wait);
  if (status) adj_op_destroy(op);
  return status;
}

int adj_all_gather_create(adj_dtype dtype, const adj_decomposition *x, int dim, adj_op **op) {
  return adj_all_gather_create_named("all_gather", dtype, x, dim, true, op);
}

int adj_reduce_scatter_create(adj_dtype dtype, const adj_decomposition *y, int dim, adj_op **op) {
  return adj_all_gather_create_named("reduce_scatter", dtype, y, dim, false, op);
}

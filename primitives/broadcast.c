/* Broadcast and sum-reduce between partitions (DistDL paper, eqs. 8-9).
 *
 * One object serves both operators.  Planning groups the workers by source
 * block: group g holds the source worker of P_x's grid index g (rank 0 of the
 * group, the root) and every destination of P_y that maps to it.  A group with
 * more than one member gets its own sub-communicator, so a broadcast is one
 * MPI_Ibcast per group and its adjoint one MPI_Ireduce per group; a group that
 * is only the source itself is a local copy.  Groups overlap (a worker can be
 * the source of one block and a destination of another), which MPI_Comm_split
 * cannot express, hence MPI_Comm_create_group.
 *
 * A sum-reduce P_x -> P_y is the broadcast P_y -> P_x with its directions
 * swapped, so "broadcast forward" and "sum-reduce adjoint" are literally the
 * same code path, and so are their counterparts. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/broadcast.h"
#include "op_impl.h"

typedef struct adj_bcast {
  bool swapped;           /* sum-reduce: the op's forward is the broadcast's adjoint */
  MPI_Datatype type;
  bool is_source;         /* this worker holds a source block */
  bool self_destination;  /* ... and is also a destination of that same block */
  int source_count;       /* elements of the source block this worker holds */
  int destination_count;  /* elements of the block this worker receives */
  MPI_Comm root_comm;     /* group this worker is the source of (size > 1), else null */
  MPI_Comm leaf_comm;     /* group of another worker's block it receives, else null */
  int nrequests;
  MPI_Request requests[2];
} adj_bcast;

/* ---- planning ------------------------------------------------------------------- */

/* P_x grid index of the source of the destination at P_y grid index d.  P_x's
 * shape is right-aligned with P_y's (missing leading dimensions count as 1);
 * along a dimension of extent 1 every destination maps to coordinate 0. */
static int adj_bcast_source_index(const adj_partition *px, const adj_partition *py, int d) {
  int cy[ADJ_MAX_RANK], cx[ADJ_MAX_RANK];
  adj_partition_coords_of_index(py, d, cy);
  int nx = adj_partition_ndim(px), offset = adj_partition_ndim(py) - nx;
  const int *shape = adj_partition_shape(px);
  for (int i = 0; i < nx; i++) cx[i] = shape[i] == 1 ? 0 : cy[offset + i];
  return adj_partition_index(px, cx);
}

/* Base ranks of group g: the source first (the root), then the destinations in
 * P_y grid order, the source not repeated.  Returns the member count. */
static int adj_bcast_members(const adj_partition *px, const adj_partition *py, int g, int *members) {
  int n = 0, source = adj_partition_rank_of_index(px, g);
  members[n++] = source;
  for (int d = 0; d < adj_partition_size(py); d++) {
    int r = adj_partition_rank_of_index(py, d);
    if (r != source && adj_bcast_source_index(px, py, d) == g) members[n++] = r;
  }
  return n;
}

/* Sub-communicator of group g.  Only its members call this (collective over the
 * group, not the whole communicator); the tag keeps concurrent creations apart. */
static int adj_bcast_group_comm(MPI_Comm comm, const int *members, int n, int g, MPI_Comm *out) {
  MPI_Group all, group;
  ADJ_CALL_MPI(MPI_Comm_group(comm, &all));
  int status = MPI_Group_incl(all, n, members, &group);
  MPI_Group_free(&all);
  if (status != MPI_SUCCESS) return adj_error_mpi(status, "MPI_Group_incl");
  status = MPI_Comm_create_group(comm, group, g, out);
  MPI_Group_free(&group);
  return status == MPI_SUCCESS ? ADJ_SUCCESS : adj_error_mpi(status, "MPI_Comm_create_group");
}

/* Creates the sub-communicators of this worker's groups.  Each worker creates
 * its groups in increasing group index: a global order on the groups, so no
 * two workers can wait on each other in opposite orders. */
static int adj_bcast_create_groups(adj_bcast *b, MPI_Comm comm, const adj_partition *px, const adj_partition *py,
                                   int *members) {
  int base_rank;
  MPI_Comm_rank(comm, &base_rank);
  int own = adj_partition_index_of_rank(px, base_rank);
  int dest = adj_partition_index_of_rank(py, base_rank);
  int from = dest >= 0 ? adj_bcast_source_index(px, py, dest) : -1;
  b->is_source = own >= 0;
  b->self_destination = own >= 0 && from == own;
  int other = from == own ? -1 : from;
  int groups[2] = {own < other ? own : other, own < other ? other : own};
  for (int k = 0; k < 2; k++) {
    if (groups[k] < 0) continue;
    int n = adj_bcast_members(px, py, groups[k], members);
    if (n == 1) continue; /* only the source itself: a local copy */
    ADJ_CALL(adj_bcast_group_comm(comm, members, n, groups[k], groups[k] == own ? &b->root_comm : &b->leaf_comm));
  }
  return ADJ_SUCCESS;
}

/* Local block shapes: the source block on P_x workers, the block of the source
 * a destination maps to on P_y workers, zero volume elsewhere. */
static void adj_bcast_shapes(const adj_decomposition *x, const adj_partition *py, int64_t *source_shape,
                             int64_t *destination_shape) {
  const adj_partition *px = adj_decomposition_partition(x);
  adj_box own = adj_decomposition_local_block(x), received = {.rank = own.rank};
  int base_rank;
  MPI_Comm_rank(adj_partition_base_comm(py), &base_rank);
  int dest = adj_partition_index_of_rank(py, base_rank);
  if (dest >= 0) {
    int coords[ADJ_MAX_RANK];
    adj_partition_coords_of_index(px, adj_bcast_source_index(px, py, dest), coords);
    received = adj_decomposition_block(x, coords);
  }
  memcpy(source_shape, own.extent, sizeof(int64_t) * (size_t)own.rank);
  memcpy(destination_shape, received.extent, sizeof(int64_t) * (size_t)own.rank);
}

static int adj_bcast_count(const char *name, int rank, const int64_t *shape, int *count) {
  adj_box box = adj_box_whole(rank, shape);
  int64_t volume = adj_box_volume(&box);
  char text[160];
  ADJ_CHECK(volume <= INT_MAX, ADJ_ERR_SIZE, "%s: local block %s has %lld elements, more than one MPI message carries",
            name, adj_shape_format(text, sizeof text, rank, shape), (long long)volume);
  *count = (int)volume;
  return ADJ_SUCCESS;
}

/* ---- application ------------------------------------------------------------------ */

/* Broadcast direction: source block -> every destination's copy. */
static int adj_bcast_post_copies(adj_op *op, const adj_tensor *source, adj_tensor *destination) {
  adj_bcast *b = op->impl;
  size_t esize = adj_dtype_size(op->dtype);
  if (b->root_comm != MPI_COMM_NULL && b->source_count > 0) {
    /* The root only reads its buffer; MPI's signature is not const. */
    ADJ_CALL_MPI(MPI_Ibcast((void *)source->data, b->source_count, b->type, 0, b->root_comm,
                            &b->requests[b->nrequests++]));
    adj_op_count_send(op, (size_t)b->source_count * esize);
  }
  if (b->leaf_comm != MPI_COMM_NULL && b->destination_count > 0) {
    ADJ_CALL_MPI(MPI_Ibcast(destination->data, b->destination_count, b->type, 0, b->leaf_comm,
                            &b->requests[b->nrequests++]));
    adj_op_count_recv(op, (size_t)b->destination_count * esize);
  }
  /* The root's own copy is made after posting, so it overlaps the transfer to
   * the other destinations (both only read the source).  A root that gives
   * one buffer as both, as MPI_Bcast's root does, needs no copy at all. */
  if (b->self_destination && destination->data != source->data)
    memcpy(destination->data, source->data, (size_t)b->source_count * esize);
  return ADJ_SUCCESS;
}

/* Sum-reduce direction: every destination's copy summed into the source block.
 * The root reduces in place, starting from its own copy when it is a
 * destination of its block (already there when the two share a buffer) and
 * from zero when it is not. */
static int adj_bcast_post_sums(adj_op *op, const adj_tensor *destination, adj_tensor *source) {
  adj_bcast *b = op->impl;
  size_t esize = adj_dtype_size(op->dtype);
  if (!b->self_destination) {
    if (b->is_source) adj_tensor_zero(source);
  } else if (destination->data != source->data) {
    memcpy(source->data, destination->data, (size_t)b->source_count * esize);
  }
  if (b->root_comm != MPI_COMM_NULL && b->source_count > 0) {
    ADJ_CALL_MPI(MPI_Ireduce(MPI_IN_PLACE, source->data, b->source_count, b->type, MPI_SUM, 0, b->root_comm,
                             &b->requests[b->nrequests++]));
    adj_op_count_recv(op, (size_t)b->source_count * esize);
  }
  if (b->leaf_comm != MPI_COMM_NULL && b->destination_count > 0) {
    ADJ_CALL_MPI(MPI_Ireduce(destination->data, NULL, b->destination_count, b->type, MPI_SUM, 0, b->leaf_comm,
                             &b->requests[b->nrequests++]));
    adj_op_count_send(op, (size_t)b->destination_count * esize);
  }
  return ADJ_SUCCESS;
}

/* The one routine for both operators and both directions.  In broadcast terms
 * the domain holds source blocks and the range destination copies; a
 * sum-reduce swaps domain and range, and so swaps which direction copies. */
static int adj_bcast_begin(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  adj_bcast *b = op->impl;
  b->nrequests = 0;
  bool copies = (direction == ADJ_FORWARD) != b->swapped;
  return copies ? adj_bcast_post_copies(op, in, out) : adj_bcast_post_sums(op, in, out);
}

static int adj_bcast_end(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  (void)direction, (void)in, (void)out;
  adj_bcast *b = op->impl;
  int count = b->nrequests;
  b->nrequests = 0;
  return adj_wait_all(count, b->requests, op->wait);
}

static void adj_bcast_free(adj_bcast *b) {
  if (!b) return;
  if (b->root_comm != MPI_COMM_NULL) MPI_Comm_free(&b->root_comm);
  if (b->leaf_comm != MPI_COMM_NULL) MPI_Comm_free(&b->leaf_comm);
  free(b);
}

static void adj_bcast_destroy(adj_op *op) {
  adj_bcast_free(op->impl);
  op->impl = NULL;
}

/* ---- creation --------------------------------------------------------------------- */

/* Allocates the plan and checks the local block sizes.  Local failures only:
 * the caller agrees on the outcome. */
static int adj_bcast_plan(const char *name, bool swapped, adj_dtype dtype, const int64_t *source_shape,
                          const int64_t *destination_shape, int rank, adj_bcast **plan) {
  adj_bcast *b = calloc(1, sizeof *b);
  *plan = b;
  ADJ_CHECK(b, ADJ_ERR_MEM, "%s: out of memory", name);
  b->swapped = swapped;
  b->type = dtype == ADJ_FLOAT32 ? MPI_FLOAT : MPI_DOUBLE;
  b->root_comm = b->leaf_comm = MPI_COMM_NULL;
  ADJ_CALL(adj_bcast_count(name, rank, source_shape, &b->source_count));
  return adj_bcast_count(name, rank, destination_shape, &b->destination_count);
}

/* Creates the operator once the shared arguments are validated.  Broadcast
 * terms throughout: x on P_x is the source, py the destination partition. */
static int adj_bcast_create(const char *name, bool swapped, adj_dtype dtype, const adj_decomposition *x,
                            const adj_partition *py, adj_op **op) {
  const adj_partition *px = adj_decomposition_partition(x);
  MPI_Comm base = adj_partition_base_comm(px);
  int rank = adj_decomposition_rank(x);
  int64_t source_shape[ADJ_MAX_RANK], destination_shape[ADJ_MAX_RANK];
  adj_bcast_shapes(x, py, source_shape, destination_shape);
  adj_bcast *b = NULL;
  int *members = malloc(sizeof(int) * (size_t)(adj_partition_size(py) + 1));
  int status = adj_bcast_plan(name, swapped, dtype, source_shape, destination_shape, rank, &b);
  if (!status && !members) status = adj_error_set(ADJ_ERR_MEM, "%s: out of memory", name);
  status = adj_status_agree(base, status, adj_partition_wait_policy(px));
  if (status) {
    free(members);
    adj_bcast_free(b);
    return status;
  }
  static const adj_op_methods methods = {adj_bcast_begin, adj_bcast_end, adj_bcast_destroy};
  const int64_t *domain = swapped ? destination_shape : source_shape;
  const int64_t *range = swapped ? source_shape : destination_shape;
  status = adj_op_alloc(name, base, dtype, rank, domain, rank, range, &methods, b, op);
  if (status) {
    free(members);
    adj_bcast_free(b);
    return status;
  }
  status = adj_bcast_create_groups(b, (*op)->comm, px, py, members);
  free(members);
  status = adj_status_agree((*op)->comm, status, (*op)->wait);
  if (status) adj_op_destroy(op);
  return status;
}

/* Checks every rank can make from the arguments alone, so each finds the same
 * error without communication. */
static int adj_bcast_validate(const char *name, adj_dtype dtype, const adj_decomposition *source,
                              const adj_partition *destination, adj_op **op) {
  ADJ_CHECK(op, ADJ_ERR_ARG, "%s: output operator pointer is NULL", name);
  *op = NULL;
  ADJ_CHECK(adj_dtype_valid(dtype), ADJ_ERR_DTYPE, "%s: invalid dtype %d (expected float32 or float64)", name,
            (int)dtype);
  ADJ_CHECK(source, ADJ_ERR_ARG, "%s: decomposition is NULL", name);
  ADJ_CHECK(destination, ADJ_ERR_ARG, "%s: partition is NULL", name);
  int status = adj_partition_check_broadcast(adj_decomposition_partition(source), destination);
  if (status && strcmp(name, "broadcast") != 0) {
    /* The rule is stated for the broadcast this operator is the adjoint of. */
    char message[1024];
    snprintf(message, sizeof message, "%s is the adjoint of a %s", name, adj_last_error());
    adj_error_set_message(message);
  }
  return status;
}

int adj_broadcast_create(adj_dtype dtype, const adj_decomposition *x, const adj_partition *p_y, adj_op **op) {
  ADJ_CALL(adj_bcast_validate("broadcast", dtype, x, p_y, op));
  return adj_bcast_create("broadcast", false, dtype, x, p_y, op);
}

int adj_sum_reduce_create(adj_dtype dtype, const adj_partition *p_x, const adj_decomposition *y, adj_op **op) {
  ADJ_CALL(adj_bcast_validate("sum-reduce", dtype, y, p_x, op));
  return adj_bcast_create("sum-reduce", true, dtype, y, p_x, op);
}

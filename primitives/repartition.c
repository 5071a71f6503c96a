/* Repartition (generalized all-to-all), scatter and gather.
 *
 * Every global element has exactly one owner in x and one in y, so the forward
 * map is a block permutation whose blocks are send-receives of box
 * intersections, and its adjoint is the inverse permutation: the same plan run
 * with the two sides' roles swapped.  The plan therefore has two symmetric
 * sides.  Side 0 lists, for my x block, every other worker whose y block
 * overlaps it; side 1 lists, for my y block, every other worker whose x block
 * overlaps it.  Whichever side holds the input sends, the other receives.  The
 * overlap of my own x and y blocks is copied locally, never sent to myself.
 *
 * A box that is one contiguous run of its local tensor is sent from and
 * received into the tensor itself, as a hand-written exchange would; only a
 * strided box is packed to send or received into a buffer and unpacked, which
 * saves a whole copy of every contiguous box.  Strided boxes stay staged:
 * MPICH's subarray path walks short runs more slowly than the pack loop and
 * gains nothing on long ones.
 *
 * Scatter and gather are repartitions from / to a one-worker partition on the
 * root, built here and dropped once the plan exists. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "adjoin/repartition.h"
#include "box_type_impl.h"
#include "op_impl.h"
#include "dtype_mpi_impl.h"

/* A box this worker exchanges with one peer. */
typedef struct adj_peer_box {
  int peer;       /* rank in the operator's communicator (a duplicate of the base) */
  adj_box box;    /* in this side's local tensor coordinates */
  int count;      /* elements */
  bool staged;    /* strided: travels through the side's buffer */
  int64_t offset; /* elements into the side's buffer if staged, else into the local tensor */
} adj_peer_box;

typedef struct adj_repartition_side {
  int count;
  adj_peer_box *peers;
  char *buffer; /* the staged boxes back to back: packed to send, or received into */
} adj_repartition_side;

typedef struct adj_repartition {
  adj_repartition_side side[2]; /* 0: x side, 1: y side */
  adj_box local[2];             /* the region of my x block that is also my y block, in x / y coordinates */
  MPI_Datatype type;
  MPI_Request *requests;        /* one per peer of both sides */
} adj_repartition;

/* The operator's communicator is private and at most one application is
 * outstanding, and each ordered pair of workers exchanges at most one box per
 * application, so one tag suffices: MPI keeps messages between a pair in order. */
enum { ADJ_REPARTITION_TAG = 220 };

static void adj_repartition_free(adj_repartition *r) {
  if (!r) return;
  for (int s = 0; s < 2; s++) {
    free(r->side[s].peers);
    free(r->side[s].buffer);
  }
  free(r->requests);
  free(r);
}

static void adj_repartition_destroy(adj_op *op) { adj_repartition_free(op->impl); }

/* Shifts a box given in global coordinates into the coordinates of `block`. */
static adj_box adj_box_relative(adj_box b, const adj_box *block) {
  for (int i = 0; i < b.rank; i++) b.start[i] -= block->start[i];
  return b;
}

/* Lists the workers other than `me` whose block of `theirs` overlaps my block
 * of `mine`, and sizes the side's buffer for the strided boxes among them. */
static int adj_repartition_plan_side(const adj_decomposition *mine, const adj_decomposition *theirs, int me,
                                     size_t esize, adj_repartition_side *side) {
  adj_box my_block = adj_decomposition_local_block(mine);
  const adj_partition *p = adj_decomposition_partition(theirs);
  int n = adj_partition_size(p);
  side->peers = calloc((size_t)n, sizeof *side->peers);
  ADJ_CHECK(side->peers, ADJ_ERR_MEM, "repartition: out of memory for %d peers", n);
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    int peer = adj_partition_rank_of_index(p, i), coords[ADJ_MAX_RANK];
    adj_partition_coords_of_index(p, i, coords);
    adj_box their_block = adj_decomposition_block(theirs, coords);
    adj_box overlap = adj_box_intersect(&my_block, &their_block);
    int64_t volume = adj_box_volume(&overlap);
    if (peer == me || volume == 0) continue;
    ADJ_CHECK(volume <= INT_MAX, ADJ_ERR_SIZE,
              "repartition: %lld elements to exchange with rank %d exceed one MPI message", (long long)volume, peer);
    adj_peer_box *e = &side->peers[side->count++];
    *e = (adj_peer_box){.peer = peer, .box = adj_box_relative(overlap, &my_block), .count = (int)volume};
    e->staged = !adj_box_run(&e->box, my_block.extent, &e->offset);
    if (e->staged) e->offset = total, total += volume;
  }
  /* Never NULL, so pack and MPI see a valid address even with nothing to move. */
  side->buffer = malloc(total > 0 ? (size_t)total * esize : 1);
  ADJ_CHECK(side->buffer, ADJ_ERR_MEM, "repartition: cannot allocate %lld bytes of buffer",
            (long long)total * (long long)esize);
  return ADJ_SUCCESS;
}

static int adj_repartition_plan(adj_dtype dtype, const adj_decomposition *x, const adj_decomposition *y, int me,
                                adj_repartition *r) {
  size_t esize = adj_dtype_size(dtype);
  r->type = adj_dtype_mpi(dtype);
  ADJ_CALL(adj_repartition_plan_side(x, y, me, esize, &r->side[0]));
  ADJ_CALL(adj_repartition_plan_side(y, x, me, esize, &r->side[1]));
  r->requests = malloc(sizeof *r->requests * (size_t)(r->side[0].count + r->side[1].count + 1));
  ADJ_CHECK(r->requests, ADJ_ERR_MEM, "repartition: out of memory for requests");
  /* Inactive blocks are zero-volume, so the overlap is empty unless this worker
   * is in both partitions. */
  adj_box bx = adj_decomposition_local_block(x), by = adj_decomposition_local_block(y);
  adj_box overlap = adj_box_intersect(&bx, &by);
  r->local[0] = adj_box_relative(overlap, &bx);
  r->local[1] = adj_box_relative(overlap, &by);
  return ADJ_SUCCESS;
}

/* Where a peer's box travels from or to: its place in `t`, or the side's buffer. */
static char *adj_peer_data(const adj_repartition_side *side, const adj_peer_box *e, const adj_tensor *t,
                           size_t esize) {
  return (e->staged ? side->buffer : (char *)t->data) + e->offset * (int64_t)esize;
}

/* Forward sends from the x side to the y side; the adjoint runs the same plan
 * from y to x. */
static int adj_repartition_begin(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  adj_repartition *r = op->impl;
  int from = direction == ADJ_FORWARD ? 0 : 1, to = 1 - from;
  const adj_repartition_side *src = &r->side[from], *dst = &r->side[to];
  size_t esize = adj_dtype_size(op->dtype);
  MPI_Request *request = r->requests;
  /* Receives first, so a peer's eager send finds its buffer posted. */
  for (int k = 0; k < dst->count; k++) {
    const adj_peer_box *e = &dst->peers[k];
    ADJ_CALL_MPI(MPI_Irecv(adj_peer_data(dst, e, out, esize), e->count, r->type, e->peer, ADJ_REPARTITION_TAG,
                           op->comm, request++));
    adj_op_count_recv(op, (size_t)e->count * esize);
  }
  for (int k = 0; k < src->count; k++) {
    const adj_peer_box *e = &src->peers[k];
    char *buf = adj_peer_data(src, e, in, esize);
    if (e->staged) adj_tensor_pack(in, &e->box, buf);
    ADJ_CALL_MPI(MPI_Isend(buf, e->count, r->type, e->peer, ADJ_REPARTITION_TAG, op->comm, request++));
    adj_op_count_send(op, (size_t)e->count * esize);
  }
  adj_tensor_copy_box(out, &r->local[to], in, &r->local[from], ADJ_UNPACK_COPY);
  return ADJ_SUCCESS;
}

static int adj_repartition_end(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  (void)in;
  adj_repartition *r = op->impl;
  const adj_repartition_side *dst = &r->side[direction == ADJ_FORWARD ? 1 : 0];
  ADJ_CALL(adj_wait_all(r->side[0].count + r->side[1].count, r->requests, op->wait));
  size_t esize = adj_dtype_size(op->dtype);
  for (int k = 0; k < dst->count; k++) {
    const adj_peer_box *e = &dst->peers[k];
    if (e->staged) adj_tensor_unpack(out, &e->box, adj_peer_data(dst, e, out, esize), ADJ_UNPACK_COPY);
  }
  return ADJ_SUCCESS;
}

/* Checks that every rank sees identically (the arguments are shared), so the
 * same message appears everywhere. */
static int adj_repartition_validate(const char *name, adj_dtype dtype, const adj_decomposition *x,
                                    const adj_decomposition *y) {
  ADJ_CHECK(adj_dtype_valid(dtype), ADJ_ERR_DTYPE, "%s: invalid dtype %d", name, (int)dtype);
  const adj_partition *px = adj_decomposition_partition(x), *py = adj_decomposition_partition(y);
  char a[160], b[160];
  int same = MPI_UNEQUAL;
  ADJ_CALL_MPI(MPI_Comm_compare(adj_partition_base_comm(px), adj_partition_base_comm(py), &same));
  ADJ_CHECK(same == MPI_IDENT || same == MPI_CONGRUENT, ADJ_ERR_INCOMPATIBLE,
            "%s: x (partition %s) and y (partition %s) live on different base communicators", name,
            adj_partition_format(px, a, sizeof a), adj_partition_format(py, b, sizeof b));
  int rx = adj_decomposition_rank(x), ry = adj_decomposition_rank(y);
  const int64_t *gx = adj_decomposition_global_shape(x), *gy = adj_decomposition_global_shape(y);
  int equal = rx == ry;
  for (int i = 0; equal && i < rx; i++) equal = gx[i] == gy[i];
  ADJ_CHECK(equal, ADJ_ERR_SIZE, "%s: global shape %s of x does not match global shape %s of y", name,
            adj_shape_format(a, sizeof a, rx, gx), adj_shape_format(b, sizeof b, ry, gy));
  return ADJ_SUCCESS;
}

/* No peer on either side and my x block is my y block: the identity here. */
static bool adj_repartition_is_identity(const adj_repartition *r, const adj_box *bx, const adj_box *by) {
  if (r->side[0].count || r->side[1].count) return false;
  for (int i = 0; i < bx->rank; i++)
    if (bx->start[i] != by->start[i] || bx->extent[i] != by->extent[i]) return false;
  return true;
}

static int adj_repartition_create_named(const char *name, adj_dtype dtype, const adj_decomposition *x,
                                        const adj_decomposition *y, adj_op **op) {
  ADJ_CHECK(op, ADJ_ERR_ARG, "%s: output operator pointer is NULL", name);
  *op = NULL;
  ADJ_CHECK(x && y, ADJ_ERR_ARG, "%s: decomposition %s is NULL", name, x ? "y" : "x");
  const adj_partition *px = adj_decomposition_partition(x);
  MPI_Comm base = adj_partition_base_comm(px);
  adj_wait_policy wait = adj_partition_wait_policy(px);
  int me;
  MPI_Comm_rank(base, &me);
  int status = adj_repartition_validate(name, dtype, x, y);
  adj_repartition *r = status ? NULL : calloc(1, sizeof *r);
  if (!status && !r) status = adj_error_set(ADJ_ERR_MEM, "%s: out of memory", name);
  if (!status) status = adj_repartition_plan(dtype, x, y, me, r);
  /* Agreed although every rank finds the same argument errors, so a caller
   * that passed different arguments on different ranks gets an error instead
   * of a hang, and a rank that ran out of memory takes the others with it. */
  status = adj_status_agree(base, status, wait);
  if (!status) {
    adj_box bx = adj_decomposition_local_block(x), by = adj_decomposition_local_block(y);
    static const adj_op_methods methods = {adj_repartition_begin, adj_repartition_end, adj_repartition_destroy};
    status = adj_op_alloc(name, base, dtype, bx.rank, bx.extent, by.rank, by.extent, &methods, r, op);
    if (!status) (*op)->identity = adj_repartition_is_identity(r, &bx, &by);
  }
  if (status) adj_repartition_free(r);
  return status;
}

int adj_repartition_create(adj_dtype dtype, const adj_decomposition *x, const adj_decomposition *y, adj_op **op) {
  return adj_repartition_create_named("repartition", dtype, x, y, op);
}

/* The decomposition of `like`'s global tensor held whole by `root`. */
static int adj_root_decomposition(const char *name, int root, const adj_decomposition *like,
                                  adj_decomposition **whole) {
  *whole = NULL;
  ADJ_CHECK(like, ADJ_ERR_ARG, "%s: decomposition is NULL", name);
  const adj_partition *partition = adj_decomposition_partition(like);
  MPI_Comm base = adj_partition_base_comm(partition);
  int size;
  ADJ_CALL_MPI(MPI_Comm_size(base, &size));
  int status = root >= 0 && root < size
                   ? ADJ_SUCCESS
                   : adj_error_set(ADJ_ERR_ARG, "%s: root %d is outside the communicator of size %d", name, root, size);
  /* Agreed, so ranks given different roots fail together before the
   * collective partition creation below. */
  ADJ_CALL(adj_status_agree(base, status, adj_partition_wait_policy(partition)));
  int ndim = adj_decomposition_rank(like), ones[ADJ_MAX_RANK];
  for (int i = 0; i < ndim; i++) ones[i] = 1;
  adj_partition *p;
  ADJ_CALL(adj_partition_create(base, ndim, ones, 1, &root, &p));
  status = adj_decomposition_create(p, ndim, adj_decomposition_global_shape(like), whole);
  adj_partition_destroy(&p); /* the decomposition keeps its own reference */
  return status;
}

/* Scatter and gather: the same repartition with the root's whole tensor on
 * one side. */
static int adj_root_create(const char *name, adj_dtype dtype, int root, const adj_decomposition *d, bool to_root,
                           adj_op **op) {
  ADJ_CHECK(op, ADJ_ERR_ARG, "%s: output operator pointer is NULL", name);
  *op = NULL;
  adj_decomposition *whole;
  ADJ_CALL(adj_root_decomposition(name, root, d, &whole));
  int status = to_root ? adj_repartition_create_named(name, dtype, d, whole, op)
                       : adj_repartition_create_named(name, dtype, whole, d, op);
  adj_decomposition_destroy(&whole);
  return status;
}

int adj_scatter_create(adj_dtype dtype, int root, const adj_decomposition *y, adj_op **op) {
  return adj_root_create("scatter", dtype, root, y, false, op);
}

int adj_gather_create(adj_dtype dtype, const adj_decomposition *x, int root, adj_op **op) {
  return adj_root_create("gather", dtype, root, x, true, op);
}

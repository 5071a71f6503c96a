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
 * same code path, and so are their counterparts.
 *
 * The summing direction has several algorithms, chosen per group at creation
 * from the group size and the block's bytes by the measured table rank 0
 * broadcast (algorithm_table_impl.h), else by the fixed rule; the same on
 * every member, so a group agrees without further communication: MPI_Ireduce;
 * MPI_Iallreduce, whose result the leaves drop into a scratch block (MPICH's
 * reduce to one root measured 3-6x slower than its all-reduce of the same
 * data on 2-4 ranks at 1-8 MB); and
 * reduce-scatter + gather (Rabenseifner's scheme) posted in two phases, the
 * gather from adj_op_end.  A fourth algorithm, a pipelined chain of
 * point-to-point messages, serves both directions: segments travel
 * root -> 1 -> 2 ... when copying and the reverse way, summed at each member,
 * when summing; begin posts every receive and the first sends, end forwards
 * each segment as it arrives.  ADJ_SUM_REDUCE_ALGORITHM overrides the choice. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "adjoin/broadcast.h"
#include "algorithm_table_impl.h"
#include "broadcast_impl.h"
#include "op_impl.h"
#include "dtype_mpi_impl.h"
#include "setting_impl.h"

const char *const adj_sum_algorithm_names[ADJ_SUM_ALGORITHM_COUNT] = {"auto", "reduce", "allreduce", "reduce-scatter",
                                                                      "chain"};

/* A chain's segments along the group's ranks.  requests holds one receive per
 * segment, then one send per segment. */
typedef struct adj_chain {
  int segment, nsegments; /* elements per segment (the last may be shorter) */
  void *partial;          /* summing: the running sum received from upstream */
  MPI_Request *requests;
} adj_chain;

/* One group's plan.  Reduce-scatter chunks: member r owns elements
 * displs[r] .. displs[r] + counts[r] of the block.  A group copies by
 * MPI_Ibcast unless the chain is forced: the measured table times only the
 * summing direction, so a chain it chooses for summing says nothing about
 * copying. */
typedef struct adj_sum_plan {
  adj_sum_algorithm algorithm;
  bool chain_copies;
  int size, rank;       /* of the group's communicator */
  int *counts, *displs; /* reduce-scatter only */
  adj_chain chain;      /* chain only */
  /* All-reduce and reduce-scatter: a leaf's result (the all-reduce's block,
   * the reduce-scatter's chunk); at the root, the copy of its block it sends.
   * MPI allows MPI_IN_PLACE in these only on every member at once (Open MPI's
   * nonblocking all-reduce picks a different schedule in place), so the root
   * never passes it. */
  void *scratch;
} adj_sum_plan;

typedef struct adj_bcast {
  bool swapped;           /* sum-reduce: the op's forward is the broadcast's adjoint */
  MPI_Datatype type;
  bool is_source;         /* this worker holds a source block */
  bool self_destination;  /* ... and is also a destination of that same block */
  int source_count;       /* elements of the source block this worker holds */
  int destination_count;  /* elements of the block this worker receives */
  MPI_Comm root_comm;     /* group this worker is the source of (size > 1), else null */
  MPI_Comm leaf_comm;     /* group of another worker's block it receives, else null */
  adj_sum_plan root_sum, leaf_sum;
  bool second_phase;      /* a reduce-scatter's gather is still to be posted */
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

/* ---- algorithm choice ------------------------------------------------------------- */

/* The fixed rule without a measured table: MPI_Ireduce below 64 KB, an
 * all-reduce from 64 KB, reduce-scatter + gather from 1 MB.  MPICH's reduce
 * to one root measured 3-6x slower than its all-reduce at 1-8 MB (issue 18),
 * and calibrations on 2, 3 and 4 ranks of a 2-core host timed
 * reduce-scatter + gather below the all-reduce at every size from 1 to 64 MB
 * (bench/RESULTS.md, 2026-11-27).  The chain, often fastest alone,
 * is left to a table: chosen for small blocks it slowed dist4 training. */
enum { ADJ_SUM_ALLREDUCE_FROM = 65536, ADJ_SUM_REDUCE_SCATTER_FROM = 1 << 20 };

/* Bytes per chain segment: small enough that a member starts forwarding soon
 * after the first segment arrives, large enough that per-message costs stay
 * small.  ADJ_CHAIN_SEGMENT_BYTES or its setter overrides it (the tests cut
 * even tiny blocks into several segments with it). */
enum { ADJ_CHAIN_SEGMENT_DEFAULT = 65536 };

static adj_setting adj_chain_segment_setting = ADJ_SETTING_INIT("ADJ_CHAIN_SEGMENT_BYTES");
static adj_setting adj_sum_algorithm_setting = ADJ_SETTING_INIT("ADJ_SUM_REDUCE_ALGORITHM");

int adj_chain_segment_bytes_get_default(long *bytes) {
  ADJ_CHECK(bytes, ADJ_ERR_ARG, "adj_chain_segment_bytes_get_default: output pointer is NULL");
  const char *text = adj_setting_text(&adj_chain_segment_setting);
  *bytes = ADJ_CHAIN_SEGMENT_DEFAULT;
  if (!*text) return ADJ_SUCCESS;
  char *end;
  errno = 0;
  long value = strtol(text, &end, 10);
  ADJ_CHECK(!errno && !*end && value > 0 && value <= INT_MAX, ADJ_ERR_ARG,
            "ADJ_CHAIN_SEGMENT_BYTES='%s' is not a positive byte count", text);
  *bytes = value;
  return ADJ_SUCCESS;
}

int adj_chain_segment_bytes_set_default(long bytes) {
  ADJ_CHECK(bytes >= 0 && bytes <= INT_MAX, ADJ_ERR_ARG,
            "adj_chain_segment_bytes_set_default: %ld bytes is not from 1 to %d (or 0 for the default)", bytes,
            INT_MAX);
  char text[32] = "";
  if (bytes > 0) snprintf(text, sizeof text, "%ld", bytes);
  return adj_setting_set(&adj_chain_segment_setting, text);
}

/* Elements per chain segment of esize-byte elements, at least 1. */
static int adj_chain_segment(size_t esize, int *segment) {
  long bytes;
  ADJ_CALL(adj_chain_segment_bytes_get_default(&bytes));
  *segment = (size_t)bytes >= esize ? (int)((size_t)bytes / esize) : 1;
  return ADJ_SUCCESS;
}

ADJ_SETTING_CHOICE_ACCESSORS(adj_sum_algorithm, adj_sum_algorithm, adj_sum_algorithm_setting, adj_sum_algorithm_names)

/* Segments of a chain group.  Every member but the last receives the running
 * sum from upstream when summing, into `partial`. */
static int adj_chain_plan(const char *name, int segment, int count, size_t esize, adj_sum_plan *plan) {
  adj_chain *chain = &plan->chain;
  chain->segment = segment;
  chain->nsegments = (int)(((int64_t)count + segment - 1) / segment);
  chain->requests = malloc(sizeof(MPI_Request) * 2 * (size_t)(chain->nsegments > 0 ? chain->nsegments : 1));
  ADJ_CHECK(chain->requests, ADJ_ERR_MEM, "%s: out of memory", name);
  if (plan->rank < plan->size - 1 && count > 0) {
    chain->partial = malloc((size_t)count * esize);
    ADJ_CHECK(chain->partial, ADJ_ERR_MEM, "%s: out of memory for a %zu-byte chain block", name,
              (size_t)count * esize);
  }
  return ADJ_SUCCESS;
}

/* What decides a group's algorithm: the creator or the environment (forced),
 * else the measured table, else the fixed rule by block size. */
typedef struct adj_sum_choice {
  adj_sum_algorithm forced;
  int segment; /* chain segment, elements */
  const adj_algorithm_table *table;
} adj_sum_choice;

/* Plans the summing of one group.  Every member computes the same choice from
 * the same block size and the same table.  Local failures only (allocation). */
static int adj_sum_plan_create(const char *name, const adj_sum_choice *choice, MPI_Comm comm, int count,
                               size_t esize, bool root, adj_sum_plan *plan) {
  MPI_Comm_size(comm, &plan->size);
  MPI_Comm_rank(comm, &plan->rank);
  size_t bytes = (size_t)count * esize;
  adj_sum_algorithm measured = (adj_sum_algorithm)adj_algorithm_table_choose(choice->table, plan->size, (int64_t)bytes);
  plan->algorithm = choice->forced != ADJ_SUM_AUTO ? choice->forced
                    : measured != ADJ_SUM_AUTO     ? measured
                    : bytes >= ADJ_SUM_REDUCE_SCATTER_FROM ? ADJ_SUM_REDUCE_SCATTER
                    : bytes >= ADJ_SUM_ALLREDUCE_FROM      ? ADJ_SUM_ALLREDUCE
                                                           : ADJ_SUM_REDUCE;
  size_t scratch = 0;
  plan->chain_copies = choice->forced == ADJ_SUM_CHAIN;
  if (plan->algorithm == ADJ_SUM_CHAIN) {
    ADJ_CALL(adj_chain_plan(name, choice->segment, count, esize, plan));
  } else if (plan->algorithm == ADJ_SUM_REDUCE_SCATTER) {
    plan->counts = malloc(sizeof(int) * (size_t)plan->size);
    plan->displs = malloc(sizeof(int) * (size_t)plan->size);
    ADJ_CHECK(plan->counts && plan->displs, ADJ_ERR_MEM, "%s: out of memory", name);
    for (int r = 0, start = 0; r < plan->size; r++) {
      plan->counts[r] = count / plan->size + (r < count % plan->size);
      plan->displs[r] = start;
      start += plan->counts[r];
    }
    scratch = root ? (size_t)count : (size_t)plan->counts[plan->rank];
  } else if (plan->algorithm == ADJ_SUM_ALLREDUCE) {
    scratch = (size_t)count;
  }
  if (scratch > 0) {
    plan->scratch = malloc(scratch * esize);
    ADJ_CHECK(plan->scratch, ADJ_ERR_MEM, "%s: out of memory for a %zu-byte scratch block", name, scratch * esize);
  }
  return ADJ_SUCCESS;
}

/* `chosen` is the creator's algorithm; AUTO leaves the choice to the
 * environment, the measured table and the block size. */
static int adj_bcast_plan_sums(adj_op *op, adj_sum_algorithm chosen, const adj_algorithm_table *table) {
  adj_bcast *b = op->impl;
  adj_sum_choice choice = {.forced = chosen, .segment = 1, .table = table};
  if (choice.forced == ADJ_SUM_AUTO) ADJ_CALL(adj_sum_algorithm_get_default(&choice.forced));
  size_t esize = adj_dtype_size(op->dtype);
  ADJ_CALL(adj_chain_segment(esize, &choice.segment));
  if (b->root_comm != MPI_COMM_NULL)
    ADJ_CALL(adj_sum_plan_create(op->name, &choice, b->root_comm, b->source_count, esize, true, &b->root_sum));
  if (b->leaf_comm != MPI_COMM_NULL)
    ADJ_CALL(
        adj_sum_plan_create(op->name, &choice, b->leaf_comm, b->destination_count, esize, false, &b->leaf_sum));
  const char *copy = b->root_sum.chain_copies || b->leaf_sum.chain_copies ? "chain" : "bcast";
  const char *root = b->root_comm != MPI_COMM_NULL ? adj_sum_algorithm_names[b->root_sum.algorithm] : NULL;
  const char *leaf = b->leaf_comm != MPI_COMM_NULL ? adj_sum_algorithm_names[b->leaf_sum.algorithm] : NULL;
  if (root && leaf && strcmp(root, leaf))
    snprintf(op->algorithm, sizeof op->algorithm, "%s, sum %s+%s", copy, root, leaf);
  else if (root || leaf) snprintf(op->algorithm, sizeof op->algorithm, "%s, sum %s", copy, root ? root : leaf);
  else snprintf(op->algorithm, sizeof op->algorithm, "local copy");
  return ADJ_SUCCESS;
}

/* ---- the chain -------------------------------------------------------------------- */

/* What both halves of a chain's application need: this member's neighbours
 * along it, -1 for none (copies flow root -> 1 -> 2 ..., sums the reverse
 * way), and the element size. */
typedef struct adj_chain_ends {
  int up, down;
  size_t esize;
} adj_chain_ends;

static adj_chain_ends adj_chain_ends_of(const adj_op *op, const adj_sum_plan *plan, bool copies) {
  int previous = plan->rank - 1, next = plan->rank + 1 < plan->size ? plan->rank + 1 : -1;
  return (adj_chain_ends){.up = copies ? previous : next, .down = copies ? next : previous,
                          .esize = adj_dtype_size(op->dtype)};
}

static int adj_chain_length(const adj_chain *chain, int count, int s) {
  int rest = count - s * chain->segment;
  return rest < chain->segment ? rest : chain->segment;
}

/* Begin: a member with an upstream neighbour posts every receive (copies into
 * its block, sums into the partial buffer); the head of the chain posts every
 * send.  One message per segment in the counters. */
static int adj_chain_post(adj_op *op, adj_sum_plan *plan, MPI_Comm comm, bool copies, void *data, int count) {
  adj_bcast *b = op->impl;
  adj_chain *chain = &plan->chain;
  adj_chain_ends ends = adj_chain_ends_of(op, plan, copies);
  char *buffer = ends.up >= 0 && !copies ? chain->partial : data;
  for (int s = 0; s < 2 * chain->nsegments; s++) chain->requests[s] = MPI_REQUEST_NULL;
  for (int s = 0; s < chain->nsegments; s++) {
    int n = adj_chain_length(chain, count, s);
    char *segment = buffer + (size_t)s * (size_t)chain->segment * ends.esize;
    if (ends.up >= 0) {
      ADJ_CALL_MPI(MPI_Irecv(segment, n, b->type, ends.up, 0, comm, &chain->requests[s]));
      adj_op_count_recv(op, (size_t)n * ends.esize);
    } else {
      ADJ_CALL_MPI(MPI_Isend(segment, n, b->type, ends.down, 0, comm, &chain->requests[chain->nsegments + s]));
      adj_op_count_send(op, (size_t)n * ends.esize);
    }
  }
  return ADJ_SUCCESS;
}

/* End: each segment, as it arrives, is summed with this member's own part
 * (into the running sum, or at the root into its block) and forwarded
 * downstream; then the sends complete. */
static int adj_chain_complete(adj_op *op, adj_sum_plan *plan, MPI_Comm comm, bool copies, void *data, int count) {
  adj_bcast *b = op->impl;
  adj_chain *chain = &plan->chain;
  adj_chain_ends ends = adj_chain_ends_of(op, plan, copies);
  for (int s = 0; ends.up >= 0 && s < chain->nsegments; s++) {
    ADJ_CALL(adj_wait_all(1, &chain->requests[s], op->wait));
    int n = adj_chain_length(chain, count, s);
    size_t offset = (size_t)s * (size_t)chain->segment * ends.esize;
    char *own = (char *)data + offset, *partial = copies ? NULL : (char *)chain->partial + offset;
    if (!copies && ends.down >= 0) adj_dtype_add(op->dtype, partial, own, n);
    if (!copies && ends.down < 0) adj_dtype_add(op->dtype, own, partial, n);
    if (ends.down < 0) continue;
    ADJ_CALL_MPI(
        MPI_Isend(copies ? own : partial, n, b->type, ends.down, 0, comm, &chain->requests[chain->nsegments + s]));
    adj_op_count_send(op, (size_t)n * ends.esize);
  }
  return adj_wait_all(chain->nsegments, chain->requests + chain->nsegments, op->wait);
}

/* Completes this worker's chain groups, its leaf group first: the members
 * downstream wait for its forwarding, and the upstream member it waits on is
 * in the same group, where every member also serves its leaf chain first, so
 * the waits run along one group to its head, which posted all in begin. */
static bool adj_chain_serves(const adj_sum_plan *plan, bool copies) {
  return copies ? plan->chain_copies : plan->algorithm == ADJ_SUM_CHAIN;
}

static int adj_bcast_complete_chains(adj_op *op, bool copies, const adj_tensor *in, adj_tensor *out) {
  adj_bcast *b = op->impl;
  /* Only a summing root writes through these; MPI's signatures are not const. */
  void *source = copies ? (void *)in->data : out->data;
  void *destination = copies ? out->data : (void *)in->data;
  if (b->leaf_comm != MPI_COMM_NULL && b->destination_count > 0 && adj_chain_serves(&b->leaf_sum, copies))
    ADJ_CALL(adj_chain_complete(op, &b->leaf_sum, b->leaf_comm, copies, destination, b->destination_count));
  if (b->root_comm != MPI_COMM_NULL && b->source_count > 0 && adj_chain_serves(&b->root_sum, copies))
    ADJ_CALL(adj_chain_complete(op, &b->root_sum, b->root_comm, copies, source, b->source_count));
  return ADJ_SUCCESS;
}

/* ---- application ------------------------------------------------------------------ */

/* Whether this application may move its data with MPI's blocking calls
 * (adj_op_may_block) here: this worker is in one group only, so a blocking
 * call cannot wait on a member that first serves another group. */
static bool adj_bcast_blocks(const adj_op *op) {
  const adj_bcast *b = op->impl;
  return adj_op_may_block(op) && (b->root_comm == MPI_COMM_NULL) != (b->leaf_comm == MPI_COMM_NULL);
}

/* One group's copy by MPI's broadcast, blocking when the application allows. */
static int adj_bcast_post_copy(adj_op *op, void *data, int count, MPI_Comm comm) {
  adj_bcast *b = op->impl;
  ADJ_CALL_MPI(adj_bcast_blocks(op) ? MPI_Bcast(data, count, b->type, 0, comm)
                                    : MPI_Ibcast(data, count, b->type, 0, comm, &b->requests[b->nrequests++]));
  return ADJ_SUCCESS;
}

/* Broadcast direction: source block -> every destination's copy. */
static int adj_bcast_post_copies(adj_op *op, const adj_tensor *source, adj_tensor *destination) {
  adj_bcast *b = op->impl;
  size_t esize = adj_dtype_size(op->dtype);
  if (b->root_comm != MPI_COMM_NULL && b->source_count > 0 && b->root_sum.chain_copies) {
    ADJ_CALL(adj_chain_post(op, &b->root_sum, b->root_comm, true, (void *)source->data, b->source_count));
  } else if (b->root_comm != MPI_COMM_NULL && b->source_count > 0) {
    /* The root only reads its buffer; MPI's signature is not const. */
    ADJ_CALL(adj_bcast_post_copy(op, (void *)source->data, b->source_count, b->root_comm));
    adj_op_count_send(op, (size_t)b->source_count * esize);
  }
  if (b->leaf_comm != MPI_COMM_NULL && b->destination_count > 0 && b->leaf_sum.chain_copies) {
    ADJ_CALL(adj_chain_post(op, &b->leaf_sum, b->leaf_comm, true, destination->data, b->destination_count));
  } else if (b->leaf_comm != MPI_COMM_NULL && b->destination_count > 0) {
    ADJ_CALL(adj_bcast_post_copy(op, destination->data, b->destination_count, b->leaf_comm));
    adj_op_count_recv(op, (size_t)b->destination_count * esize);
  }
  /* The root's own copy is made after posting, so it overlaps the transfer to
   * the other destinations (both only read the source).  A root that gives
   * one buffer as both, as MPI_Bcast's root does, needs no copy at all. */
  if (b->self_destination && destination->data != source->data)
    memcpy(destination->data, source->data, (size_t)b->source_count * esize);
  return ADJ_SUCCESS;
}

/* The gather of a reduce-scatter: the root's chunk is already in place; a
 * leaf sends its chunk and receives nothing. */
static int adj_bcast_post_gather(adj_op *op, const adj_sum_plan *plan, MPI_Comm comm, bool root, void *data,
                                 int count) {
  adj_bcast *b = op->impl;
  size_t esize = adj_dtype_size(op->dtype);
  size_t own = (size_t)plan->counts[plan->rank] * esize, bytes = (size_t)count * esize;
  MPI_Request *request = adj_bcast_blocks(op) ? NULL : &b->requests[b->nrequests++];
  const void *send = root ? MPI_IN_PLACE : plan->scratch;
  int sent = root ? 0 : plan->counts[plan->rank];
  const int *counts = root ? plan->counts : NULL, *displs = root ? plan->displs : NULL;
  void *gathered = root ? data : NULL;
  ADJ_CALL_MPI(request ? MPI_Igatherv(send, sent, b->type, gathered, counts, displs, b->type, 0, comm, request)
                       : MPI_Gatherv(send, sent, b->type, gathered, counts, displs, b->type, 0, comm));
  if (root && bytes > own) adj_op_count_recv(op, bytes - own);
  if (!root && own) adj_op_count_send(op, own);
  return ADJ_SUCCESS;
}

/* Sum-reduce direction: every destination's copy summed into the source block.
 * The root reduces into its block, from `own` (its copy as a destination of
 * the block) when given, else in place (reduce) or from a copy of its block.  Counters follow what each algorithm moves, one
 * message per collective contribution: reduce, the leaf sends the block and
 * the root receives it; all-reduce, every member sends and receives the block;
 * reduce-scatter, every member sends the chunks the others own and receives
 * its own, then the gather sends a leaf's chunk and the root receives the rest;
 * chain, one message per segment and neighbour. */
static int adj_bcast_post_sum(adj_op *op, adj_sum_plan *plan, MPI_Comm comm, bool root, void *data,
                              const void *own, int count) {
  if (plan->algorithm == ADJ_SUM_CHAIN) return adj_chain_post(op, plan, comm, false, data, count);
  adj_bcast *b = op->impl;
  size_t esize = adj_dtype_size(op->dtype), bytes = (size_t)count * esize;
  const void *send = !root ? data : own ? own : MPI_IN_PLACE;
  if (root && !own && plan->algorithm != ADJ_SUM_REDUCE) {
    /* Never in place at the root of an all-reduce or reduce-scatter (see
     * adj_sum_plan): it sends a copy of its block. */
    memcpy(plan->scratch, data, bytes);
    send = plan->scratch;
  }
  MPI_Request *request = adj_bcast_blocks(op) ? NULL : &b->requests[b->nrequests++];
  if (plan->algorithm == ADJ_SUM_REDUCE_SCATTER) {
    size_t kept = (size_t)plan->counts[plan->rank] * esize;
    void *chunk = root ? data : plan->scratch;
    ADJ_CALL_MPI(request ? MPI_Ireduce_scatter(send, chunk, plan->counts, b->type, MPI_SUM, comm, request)
                         : MPI_Reduce_scatter(send, chunk, plan->counts, b->type, MPI_SUM, comm));
    if (bytes > kept) adj_op_count_send(op, bytes - kept);
    if (kept) adj_op_count_recv(op, kept);
    /* Split phase: end posts the gather once every first phase is done. */
    b->second_phase = request != NULL;
    return request ? ADJ_SUCCESS : adj_bcast_post_gather(op, plan, comm, root, data, count);
  }
  if (plan->algorithm == ADJ_SUM_ALLREDUCE) {
    void *sum = root ? data : plan->scratch;
    ADJ_CALL_MPI(request ? MPI_Iallreduce(send, sum, count, b->type, MPI_SUM, comm, request)
                         : MPI_Allreduce(send, sum, count, b->type, MPI_SUM, comm));
    adj_op_count_send(op, bytes);
    adj_op_count_recv(op, bytes);
    return ADJ_SUCCESS;
  }
  void *sum = root ? data : NULL;
  ADJ_CALL_MPI(request ? MPI_Ireduce(send, sum, count, b->type, MPI_SUM, 0, comm, request)
                       : MPI_Reduce(send, sum, count, b->type, MPI_SUM, 0, comm));
  if (root) adj_op_count_recv(op, bytes);
  else adj_op_count_send(op, bytes);
  return ADJ_SUCCESS;
}

/* The sum starts from the source block: zero, or this worker's own copy, or
 * (accumulating) the block's contents plus that copy. */
static int adj_bcast_post_sums(adj_op *op, bool add, const adj_tensor *destination, adj_tensor *source) {
  adj_bcast *b = op->impl;
  size_t esize = adj_dtype_size(op->dtype);
  bool root_sums = b->root_comm != MPI_COMM_NULL && b->source_count > 0;
  bool starts_from_copy = b->self_destination && !add && destination->data != source->data;
  /* Such a root gives MPI its copy as the separate send buffer instead of
   * copying it into the block first; the chain adds into the block itself. */
  const void *own =
      starts_from_copy && root_sums && b->root_sum.algorithm != ADJ_SUM_CHAIN ? destination->data : NULL;
  if (!b->self_destination) {
    if (b->is_source && !add) adj_tensor_zero(source);
  } else if (add) {
    adj_dtype_add(op->dtype, source->data, destination->data, b->source_count);
  } else if (starts_from_copy && !own) {
    memcpy(source->data, destination->data, (size_t)b->source_count * esize);
  }
  b->second_phase = false;
  if (root_sums) ADJ_CALL(adj_bcast_post_sum(op, &b->root_sum, b->root_comm, true, source->data, own, b->source_count));
  /* MPI only reads a leaf's block; its signature is not const. */
  if (b->leaf_comm != MPI_COMM_NULL && b->destination_count > 0)
    ADJ_CALL(adj_bcast_post_sum(op, &b->leaf_sum, b->leaf_comm, false, (void *)destination->data, NULL,
                                b->destination_count));
  return ADJ_SUCCESS;
}

/* The one routine for both operators and both directions.  In broadcast terms
 * the domain holds source blocks and the range destination copies; a
 * sum-reduce swaps domain and range, and so swaps which direction copies. */
static int adj_bcast_begin(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  adj_bcast *b = op->impl;
  b->nrequests = 0;
  bool copies = (direction == ADJ_FORWARD) != b->swapped;
  return copies ? adj_bcast_post_copies(op, in, out) : adj_bcast_post_sums(op, op->accumulate[direction], in, out);
}

static int adj_bcast_end(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  adj_bcast *b = op->impl;
  bool copies = (direction == ADJ_FORWARD) != b->swapped;
  ADJ_CALL(adj_bcast_complete_chains(op, copies, in, out));
  int count = b->nrequests;
  b->nrequests = 0;
  ADJ_CALL(adj_wait_all(count, b->requests, op->wait));
  if (!b->second_phase) return ADJ_SUCCESS;
  /* Reduce-scatter done: gather the summed chunks to each group's root.  Every
   * first phase this worker takes part in is complete before any gather is
   * posted, and each of those needed only first-phase posts of the others. */
  b->second_phase = false;
  adj_tensor *source = copies ? (adj_tensor *)in : out;
  if (b->root_comm != MPI_COMM_NULL && b->source_count > 0 && b->root_sum.algorithm == ADJ_SUM_REDUCE_SCATTER)
    ADJ_CALL(adj_bcast_post_gather(op, &b->root_sum, b->root_comm, true, source->data, b->source_count));
  if (b->leaf_comm != MPI_COMM_NULL && b->destination_count > 0 && b->leaf_sum.algorithm == ADJ_SUM_REDUCE_SCATTER)
    ADJ_CALL(adj_bcast_post_gather(op, &b->leaf_sum, b->leaf_comm, false, NULL, b->destination_count));
  count = b->nrequests;
  b->nrequests = 0;
  return adj_wait_all(count, b->requests, op->wait);
}

static void adj_bcast_free(adj_bcast *b) {
  if (!b) return;
  free(b->root_sum.counts), free(b->root_sum.displs);
  free(b->leaf_sum.counts), free(b->leaf_sum.displs);
  free(b->root_sum.chain.partial), free(b->root_sum.chain.requests);
  free(b->leaf_sum.chain.partial), free(b->leaf_sum.chain.requests);
  free(b->root_sum.scratch), free(b->leaf_sum.scratch);
  if (b->root_comm != MPI_COMM_NULL) MPI_Comm_free(&b->root_comm);
  if (b->leaf_comm != MPI_COMM_NULL) MPI_Comm_free(&b->leaf_comm);
  free(b);
}

static void adj_bcast_destroy(adj_op *op) {
  adj_bcast_free(op->impl);
  op->impl = NULL;
}

/* ---- creation --------------------------------------------------------------------- */

/* No group to share a block with, and this worker's block (if any) is its own
 * destination: both directions leave y = x here and move nothing. */
static bool adj_bcast_is_identity(const adj_bcast *b) {
  if (b->root_comm != MPI_COMM_NULL || b->leaf_comm != MPI_COMM_NULL) return false;
  return b->self_destination || (b->source_count == 0 && b->destination_count == 0);
}

/* Allocates the plan and checks the local block sizes.  Local failures only:
 * the caller agrees on the outcome. */
static int adj_bcast_plan(const char *name, bool swapped, adj_dtype dtype, const int64_t *source_shape,
                          const int64_t *destination_shape, int rank, adj_bcast **plan) {
  adj_bcast *b = calloc(1, sizeof *b);
  *plan = b;
  ADJ_CHECK(b, ADJ_ERR_MEM, "%s: out of memory", name);
  b->swapped = swapped;
  b->type = adj_dtype_mpi(dtype);
  b->root_comm = b->leaf_comm = MPI_COMM_NULL;
  ADJ_CALL(adj_bcast_count(name, rank, source_shape, &b->source_count));
  return adj_bcast_count(name, rank, destination_shape, &b->destination_count);
}

/* Creates the operator once the shared arguments are validated.  Broadcast
 * terms throughout: x on P_x is the source, py the destination partition. */
static int adj_bcast_create(const char *name, bool swapped, adj_sum_algorithm chosen, adj_dtype dtype,
                            const adj_decomposition *x, const adj_partition *py, adj_op **op) {
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
  /* Collective on the whole communicator, so before anything that can fail
   * on one rank alone. */
  /* The summing direction adds into its output natively when asked. */
  (*op)->can_accumulate[swapped ? ADJ_FORWARD : ADJ_ADJOINT] = true;
  adj_algorithm_table table = {0};
  if (chosen == ADJ_SUM_AUTO) status = adj_algorithm_table_load((*op)->comm, &table);
  if (!status) status = adj_bcast_create_groups(b, (*op)->comm, px, py, members);
  free(members);
  if (!status) status = adj_bcast_plan_sums(*op, chosen, &table);
  (*op)->identity = adj_bcast_is_identity(b);
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
  ADJ_CHECK(adj_dtype_valid(dtype), ADJ_ERR_DTYPE, "%s: invalid dtype %d (expected float32, float64, int32, int64 or uint8)", name,
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
  return adj_bcast_create("broadcast", false, ADJ_SUM_AUTO, dtype, x, p_y, op);
}

int adj_broadcast_create_summing_by_all_reduce(adj_dtype dtype, const adj_decomposition *x, const adj_partition *p_y,
                                               adj_op **op) {
  ADJ_CALL(adj_bcast_validate("broadcast", dtype, x, p_y, op));
  return adj_bcast_create("broadcast", false, ADJ_SUM_ALLREDUCE, dtype, x, p_y, op);
}

int adj_sum_reduce_create(adj_dtype dtype, const adj_partition *p_x, const adj_decomposition *y, adj_op **op) {
  ADJ_CALL(adj_bcast_validate("sum-reduce", dtype, y, p_x, op));
  return adj_bcast_create("sum-reduce", true, ADJ_SUM_AUTO, dtype, y, p_x, op);
}

/* Gradient reducer: the data-parallel gradient all-sum-reduce of a list of
 * tensors, in buckets, split-phase, so it overlaps the backward pass
 * (ShallowSpeed's interleaved data parallelism with PyTorch DDP's buckets;
 * docs/parallelism.md section 3).
 *
 * Workers of a partition that agree on every coordinate not in `dims` form a
 * group (one group = the replicas of one model shard); each group sums its
 * members' tensors and every member receives the sum.  As an operator this is
 * the all-sum-reduce A = B R of the DistDL paper on the concatenation of the
 * tensors: self-adjoint, so the dot-product test applies as to any other
 * (adj_gradient_reducer_op).
 *
 * Buckets.  The tensors are listed in the order their values become final
 * (a network's parameters in reverse layer order) and cut into consecutive
 * buckets: a bucket takes tensors while its bytes stay within its cap
 * (first_bucket_bytes for bucket 0, bucket_bytes after), a tensor larger than
 * the cap gets a bucket of its own, and a cap of 0 gives one bucket per
 * tensor.  Each bucket is one contiguous buffer and its tensors are views into
 * it: tensors already adjacent in memory (a network's packed gradients, in
 * either order) are used where they are; otherwise the reducer moves them into
 * storage of its own and repoints them, so no copy happens per step.  Every
 * member of a group holds equal shapes, so the cut is the same on all of them.
 *
 * Posting.  adj_gradient_reducer_ready marks a tensor final; a bucket whose
 * tensors are all final is posted (its all-sum-reduce's begin) once every
 * lower-index bucket has been, so every rank posts in bucket-index order, as
 * MPI's nonblocking collectives require.  adj_gradient_reducer_poke tests the
 * outstanding buckets (MPI progress while the caller computes) and
 * adj_gradient_reducer_wait posts what is left and completes everything: the
 * one wait before an optimizer step.  Between a bucket's post and the wait its
 * tensors must not be touched.
 *
 * Counters: payload bytes and messages (one per bucket reduction, as the
 * all-sum-reduce counts them), the logical per-rank volume of the all-reduce
 * algorithm the spec's cost model uses (2 (q-1)/q times the payload for a group
 * of q), the seconds the waits blocked, and the seconds spent posting and
 * poking during the backward. */
#ifndef ADJOIN_GRADIENT_REDUCER_H
#define ADJOIN_GRADIENT_REDUCER_H

#include <stdint.h>

#include "adjoin/op.h"
#include "adjoin/partition.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* PyTorch DDP's caps (bucket_cap_mb = 25, first bucket 1 MiB). */
#define ADJ_REDUCER_DEFAULT_BUCKET_BYTES ((int64_t)25 << 20)
#define ADJ_REDUCER_DEFAULT_FIRST_BUCKET_BYTES ((int64_t)1 << 20)
/* A cap no tensor list reaches: one bucket for everything. */
#define ADJ_REDUCER_UNLIMITED INT64_MAX

typedef enum adj_reducer_event {
  ADJ_REDUCER_POSTED = 0,     /* bucket's reduction posted */
  ADJ_REDUCER_COMPLETED = 1,  /* bucket's reduction seen complete (by a poke or the wait) */
  ADJ_REDUCER_WAIT_BEGIN = 2, /* the wait starts (bucket -1) */
  ADJ_REDUCER_WAIT_END = 3    /* the wait returns (bucket -1) */
} adj_reducer_event;

typedef struct adj_gradient_reducer_config {
  adj_dtype dtype;
  const adj_partition *partition;   /* the replica grid; ranks outside it keep their tensors */
  int ndims;                        /* partition dimensions reduced over (the replica axes) */
  const int *dims;
  int n;                            /* tensors, in the order they become final */
  adj_tensor *const *tensors;       /* this worker's blocks; may be repointed (see above) */
  int64_t bucket_bytes;             /* cap of buckets 1, 2, ...; 0 = one per tensor */
  int64_t first_bucket_bytes;       /* cap of bucket 0; 0 = one tensor */
  /* Optional: called on every event (tracing); bucket is -1 for the wait. */
  void (*event)(void *ctx, adj_reducer_event event, int bucket);
  void *event_ctx;
} adj_gradient_reducer_config;

typedef struct adj_gradient_reducer adj_gradient_reducer;

typedef struct adj_reducer_counters {
  uint64_t reductions;      /* completed rounds (wait calls that reduced) */
  uint64_t bytes;           /* payload bytes reduced (sum of bucket bytes) */
  uint64_t messages;        /* bucket all-reduces posted (groups of 1 post none) */
  double logical_bytes;     /* per-rank all-reduce volume: 2 (q-1)/q x payload */
  double wait_seconds;      /* time the waits blocked */
  double progress_seconds;  /* time in posts and pokes during the backward (the
                               reduction's cost the overlap does not hide) */
} adj_reducer_counters;

/* Plans the buckets and creates one all-sum-reduce per bucket on the group's
 * communicator.  Bad arguments (negative cap, NULL tensor, wrong dtype, shapes
 * that differ within a group) fail on every rank of the partition's base.
 * Collective on the partition's base communicator. */
int adj_gradient_reducer_create(const adj_gradient_reducer_config *config, adj_gradient_reducer **reducer);
/* Collective on the base (communicators are freed).  NULL-safe. */
void adj_gradient_reducer_destroy(adj_gradient_reducer **reducer);

/* Tensor `index` (0..n-1) is final; posts every bucket that became ready in
 * index order.  Not collective (every member posts the same buckets). */
int adj_gradient_reducer_ready(adj_gradient_reducer *reducer, int index);
/* Tests the posted, unfinished buckets in index order, stopping at the first
 * still running (one MPI_Test progresses them all).  Not collective. */
int adj_gradient_reducer_poke(adj_gradient_reducer *reducer);
/* Posts the buckets not yet posted, completes all, and resets the ready marks
 * for the next round.  Collective over each group. */
int adj_gradient_reducer_wait(adj_gradient_reducer *reducer);

int adj_gradient_reducer_buckets(const adj_gradient_reducer *reducer);
/* Bucket b: first tensor index, tensor count and bytes. */
int adj_gradient_reducer_bucket(const adj_gradient_reducer *reducer, int b, int *first, int *count, int64_t *bytes);
/* Size of this worker's group (the replicas summed). */
int adj_gradient_reducer_group_size(const adj_gradient_reducer *reducer);
void adj_gradient_reducer_get_counters(const adj_gradient_reducer *reducer, adj_reducer_counters *counters);
void adj_gradient_reducer_reset_counters(adj_gradient_reducer *reducer);

/* The reducer as an operator on the concatenation of the buckets (local
 * shape [total elements]): forward = adjoint = the group sum, bucket by
 * bucket, through the same bucket reductions.  Owned by the reducer (valid
 * while it lives; do not destroy it); for the dot-product test. */
adj_op *adj_gradient_reducer_op(adj_gradient_reducer *reducer);

/* Parses a bucket cap from text: bytes as a non-negative integer with an
 * optional suffix K, M, G (KiB, MiB, GiB; "KiB"/"MiB"/"GiB" also accepted), or
 * "unlimited".  A negative number, a fraction, trailing garbage or an overflow
 * is ADJ_ERR_ARG naming the text.  Not collective. */
int adj_bucket_cap_parse(const char *text, int64_t *bytes);

ADJ_END_DECLS

#endif

/* Distributed batch normalisation (see batchnorm_layer.h for the maths, the
 * statistics exchange and the parameter placement).
 *
 * Each call makes exactly one float64 all-sum-reduce over the workers that
 * share a channel block:
 *   forward   slots of (count, mean, M2) per worker + the owner's gamma, beta
 *   jvp       sum dx, sum xhat dx + the owner's gamma and beta tangents
 *   backward  sum dy, sum xhat dy (gradients of beta and gamma, and the
 *             projection's means)
 * Inactive workers and workers holding no channel call it with zero volume.
 * Under SyncBN each also gathers the replicas' results over `across` (one
 * small all-gather, combined in replica order). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/all_sum_reduce.h"
#include "adjoin/batchnorm.h"
#include "adjoin/batchnorm_layer.h"
#include "dist_layer_impl.h"
#include "fault_impl.h"
#include "op_after_impl.h"

typedef struct adj_batchnorm {
  double eps, momentum;
  bool affine, track, training;
  int64_t n, c, s;        /* this worker's block as (batch, channels, spatial volume) */
  int64_t count;          /* M: values per channel over the whole tensor */
  int groups, slot;       /* workers per channel group, this worker's place among them */
  bool owner;             /* holds gamma and beta for its channel block */
  bool batch_stats;       /* the last forward normalised with batch statistics */
  int64_t tracked;        /* training forwards (num_batches_tracked) */
  adj_op *stats_op;       /* float64 all-sum-reduce of (3 groups + 2) c values */
  adj_op *sums_op;        /* float64 all-sum-reduce of 4 c values */
  adj_tensor stats, sums; /* their buffers */
  adj_tensor running_mean, running_var; /* (c) float64 */
  adj_tensor x;           /* a view of the last forward's input: the kernels recompute xhat from it */
  double *work;           /* ADJ_BN_WORK arrays of c doubles */
  int replicas;           /* SyncBN over `across` when > 1 */
  MPI_Comm across;        /* the layer's duplicate; MPI_COMM_NULL without SyncBN */
  adj_wait_policy wait;
  double *own, *gathered; /* (3 c) this replica's statistics, replicas x (3 c) everyone's */
} adj_batchnorm;

/* The per-channel figures: statistics, parameters, the projection's means a
 * and b, and the map's slope and shift (batchnorm.h). */
enum {
  ADJ_BN_MEAN = 0, ADJ_BN_INV, ADJ_BN_SCALE, ADJ_BN_GAMMA, ADJ_BN_BETA, ADJ_BN_A, ADJ_BN_B, ADJ_BN_SLOPE,
  ADJ_BN_SHIFT, ADJ_BN_WORK
};

static double *adj_bn_work(adj_batchnorm *b, int which) { return b->work + (int64_t)which * b->c; }

static bool adj_bn_uses_batch_stats(const adj_batchnorm *b) { return b->training || !b->track; }

/* The call's one reduction of `buffer` after this worker's local step, whose
 * status *local carries the failure-injection site `site` (fault_impl.h).
 * Every rank makes the reduction even when the local step failed on some, so
 * none is left waiting in it; the failure stays in *local for the caller to
 * return after its arithmetic (the same on every rank, so the running
 * statistics stay alike) and for the layer's agreement to spread.  Returns
 * the reduction's own failure. */
static int adj_bn_reduce(adj_layer *l, adj_op *op, adj_tensor *buffer, const char *site, int *local) {
  *local = adj_fault_at(l->name, site, *local);
  int status = adj_op_apply_after(*local, op, ADJ_FORWARD, buffer, buffer);
  return status == *local ? ADJ_SUCCESS : status;
}

/* ---- application ------------------------------------------------------------------------ */

/* Owner's parameter (or tangent) values into dst[0..c), others zeros; without
 * affine parameters, `fallback` (1 for gamma, 0 for beta and tangents). */
static void adj_bn_put_parameter(const adj_layer *l, const adj_batchnorm *b, int index, bool tangent, double *dst) {
  if (!b->affine || !b->owner) {
    for (int64_t j = 0; j < b->c; j++) dst[j] = 0;
    return;
  }
  const adj_parameter *p = l->parameters[index];
  const adj_tensor *t = tangent ? &p->tangent : &p->value;
  for (int64_t j = 0; j < b->c; j++) dst[j] = adj_tensor_get(t, j);
}

/* Chan's parallel combination of `parts` (count, mean, M2) triples of
 * channel j, laid out as 3 c values per part, in part order: the same bits
 * on every worker that combines them.  *count (may be NULL) gets the total. */
static void adj_bn_combine(int64_t c, int parts, const double *triples, int64_t j, double *count, double *mean,
                           double *m2) {
  double n = 0, mu = 0, q = 0;
  for (int g = 0; g < parts; g++) {
    const double *s = triples + (int64_t)g * 3 * c;
    double nb = s[j], mb = s[c + j], qb = s[2 * c + j];
    if (nb <= 0) continue;
    double total = n + nb, delta = mb - mu;
    mu += delta * nb / total;
    q += qb + delta * delta * n * nb / total;
    n = total;
  }
  if (count) *count = n;
  *mean = mu;
  *m2 = q;
}

/* SyncBN: the `width` c values of every replica gathered over `across` into
 * b->gathered, replica by replica. */
static int adj_bn_gather(adj_batchnorm *b, const double *mine, int width) {
  MPI_Request r;
  int count = width * (int)b->c;
  ADJ_CALL_MPI(MPI_Iallgather(mine, count, MPI_DOUBLE, b->gathered, count, MPI_DOUBLE, b->across, &r));
  return adj_wait_all(1, &r, b->wait);
}

/* SyncBN: (count, mean, M2) of the replica's channels, from its combined
 * statistics, combined with every other replica's in replica order. */
static int adj_bn_sync_statistics(adj_batchnorm *b, double *mean, double *m2, double *count) {
  double *own = b->own;
  for (int64_t j = 0; j < b->c; j++) own[j] = count[j], own[b->c + j] = mean[j], own[2 * b->c + j] = m2[j];
  ADJ_CALL(adj_bn_gather(b, own, 3));
  for (int64_t j = 0; j < b->c; j++) adj_bn_combine(b->c, b->replicas, b->gathered, j, &count[j], &mean[j], &m2[j]);
  return ADJ_SUCCESS;
}

/* Batch statistics (or running ones), gamma and beta of the block's channels
 * into the work arrays; updates the running statistics in training.  *local:
 * this worker's failure (see adj_bn_reduce). */
static int adj_bn_statistics(adj_layer *l, adj_batchnorm *b, const adj_tensor *x, int *local) {
  double *slots = b->stats.data, *tail = slots + (int64_t)3 * b->groups * b->c;
  adj_tensor_zero(&b->stats);
  bool batch = adj_bn_uses_batch_stats(b);
  if (batch && b->c > 0) {
    double *mine = slots + (int64_t)3 * b->slot * b->c;
    for (int64_t j = 0; j < b->c; j++) mine[j] = (double)(b->n * b->s);
    *local = adj_batchnorm_moments(x, mine + b->c, mine + 2 * b->c);
  }
  adj_bn_put_parameter(l, b, 0, false, tail);
  adj_bn_put_parameter(l, b, 1, false, tail + b->c);
  ADJ_CALL(adj_bn_reduce(l, b->stats_op, &b->stats, "forward local", local));
  double *mean = adj_bn_work(b, ADJ_BN_MEAN), *inv = adj_bn_work(b, ADJ_BN_INV);
  double *gamma = adj_bn_work(b, ADJ_BN_GAMMA), *beta = adj_bn_work(b, ADJ_BN_BETA);
  double *rm = b->running_mean.data, *rv = b->running_var.data;
  /* Per channel: M2 in inv, the value count in scale, until they are set. */
  double *m2 = inv, *count = adj_bn_work(b, ADJ_BN_SCALE);
  for (int64_t j = 0; batch && j < b->c; j++) {
    adj_bn_combine(b->c, b->groups, slots, j, NULL, &mean[j], &m2[j]);
    count[j] = (double)b->count;
  }
  if (batch && b->replicas > 1) ADJ_CALL(adj_bn_sync_statistics(b, mean, m2, count));
  for (int64_t j = 0; j < b->c; j++) {
    double var;
    if (batch) {
      double m = count[j];
      var = m2[j] / m;
      if (b->training && b->track) {
        rm[j] = (1 - b->momentum) * rm[j] + b->momentum * mean[j];
        rv[j] = (1 - b->momentum) * rv[j] + b->momentum * m2[j] / (m - 1);
      }
    } else {
      mean[j] = rm[j];
      var = rv[j];
    }
    inv[j] = 1 / sqrt(var + b->eps);
    gamma[j] = b->affine ? tail[j] : 1;
    beta[j] = b->affine ? tail[b->c + j] : 0;
    adj_bn_work(b, ADJ_BN_SCALE)[j] = gamma[j] * inv[j];
  }
  if (b->training && b->track) b->tracked++;
  b->batch_stats = batch;
  return ADJ_SUCCESS;
}

static int adj_batchnorm_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  adj_batchnorm *b = l->impl;
  int local = ADJ_SUCCESS;
  ADJ_CALL(adj_bn_statistics(l, b, x, &local));
  adj_tensor_view(&b->x, x->dtype, x->rank, x->shape, x->data);
  /* y = gamma xhat + beta = scale (x - mean) + beta */
  adj_batchnorm_map map = {.mean = adj_bn_work(b, ADJ_BN_MEAN), .slope = adj_bn_work(b, ADJ_BN_SCALE),
                           .shift = adj_bn_work(b, ADJ_BN_BETA)};
  if (!local) local = adj_batchnorm_apply(NULL, x, &map, y);
  return local;
}

/* Per channel: a = mean(v), bb = mean(v xhat) over the whole tensor, from the
 * reduced sums (zero when the map does not project: evaluation statistics);
 * under SyncBN over every replica's tensor, the replicas' sums added in
 * replica order. */
static int adj_bn_means(adj_batchnorm *b, const double *sums) {
  double *a = adj_bn_work(b, ADJ_BN_A), *bb = adj_bn_work(b, ADJ_BN_B), m = (double)b->count;
  for (int64_t j = 0; j < b->c; j++) {
    a[j] = b->batch_stats ? sums[j] / m : 0;
    bb[j] = b->batch_stats ? sums[b->c + j] / m : 0;
  }
  if (b->replicas <= 1 || !b->batch_stats) return ADJ_SUCCESS;
  ADJ_CALL(adj_bn_gather(b, sums, 2));
  for (int64_t j = 0; j < b->c; j++) {
    double sa = 0, sb = 0;
    for (int r = 0; r < b->replicas; r++) {
      sa += b->gathered[(int64_t)r * 2 * b->c + j];
      sb += b->gathered[(int64_t)r * 2 * b->c + b->c + j];
    }
    a[j] = sa / (m * b->replicas), bb[j] = sb / (m * b->replicas);
  }
  return ADJ_SUCCESS;
}

/* sums[0..2c) = sum v, sum v xhat over this block (zeros for v NULL). */
static int adj_bn_local_sums(adj_batchnorm *b, const adj_tensor *v, double *sums) {
  if (!v || b->c == 0) return ADJ_SUCCESS;
  return adj_batchnorm_sums(v, &b->x, adj_bn_work(b, ADJ_BN_MEAN), adj_bn_work(b, ADJ_BN_INV), sums, sums + b->c);
}

/* out = scale (v - a - xhat bb) + g xhat + h per channel (g, h NULL for 0):
 * the jvp (g, h the parameter tangents) and the input gradient, as the
 * kernels' map of v and x. */
static int adj_bn_project(adj_batchnorm *b, const adj_tensor *v, const double *g, const double *h, adj_tensor *out) {
  const double *scale = adj_bn_work(b, ADJ_BN_SCALE), *inv = adj_bn_work(b, ADJ_BN_INV);
  const double *a = adj_bn_work(b, ADJ_BN_A), *bb = adj_bn_work(b, ADJ_BN_B);
  double *slope = adj_bn_work(b, ADJ_BN_SLOPE), *shift = adj_bn_work(b, ADJ_BN_SHIFT);
  for (int64_t j = 0; j < b->c; j++) {
    slope[j] = ((g ? g[j] : 0) - scale[j] * bb[j]) * inv[j];
    shift[j] = (h ? h[j] : 0) - scale[j] * a[j];
  }
  adj_batchnorm_map map = {.mean = adj_bn_work(b, ADJ_BN_MEAN), .scale = scale, .slope = slope, .shift = shift};
  return adj_batchnorm_apply(v, &b->x, &map, out);
}

static int adj_batchnorm_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  adj_batchnorm *b = l->impl;
  double *sums = b->sums.data;
  adj_tensor_zero(&b->sums);
  int local = adj_bn_local_sums(b, dx, sums);
  adj_bn_put_parameter(l, b, 0, true, sums + 2 * b->c);
  adj_bn_put_parameter(l, b, 1, true, sums + 3 * b->c);
  ADJ_CALL(adj_bn_reduce(l, b->sums_op, &b->sums, "jvp local", &local));
  ADJ_CALL(adj_bn_means(b, sums));
  const double *dg = b->affine ? sums + 2 * b->c : NULL, *db = b->affine ? sums + 3 * b->c : NULL;
  if (!local) local = adj_bn_project(b, dx, dg, db, dy);
  return local;
}

static int adj_batchnorm_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  adj_batchnorm *b = l->impl;
  double *sums = b->sums.data;
  adj_tensor_zero(&b->sums);
  int local = adj_bn_local_sums(b, dy, sums);
  ADJ_CALL(adj_bn_reduce(l, b->sums_op, &b->sums, "backward local", &local));
  if (b->affine && b->owner) {
    adj_tensor *gg = &l->parameters[0]->grad, *gb = &l->parameters[1]->grad;
    for (int64_t j = 0; j < b->c; j++) {
      adj_tensor_set(gg, j, adj_tensor_get(gg, j) + sums[b->c + j]);
      adj_tensor_set(gb, j, adj_tensor_get(gb, j) + sums[j]);
    }
  }
  if (!dx) return local;
  ADJ_CALL(adj_bn_means(b, sums));
  if (!local) local = adj_bn_project(b, dy, NULL, NULL, dx);
  return local;
}

static void adj_batchnorm_free(adj_batchnorm *b) {
  if (!b) return;
  adj_op_destroy(&b->stats_op), adj_op_destroy(&b->sums_op);
  adj_tensor_destroy(&b->stats), adj_tensor_destroy(&b->sums);
  adj_tensor_destroy(&b->running_mean), adj_tensor_destroy(&b->running_var);
  free(b->work);
  free(b->own), free(b->gathered);
  if (b->across != MPI_COMM_NULL) MPI_Comm_free(&b->across);
  free(b);
}

static void adj_batchnorm_destroy(adj_layer *l) { adj_batchnorm_free(l->impl); }

static const adj_layer_methods adj_batchnorm_methods = {adj_batchnorm_forward, adj_batchnorm_jvp,
                                                        adj_batchnorm_backward, adj_batchnorm_destroy};

/* ---- validation ------------------------------------------------------------------------- */

static int adj_batchnorm_validate(const char *who, const adj_batchnorm_layer_config *c) {
  ADJ_CALL(adj_layer_config_check(who, c, c ? c->dtype : ADJ_FLOAT64, c ? c->input : NULL));
  int rank = adj_decomposition_rank(c->input);
  ADJ_CHECK(rank >= 2 && rank <= 5, ADJ_ERR_SIZE,
            "%s: the input has rank %d; batch norm takes (N, C) or (N, C, spatial...) with 0-3 spatial dimensions",
            who, rank);
  const int64_t *shape = adj_decomposition_global_shape(c->input);
  ADJ_CHECK(c->num_features == shape[1], ADJ_ERR_SIZE,
            "%s: num_features is %lld but the input has %lld channels (dimension 1)", who,
            (long long)c->num_features, (long long)shape[1]);
  ADJ_CHECK(c->eps > 0 && isfinite(c->eps), ADJ_ERR_ARG, "%s: eps is %g; it must be a finite value > 0", who, c->eps);
  ADJ_CHECK(c->momentum >= 0 && c->momentum <= 1, ADJ_ERR_ARG, "%s: momentum is %g; it must lie in [0, 1]", who,
            c->momentum);
  int64_t count = shape[0];
  for (int d = 2; d < rank; d++) count *= shape[d];
  ADJ_CHECK(count >= 2, ADJ_ERR_SIZE,
            "%s: %lld value(s) per channel (batch x spatial); batch statistics need at least 2", who,
            (long long)count);
  return ADJ_SUCCESS;
}

/* ---- planning --------------------------------------------------------------------------- */

/* gamma and beta (C) on a P_c partition of the group owners (batch and spatial
 * coordinates 0), cut like the input's channels. */
static int adj_batchnorm_parameter_layout(const adj_decomposition *input, adj_decomposition **layout) {
  const adj_partition *p = adj_decomposition_partition(input);
  int pc = adj_partition_shape(p)[1], ranks[64], coords[ADJ_MAX_RANK] = {0};
  ADJ_CHECK(pc <= 64, ADJ_ERR_ARG, "batch norm layer: %d channel parts; at most 64 are supported", pc);
  for (int k = 0; k < pc; k++) {
    coords[1] = k;
    ranks[k] = adj_partition_rank_at(p, coords);
  }
  adj_partition *owners;
  ADJ_CALL(adj_partition_create(adj_partition_base_comm(p), 1, &pc, pc, ranks, &owners));
  const int64_t *cuts[1] = {adj_decomposition_cuts(input, 1)};
  int status = adj_decomposition_create_explicit(owners, 1, &adj_decomposition_global_shape(input)[1], cuts, layout);
  adj_partition_destroy(&owners);
  return status;
}

/* This worker's block geometry and its slot in its channel group. */
static void adj_batchnorm_geometry(adj_batchnorm *b, const adj_decomposition *input) {
  const adj_partition *p = adj_decomposition_partition(input);
  adj_box block = adj_decomposition_local_block(input);
  int rank = adj_decomposition_rank(input);
  const int *parts = adj_partition_shape(p), *coords = adj_partition_coords(p);
  b->n = block.extent[0];
  b->c = block.extent[1];
  b->s = 1;
  for (int d = 2; d < rank; d++) b->s *= block.extent[d];
  const int64_t *shape = adj_decomposition_global_shape(input);
  b->count = shape[0];
  for (int d = 2; d < rank; d++) b->count *= shape[d];
  b->groups = adj_partition_size(p) / parts[1];
  b->slot = 0;
  b->owner = adj_partition_active(p);
  for (int d = 0; d < rank; d++) {
    if (d == 1) continue;
    b->slot = b->slot * parts[d] + (adj_partition_active(p) ? coords[d] : 0);
    if (adj_partition_active(p) && coords[d] != 0) b->owner = false;
  }
  if (!adj_partition_active(p)) b->n = b->c = b->s = 0;
}

/* Buffers (this rank only; the caller agrees). */
static int adj_batchnorm_buffers(adj_batchnorm *b, adj_dtype dtype, const adj_box *block) {
  int64_t stats = (3 * (int64_t)b->groups + 2) * b->c, sums = 4 * b->c;
  ADJ_CALL(adj_tensor_create(&b->stats, ADJ_FLOAT64, 1, &stats));
  ADJ_CALL(adj_tensor_create(&b->sums, ADJ_FLOAT64, 1, &sums));
  ADJ_CALL(adj_tensor_create(&b->running_mean, ADJ_FLOAT64, 1, &b->c));
  ADJ_CALL(adj_tensor_create(&b->running_var, ADJ_FLOAT64, 1, &b->c));
  b->work = calloc((size_t)(ADJ_BN_WORK * b->c + 1), sizeof *b->work);
  b->own = calloc((size_t)(3 * b->c + 1), sizeof *b->own);
  b->gathered = calloc((size_t)(3 * b->c * b->replicas + 1), sizeof *b->gathered);
  ADJ_CHECK(b->work && b->own && b->gathered, ADJ_ERR_MEM, "batch norm layer: out of memory");
  for (int64_t j = 0; j < b->c; j++) adj_tensor_set(&b->running_var, j, 1);
  return ADJ_SUCCESS;
}

/* SyncBN's own duplicate of `across`, which must hold one rank per replica.
 * Collective over every replica's ranks (each rank's across communicator). */
static int adj_batchnorm_across(const adj_batchnorm_layer_config *c, adj_batchnorm *b) {
  int size = 0;
  int status = MPI_Comm_size(c->across, &size) == MPI_SUCCESS && MPI_Comm_dup(c->across, &b->across) == MPI_SUCCESS
                   ? ADJ_SUCCESS
                   : adj_error_set(ADJ_ERR_MPI, "batch norm layer: the replicas' communicator cannot be used");
  if (!status && size != b->replicas)
    status = adj_error_set(ADJ_ERR_ARG, "batch norm layer: %d replicas, but their communicator has %d ranks",
                           b->replicas, size);
  return adj_layer_agree(c->input, status);
}

static int adj_batchnorm_plan(const adj_batchnorm_layer_config *c, adj_batchnorm **out) {
  *out = NULL;
  adj_batchnorm *b = calloc(1, sizeof *b);
  int status = b ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "batch norm layer: out of memory");
  if (b) {
    b->eps = c->eps;
    b->momentum = c->momentum;
    b->affine = !c->no_affine;
    b->track = !c->no_running_stats;
    b->training = true;
    b->across = MPI_COMM_NULL;
    b->replicas = c->replicas > 1 ? c->replicas : 1;
    b->wait = adj_partition_wait_policy(adj_decomposition_partition(c->input));
    adj_batchnorm_geometry(b, c->input);
    adj_box block = adj_decomposition_local_block(c->input);
    status = adj_batchnorm_buffers(b, c->dtype, &block);
  }
  status = adj_layer_agree(c->input, status);
  if (!status && b->replicas > 1) status = adj_batchnorm_across(c, b);
  const adj_partition *p = adj_decomposition_partition(c->input);
  int rank = adj_decomposition_rank(c->input), dims[ADJ_MAX_RANK], nd = 0;
  for (int d = 0; d < rank; d++)
    if (d != 1) dims[nd++] = d;
  if (!status) status = adj_all_sum_reduce_create(ADJ_FLOAT64, p, 1, b->stats.shape, nd, dims, &b->stats_op);
  if (!status) status = adj_all_sum_reduce_create(ADJ_FLOAT64, p, 1, b->sums.shape, nd, dims, &b->sums_op);
  /* The reductions only ever see the layer's own buffers. */
  if (!status) adj_op_set_checks(b->stats_op, false), adj_op_set_checks(b->sums_op, false);
  if (status) adj_batchnorm_free(b);
  else *out = b;
  return status;
}

int adj_batchnorm_layer_create(const adj_batchnorm_layer_config *c, adj_layer **layer) {
  static const char who[] = "batch norm layer";
  *layer = NULL;
  ADJ_CALL(adj_batchnorm_validate(who, c));
  adj_decomposition *params = NULL;
  adj_batchnorm *b = NULL;
  int status = c->no_affine ? ADJ_SUCCESS : adj_batchnorm_parameter_layout(c->input, &params);
  if (!status) status = adj_batchnorm_plan(c, &b);
  char name[64];
  snprintf(name, sizeof name, "batchnorm%dd", adj_decomposition_rank(c->input) == 2 ? 1 : adj_decomposition_rank(c->input) - 2);
  if (!status) status = adj_layer_alloc_between(name, c->dtype, c->input, c->input, &adj_batchnorm_methods, b, layer);
  if (status) adj_batchnorm_free(b);
  if (!status && params) status = adj_layer_add_parameter(*layer, "weight", params);
  if (!status && params) status = adj_layer_add_parameter(*layer, "bias", params);
  if (params && *layer) status = adj_layer_agree(c->input, status);
  if (!status && params && b->owner)
    for (int64_t j = 0; j < b->c; j++) adj_tensor_set(&(*layer)->parameters[0]->value, j, 1);
  if (status) adj_layer_destroy(layer);
  adj_decomposition_destroy(&params);
  return status;
}

/* ---- accessors -------------------------------------------------------------------------- */

bool adj_layer_is_batchnorm(const adj_layer *l) { return l && l->methods.forward == adj_batchnorm_forward; }

static int adj_batchnorm_of(adj_layer *l, adj_batchnorm **b) {
  ADJ_CHECK(l && l->methods.forward == adj_batchnorm_forward, ADJ_ERR_ARG, "batch norm: layer %s is not a batch norm",
            l ? l->name : "(null)");
  *b = l->impl;
  return ADJ_SUCCESS;
}

int adj_batchnorm_layer_set_training(adj_layer *l, bool training) {
  adj_batchnorm *b = NULL;
  ADJ_CALL(adj_batchnorm_of(l, &b));
  b->training = training;
  return ADJ_SUCCESS;
}

int adj_batchnorm_layer_running_stats(adj_layer *l, adj_tensor *mean, adj_tensor *var) {
  adj_batchnorm *b = NULL;
  ADJ_CALL(adj_batchnorm_of(l, &b));
  ADJ_CALL(adj_tensor_view(mean, ADJ_FLOAT64, 1, &b->c, b->running_mean.data));
  return adj_tensor_view(var, ADJ_FLOAT64, 1, &b->c, b->running_var.data);
}

int64_t adj_batchnorm_layer_batches_tracked(const adj_layer *l) {
  return l && l->methods.forward == adj_batchnorm_forward ? ((const adj_batchnorm *)l->impl)->tracked : 0;
}

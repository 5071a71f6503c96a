/* Distributed batch normalisation (PyTorch's BatchNorm1d/2d/3d) over any
 * partition of the batch, channel and spatial dimensions.
 *
 * Input (N, C) or (N, C, spatial...) with 0-3 spatial dimensions, on a
 * partition P_b x P_c x P_0 x ...; the output has the input's layout.  For
 * channel c, with M = N * prod(spatial) values per channel:
 *
 *   training (or track_running_stats off):
 *     mean_c = (1/M) sum x,  var_c = (1/M) sum (x - mean_c)^2   (biased)
 *   evaluation with running statistics:
 *     mean_c = running_mean_c, var_c = running_var_c
 *   y = gamma_c (x - mean_c) / sqrt(var_c + eps) + beta_c
 *
 * Statistics: the workers that share a channel block (equal P_c coordinate)
 * form a group.  Each computes (count, mean, M2) of its own block per channel
 * in two passes with float64 accumulators; the triples are exchanged with one
 * float64 all-sum-reduce over the group (each worker fills its own slot of a
 * zeroed vector, so the sum is a gather), and every member combines them in
 * slot order with Chan's parallel formula.  float32 inputs therefore do not
 * lose the variance to cancellation, and every member of a group computes the
 * same bits, so replicated running statistics stay identical.
 *
 * Running statistics (track_running_stats on, updated by every training
 * forward): running_mean = (1 - momentum) running_mean + momentum mean,
 * running_var = (1 - momentum) running_var + momentum var * M / (M - 1), the
 * UNBIASED batch variance (PyTorch's convention; normalisation itself uses the
 * biased one).  They start at 0 and 1, are replicated on every member of the
 * group (no communication in evaluation) and are not parameters: the
 * optimizer never sees them.
 *
 * Parameters (unless no_affine): 0 "weight" gamma (C) and 1 "bias" beta (C),
 * held ONCE per channel block, on the group's first worker (batch and spatial
 * coordinates 0), cut like the input's channels.  They reach the group inside
 * the same all-sum-reduce as the statistics (the owner adds them, the others
 * zeros), and their gradients (sums over the group of dy xhat and dy) come
 * back in the backward's one all-sum-reduce, so each call makes one
 * reduction.  Initial values: gamma 1, beta 0 (PyTorch's).
 *
 * Jacobian in training mode (batch statistics):
 *   dy = gamma/sigma (dx - mean(dx) - xhat mean(xhat dx)) + dgamma xhat + dbeta
 *   dx = gamma/sigma (dy - mean(dy) - xhat mean(xhat dy)),
 *   grad gamma += sum dy xhat,  grad beta += sum dy
 * (the projection is symmetric, so backward is the exact adjoint of jvp); in
 * evaluation the map is affine in x: dy = gamma/sigma dx + dgamma xhat + dbeta.
 *
 * Synchronised batch norm (SyncBN): when the network is one of R data-
 * parallel replicas (data_parallel.h), each on its own ranks, `replicas` = R
 * and `across` = the ranks holding this layer's same block in every replica
 * (adj_replicas_across_comm) make the batch statistics those of the whole
 * replicated batch: each replica's combined (count, mean, M2) per channel
 * are gathered over `across` and combined in replica order (the same bits
 * in every replica, so the running statistics stay identical), and the
 * backward's and jvp's projection means likewise.  The parameter gradients
 * stay each replica's own (the trainer's reducer sums them over replicas).
 * R <= 1: the replica's own batch (per-replica statistics).  Evaluation with
 * running statistics communicates nothing.
 *
 * Errors, the same message on every rank: momentum outside [0, 1], eps <= 0,
 * num_features that differs from the input's channel extent, an input rank
 * outside 2..5, and fewer than two values per channel (M < 2). */
#ifndef ADJOIN_BATCHNORM_LAYER_H
#define ADJOIN_BATCHNORM_LAYER_H

#include <mpi.h>
#include <stdbool.h>

#include "adjoin/decomposition.h"
#include "adjoin/layer.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_batchnorm_layer_config {
  adj_dtype dtype;
  const adj_decomposition *input; /* (N, C, spatial...) on any partition of the same rank */
  int64_t num_features;           /* C; must equal the input's channel extent */
  double eps;                     /* > 0 (PyTorch's default is 1e-5) */
  double momentum;                /* in [0, 1] (PyTorch's default is 0.1) */
  bool no_affine;                 /* default: learnable gamma and beta */
  bool no_running_stats;          /* track_running_stats off: batch statistics in both modes */
  int replicas;                   /* SyncBN over this many replicas (0 or 1: none) */
  MPI_Comm across;                /* with replicas > 1: one rank per replica, duplicated by the layer */
} adj_batchnorm_layer_config;

int adj_batchnorm_layer_create(const adj_batchnorm_layer_config *config, adj_layer **layer);

/* Training (batch statistics, running statistics updated) or evaluation
 * (running statistics when tracked).  A layer starts in training mode.  Not
 * collective, but every rank must choose the same mode. */
int adj_batchnorm_layer_set_training(adj_layer *layer, bool training);

/* This worker's block (its channel range) of the running mean and variance,
 * float64 views owned by the layer (zero volume where the worker holds no
 * channel).  Writing through them sets the statistics, e.g. from a
 * checkpoint; write the same values on every member of a group. */
int adj_batchnorm_layer_running_stats(adj_layer *layer, adj_tensor *mean, adj_tensor *var);

/* Whether `layer` is a batch norm layer made by adj_batchnorm_layer_create
 * (false for NULL). */
bool adj_layer_is_batchnorm(const adj_layer *layer);

/* Training forwards since creation (PyTorch's num_batches_tracked). */
int64_t adj_batchnorm_layer_batches_tracked(const adj_layer *layer);

ADJ_END_DECLS

#endif

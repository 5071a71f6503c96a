/* The 1.5D affine layer (Gholami et al., papers 000/001: integrated model and
 * batch parallelism) on a P_r x P_c grid of workers.
 *
 * Activations (N, F) are split by batch over P_c and by features over P_r: the
 * worker at grid position (r, c) holds rows [batch block c] and features
 * [feature block r].  The weight W (F_out, F_in) is split by rows over P_r and
 * used by every c; the bias by the same rows.  One layer is
 *
 *   X_c = G x           all-gather over the P_r workers of batch block c: the
 *                       full input features of the batch block (replicated over r)
 *   y_{r,c} = X_c W_r^T + b_r        local GEMM: feature block r of the output
 *
 * so the output is again split by batch over P_c and by features over P_r, and
 * a chain of these layers (with pointwise activations between them) is the
 * paper's algorithm: each layer's all-gather is the previous layer's "gather
 * after f".  The backward follows from the adjoint: G* is a reduce-scatter, so
 * the input gradient costs ((P_r-1)/P_r) N/P_c F_in words per worker, half the
 * paper's all-reduce, and is skipped when no input gradient is asked for (the
 * network's first layer).  Because the output is a plain decomposition (no
 * replicas), a loss computed on it counts each sample once (specs A12).
 *
 * Parameters live on exactly one worker each, like every adjoin layer: W_r and
 * b_r on the c = 0 worker of row block r.  The forward broadcasts them over P_c
 * and the backward returns the gradients by the broadcast's adjoint, a
 * sum-reduce over P_c onto the owner; reduce followed by the next step's
 * broadcast moves what the paper's all-reduce of dW moves.
 *
 * P_r = 1 is pure batch (data) parallelism, P_c = 1 pure model parallelism;
 * both are the same code.  Blocks need not be equal (balanced decomposition,
 * or the input's own cuts); a grid with more row workers than output features
 * is an error.  Creation is collective over the input's base communicator. */
#ifndef ADJOIN_AFFINE15_LAYER_H
#define ADJOIN_AFFINE15_LAYER_H

#include <stdbool.h>

#include "adjoin/layer.h"
#include "adjoin/op.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_affine15_layer_config {
  adj_dtype dtype;
  /* x (N, F_in) on a P_c x P_r partition: dimension 0 (batch) over P_c,
   * dimension 1 (features) over P_r.  Its batch cuts are kept. */
  const adj_decomposition *input;
  int64_t out_features; /* F_out >= P_r */
  bool no_bias;         /* default: with bias */
} adj_affine15_layer_config;

/* Parameters: 0 "weight" (F_out, F_in) rows over P_r on the c = 0 workers,
 * 1 "bias" (F_out) likewise.  Output layout: (N, F_out) on the input's
 * partition, the input's batch cuts, F_out balanced over P_r. */
int adj_affine15_layer_create(const adj_affine15_layer_config *config, adj_layer **layer);

/* What this worker's operators of the layer counted since creation (or the last
 * reset): the input all-gather (forward) / reduce-scatter (backward), and the
 * weight and bias broadcasts (forward) / sum-reduces (backward).  The cost
 * model of plan.h predicts these figures. */
typedef struct adj_affine15_counters {
  adj_op_counters gather;
  adj_op_counters weight;
  adj_op_counters bias;
} adj_affine15_counters;

int adj_affine15_layer_counters(const adj_layer *layer, adj_affine15_counters *counters);
void adj_affine15_layer_reset_counters(adj_layer *layer);

/* The layer's data-movement operators (bias NULL without bias), e.g. to time
 * its communication alone.  The layer keeps ownership. */
int adj_affine15_layer_ops(adj_layer *layer, adj_op **gather, adj_op **weight, adj_op **bias);

ADJ_END_DECLS

#endif

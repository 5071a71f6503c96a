/* Distributed layers: pointwise activations, flatten, pooling, affine and the
 * repartition glue (DistDL paper, section 4 and appendix C), as adj_layer
 * objects (layer.h) built from adjoin's operators and the local kernels of
 * kernels.h.
 *
 * Each layer is a composition  y = R . f_local . B  of linear data movement (B:
 * broadcasts and halo exchanges, R: sum-reduces) around a local kernel, so
 *   jvp       = R . df_local . B        (the forward operators on tangents)
 *   backward  = B* . df_local^T . R*    (the adjoint operators, in reverse)
 * and the Jacobian passes the same dot-product test as the operators.
 *
 *   pointwise  ReLU, leaky ReLU, tanh, sigmoid on any decomposition: no data
 *              moves; each worker applies the kernel to its block.
 *   flatten    (N, d1, ..., dk) -> (N, d1*...*dk) of each worker's block, on
 *              P_b x P_1 x 1 ... x 1: the batch and the first feature
 *              dimension may be partitioned (d1's range [a, b) flattens to
 *              the features [a, b) * d2*...*dk); a block that splits a later
 *              dimension would not flatten into a contiguous range of
 *              features.  Repartition first otherwise.
 *   pool       max or average pooling of (N, C, spatial...) on any partition
 *              P_b x P_c x P_0 x ... (the paper uses P_b = 1; batch and
 *              channel carry kernel 1, so splitting them costs nothing): halo
 *              exchange H with the pooling geometry (halo_geometry.h), trim to
 *              the kernel-input box, local pool.  backward = pool^T then H*.
 *              The output is balanced over the *output* (the geometry's output
 *              ranges); adj_layer_output_layout gives it for the next layer.
 *   affine     y = x W^T + b with W (F_out, F_in) on P_fo x P_fi, x (N, F_in)
 *              on P_b x P_fi, y (N, F_out) on P_b x P_fo: broadcast x and W
 *              onto the work partition P_b x P_fo x P_fi, local GEMM, sum-reduce
 *              over P_fi onto y.  The bias lives on the P_fo x 1 column of the
 *              weight partition (fi = 0) and is broadcast only to the fi = 0
 *              workers of the work partition, so the sum-reduce counts it once.
 *              Parameter gradients arrive on their owners through the
 *              broadcasts' adjoints (sum-reduces over P_b, and over P_fo for
 *              the input), so data-parallel gradient sums are implicit.
 *   repartition  the paper's "transpose" glue around adj_repartition_create.
 *
 * Layouts: every layer here records its global input and output layouts
 * (adj_layer_input_layout / adj_layer_output_layout in layer.h), so a network
 * chains a layer to the next and a test scatters inputs and gathers outputs.
 *
 * The layer keeps references to the decompositions it is given (they are
 * immutable; only their reference counts change).
 *
 * Collective calls and errors: creation is collective over the input
 * decomposition's base communicator.  Configuration errors (kernel larger than
 * the padded input, a partition whose rank does not match the tensor, weights
 * whose F_in differs from the input's features, too few ranks) are detected
 * from arguments every rank shares, so every rank fails with the same message.
 * A NULL dx in jvp or backward is a collective choice: every rank passes NULL
 * or none does (the communication is skipped as a whole); the call checks it
 * with its argument agreement and otherwise fails with ADJ_ERR_ARG everywhere.
 *
 * Parameters are created zero; scatter a global set onto them with
 * adj_layer_set_parameter (or let a network initialise them). */
#ifndef ADJOIN_LAYERS_H
#define ADJOIN_LAYERS_H

#include <stdbool.h>

#include "adjoin/decomposition.h"
#include "adjoin/kernels.h"
#include "adjoin/layer.h"
#include "adjoin/op.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* ---- pointwise ------------------------------------------------------------------------ */

typedef struct adj_activation_layer_config {
  adj_dtype dtype;
  const adj_decomposition *input; /* any layout; the output has the same one */
  adj_activation activation;      /* kind, and negative_slope for leaky ReLU */
} adj_activation_layer_config;

int adj_activation_layer_create(const adj_activation_layer_config *config, adj_layer **layer);

typedef struct adj_flatten_layer_config {
  adj_dtype dtype;
  const adj_decomposition *input; /* (N, d1, ..., dk), k >= 1, on P_b x 1 x ... x 1 */
} adj_flatten_layer_config;

/* Output layout: (N, d1*...*dk) on a P_b x 1 partition of the same ranks, with
 * the input's batch cuts. */
int adj_flatten_layer_create(const adj_flatten_layer_config *config, adj_layer **layer);

/* ---- pooling ------------------------------------------------------------------------- */

typedef struct adj_pool_layer_config {
  adj_dtype dtype;
  adj_pool_kind kind;             /* ADJ_POOL_MAX, ADJ_POOL_AVG or ADJ_POOL_AVG_EXCLUDE_PAD (kernels.h) */
  const adj_decomposition *input; /* (N, C, spatial...): rank 2 + window.spatial_dims */
  adj_window_geometry window;     /* kernel, stride, dilation, padding per spatial dimension */
} adj_pool_layer_config;

int adj_pool_layer_create(const adj_pool_layer_config *config, adj_layer **layer);

/* What this worker's halo exchange of a pool layer counted since creation (or
 * the last reset), forward and adjoint, as plan.h predicts it; ADJ_ERR_ARG
 * when layer is not a pool layer. */
int adj_pool_layer_halo_counters(const adj_layer *layer, adj_op_counters *counters);
void adj_pool_layer_reset_counters(adj_layer *layer);
/* The pool layer's halo exchange (owned by the layer), for a benchmark that
 * times the communication alone; ADJ_ERR_ARG when layer is not a pool layer. */
int adj_pool_layer_halo_op(adj_layer *layer, adj_op **halo);

/* ---- affine -------------------------------------------------------------------------- */

typedef struct adj_affine_layer_config {
  adj_dtype dtype;
  const adj_decomposition *input; /* x (N, F_in) on P_b x P_fi (cuts kept) */
  int64_t in_features;            /* F_in of W; must equal the input's */
  int64_t out_features;           /* F_out */
  int out_parts;                  /* P_fo (0 means 1) */
  bool no_bias;                   /* default: with bias */
  /* Base ranks in row-major grid order; NULL means 0, 1, 2, ... */
  const int *weight_ranks;        /* P_fo * P_fi workers holding W (bias: the fi = 0 column) */
  const int *work_ranks;          /* P_b * P_fo * P_fi workers computing the local GEMMs */
  const int *output_ranks;        /* P_b * P_fo workers holding y */
} adj_affine_layer_config;

/* Parameters: 0 "weight" (F_out, F_in) on P_fo x P_fi (F_in cut like the
 * input), 1 "bias" (F_out) on the P_fo workers of the fi = 0 column.  Output
 * layout: (N, F_out) on P_b x P_fo with the input's batch cuts. */
int adj_affine_layer_create(const adj_affine_layer_config *config, adj_layer **layer);

/* ---- repartition --------------------------------------------------------------------- */

typedef struct adj_repartition_layer_config {
  adj_dtype dtype;
  const adj_decomposition *input; /* x */
  const adj_decomposition *output; /* y: same global shape, any partition */
} adj_repartition_layer_config;

int adj_repartition_layer_create(const adj_repartition_layer_config *config, adj_layer **layer);

ADJ_END_DECLS

#endif

/* The distributed convolution layer (DistDL paper, section 4).
 *
 * The input x (N, C_in, spatial...) lives on P_x = P_n x P_ci x P_0 x ..., the
 * weights w (C_out, C_in, kernel...) on P_r = P_co x P_ci, the bias b (C_out)
 * on one P_co x 1 column of P_r only (so it is added once), and the work
 * happens on P_w = P_n x P_co x P_ci x P_0 x ...:
 *
 *   forward                          backward (the adjoint of each step, reversed)
 *   x  <- H x          halo          dy^ <- B_{Py->Pw} dy
 *   w^ <- B_{Pr->Pw} w               dx^, dw^, db^ <- [dConv]^T dy^
 *   b^ <- B_{Pb->Pw} b               dx <- R_{Pw->Px} dx^ ;  dx <- H^T dx
 *   x^ <- B_{Px->Pw} x               grad w += R_{Pw->Pr} dw^
 *   y^ <- Conv(w^, b^; x^)           grad b += R_{Pw->Pb} db^
 *   y  <- R_{Pw->Py} y^  sum over the P_ci input-channel blocks
 *
 * with B a broadcast, R its adjoint sum-reduce and H the halo exchange of
 * halo.h; the jvp runs the forward data movement on the perturbations (dx, dw,
 * db) around the local conv jvp.  The output y (N, C_out, out...) lives on
 * P_y = P_n x P_co x P_0 x ..., balanced in every dimension (the halo geometry
 * balances the output, not the input); adj_layer_input_layout and
 * adj_layer_output_layout (layer.h) give both layouts, so the next layer takes
 * the output layout as its input.
 *
 * Feature-space partitions (P_ci = P_co = 1) and channel partitions (spatial
 * extents 1) are this same algorithm with unit extents; the broadcast of x and
 * the sum-reduce of y vanish when they would map every worker onto itself.
 * Splitting the batch (P_n > 1, e.g. space over P_r and the batch over P_c as
 * in the integrated model/batch/domain papers) needs nothing more: the weight
 * broadcast also spans P_n, so its adjoint sums the weight gradients over the
 * batch workers; P_n may not exceed N.
 *
 * Where the workers are: P_w's workers in row-major (n, co, ci, spatial...) order
 * are work_ranks (default 0..|P_w|-1); the weights live on P_w's workers at
 * spatial coordinates 0 and the bias on those with ci = 0 as well, as in the
 * paper's appendix C (all parameters of a feature-space convolution on one
 * worker).  P_x and P_y default to the first ranks of the communicator, so
 * layers created with default rank lists chain.  Parameters start at zero; set
 * them with adj_layer_set_parameter (index 0 the weights, 1 the bias).  A NULL
 * dx in jvp or backward may differ between ranks: the layer agrees on it with
 * one small all-reduce, so a rank that passes NULL cannot hang the others.
 *
 * Creation is collective over config->comm; every rank passes the same config.
 * A bad configuration fails on every rank with the same message. */
#ifndef ADJOIN_CONV_LAYER_H
#define ADJOIN_CONV_LAYER_H

#include <mpi.h>
#include <stdbool.h>

#include "adjoin/decomposition.h"
#include "adjoin/window.h"
#include "adjoin/conv.h"
#include "adjoin/layer.h"
#include "adjoin/op.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_conv_layer_config {
  MPI_Comm comm;                     /* base communicator of every partition */
  adj_dtype dtype;
  const char *name;                  /* optional; default "conv layer" */
  /* Kernel, stride, dilation and (asymmetric) padding per spatial dimension. */
  adj_window_geometry window;
  int64_t out_channels;              /* C_out */
  int64_t in_channels;               /* C_in of the weights; 0 means "the input's" */
  bool no_bias;                      /* default: with bias */
  /* The local convolution's algorithm; AUTO (0): the plan's rule or the
   * environment's ADJ_CONV_ALGORITHM (adjoin/conv.h). */
  adj_conv_algorithm algorithm;

  /* The input, one of two ways:
   *  - input: an existing layout, e.g. the previous layer's output
   *    decomposition or a repartition's range (explicit cuts allowed in the
   *    spatial dimensions); its partition is P_x and its global shape the input
   *    shape (input_shape may then be left zero).  The layer keeps a reference,
   *    so its partition's communicator must outlive the layer;
   *  - input_shape, global (N, C_in, spatial...), balanced over input_parts
   *    (P_x = P_n x P_ci x P_0 x ..., entries 0 mean 1) on input_ranks (NULL: the
   *    first |P_x| ranks). */
  const adj_decomposition *input;
  int64_t input_shape[ADJ_MAX_RANK];
  int input_parts[ADJ_MAX_RANK];
  const int *input_ranks;

  int out_channel_parts;             /* P_co; 0 means 1 */
  const int *work_ranks;             /* P_w in (n, co, ci, spatial...) order; NULL: the first |P_w| ranks */
  const int *output_ranks;           /* P_y in (n, co, spatial...) order; NULL: the first |P_y| ranks */
} adj_conv_layer_config;

/* Creates the layer.  Parameters: 0 "weight" (C_out, C_in, kernel...) on
 * P_co x P_ci workers, 1 "bias" (C_out) on P_co workers unless config->no_bias. */
int adj_conv_layer_create(const adj_conv_layer_config *config, adj_layer **layer);

/* The algorithm this rank's local convolution runs (adjoin/conv.h); AUTO
 * when the layer is not a convolution or this rank computes no block. */
adj_conv_algorithm adj_conv_layer_algorithm(const adj_layer *layer);

/* What this worker's operators of the layer counted since creation (or the
 * last reset), each forward and adjoint: the halo exchange, the broadcast of x
 * over P_co, the sum-reduce of y over P_ci, and the weight and bias broadcasts
 * (forward) / sum-reduces (backward).  An operator that is the identity on
 * this worker (e.g. the x broadcast with P_co = 1, op.h) counts its
 * applications but no byte or message.  The cost model of plan.h predicts
 * these figures. */
typedef struct adj_conv_counters {
  adj_op_counters halo;
  adj_op_counters input;
  adj_op_counters output;
  adj_op_counters weight;
  adj_op_counters bias;
} adj_conv_counters;

/* ADJ_ERR_ARG when layer is not a convolution layer. */
int adj_conv_layer_counters(const adj_layer *layer, adj_conv_counters *counters);
void adj_conv_layer_reset_counters(adj_layer *layer);

/* The layer's halo exchange and weight and bias broadcasts (NULL when it has
 * none), for a benchmark that times the communication alone; the layer owns
 * them.  Applying them changes the layer's buffers only through their own
 * tensors.  ADJ_ERR_ARG when layer is not a convolution layer. */
int adj_conv_layer_ops(adj_layer *layer, adj_op **halo, adj_op **weight, adj_op **bias);

ADJ_END_DECLS

#endif

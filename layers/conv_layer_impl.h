/* Private state of the distributed convolution layer, shared by its creation
 * (conv_layer.c) and its application (conv_layer_apply.c). */
#ifndef ADJOIN_LAYERS_CONV_LAYER_IMPL_H
#define ADJOIN_LAYERS_CONV_LAYER_IMPL_H

#include "adjoin/conv_layer.h"
#include "adjoin/halo.h"
#include "layer_impl.h"

typedef struct adj_conv_layer {
  int rank;                        /* R = 2 + spatial dims */
  bool bias;
  adj_conv_algorithm algorithm;    /* asked for at creation (AUTO: the plan decides) */
  adj_window_geometry local;       /* the kernel with this P_w worker's local padding */

  /* Partitions (the paper's P_x, P_w, P_y, P_r and the bias column P_b).
   * The sum-reduce onto P_y needs P_y with an extra unit dimension (the
   * paper's footnote 5): py_wide, on the same workers; likewise the
   * broadcast of x starts from px_wide, P_x with a unit dimension where P_w
   * has P_co.  pw_bias is the ci = 0 slab of P_w in (spatial..., co) order,
   * where the bias is broadcast. */
  adj_partition *pw, *px_wide, *py, *py_wide, *pr, *pb, *pw_bias;
  adj_decomposition *x, *y, *y_wide, *w, *b;
  adj_decomposition *x_padded;     /* the halo-extended x blocks over px_wide, for the x broadcast */
  adj_halo_geometry *geometry;
  adj_halo_local x_local;          /* this worker as a P_x worker (zero volume if not one) */
  adj_halo_local w_local;          /* the P_x source of this worker's P_w block */
  bool computes;                   /* in P_w with a nonempty output block */
  bool trims;                      /* the kernel reads a strict sub-box of the halo-extended block */
  bool moves_features;             /* the x broadcast or the y sum-reduce is not the identity everywhere */

  /* x_bcast and y_reduce are identities on every worker (op.h) when P_co = 1
   * with P_x = P_w and P_ci = 1 with P_y = P_w. */
  adj_op *halo, *x_bcast, *y_reduce, *w_bcast, *b_bcast;

  /* Buffers; the d-prefixed ones carry perturbations and gradients so the
   * linearisation point of the last forward stays intact.  Where an operator
   * is the identity on this worker (op.h) its buffer stays unused: the layer
   * works on a view of the tensor on the operator's other side instead. */
  adj_tensor x_pad, dx_pad;        /* P_x: bulk + halos (N, C_in_blk, padded...) */
  adj_tensor x_hat, dx_hat;        /* P_w: the broadcast copies of x_pad */
  adj_tensor x_k, dx_k;            /* P_w: the kernel input, when trimmed */
  adj_tensor w_hat, dw_hat;        /* P_w: (C_out_blk, C_in_blk, kernel...) */
  adj_tensor b_hat, db_hat;        /* P_w, ci = 0: (C_out_blk) */
  adj_tensor y_hat, dy_hat;        /* P_w: (N, C_out_blk, out...) partial sums */
  /* Views: the kernel input and parameters of the last forward (x or one of
   * x_pad, x_hat, x_k; w, b or w_hat, b_hat), and the parameter tangents or
   * gradients of the current jvp or backward (the parameters' own, or dw_hat,
   * db_hat). */
  adj_tensor x_kernel, w_point, b_point, w_dir, b_dir;
  adj_conv_plan *plan;             /* the local kernel, planned once (NULL when nothing to compute) */
  adj_workspace ws;
} adj_conv_layer;

int adj_conv_layer_forward(adj_layer *layer, const adj_tensor *x, adj_tensor *y);
int adj_conv_layer_jvp(adj_layer *layer, const adj_tensor *dx, adj_tensor *dy);
int adj_conv_layer_backward(adj_layer *layer, const adj_tensor *dy, adj_tensor *dx);

#endif

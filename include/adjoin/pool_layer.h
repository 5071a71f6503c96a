/* Distributed max and average pooling of (N, C, spatial...) on any partition
 * P_b x P_c x P_0 x ... (DistDL paper, section 4): halo exchange H with the
 * pooling geometry (halo_geometry.h), trim to the kernel-input box, local pool
 * (pool.h); backward = pool^T then H*.  The output is balanced over the output
 * (the geometry's output ranges); adj_layer_output_layout gives it. *
 * Creation is collective over the input decomposition's base communicator;
 * configuration errors are found from arguments every rank shares, so every
 * rank fails with the same message.  Parameters start at zero.  Each layer is
 * y = R . f_local . B, data movement around a local kernel, so its jvp and
 * backward pass the dot-product test as the operators do (layer.h). */
#ifndef ADJOIN_POOL_LAYER_H
#define ADJOIN_POOL_LAYER_H

#include "adjoin/decomposition.h"
#include "adjoin/layer.h"
#include "adjoin/op.h"
#include "adjoin/pool.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_pool_layer_config {
  adj_dtype dtype;
  adj_pool_kind kind;             /* ADJ_POOL_MAX, ADJ_POOL_AVG or ADJ_POOL_AVG_EXCLUDE_PAD (conv.h) */
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

ADJ_END_DECLS

#endif

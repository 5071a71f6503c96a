/* Pointwise layers on any decomposition: activations (ReLU, leaky ReLU, tanh,
 * sigmoid; no data moves, each worker applies activation.h's kernel to its
 * block) and flatten, (N, d1, ..., dk) -> (N, d1*...*dk) of each worker's
 * block on P_b x P_1 x 1 ... x 1 (d1's range [a, b) flattens to the features
 * [a, b) * d2*...*dk; a block that splits a later dimension would not
 * flatten into a contiguous range, so repartition first). *
 * Creation is collective over the input decomposition's base communicator;
 * configuration errors are found from arguments every rank shares, so every
 * rank fails with the same message.  Parameters start at zero.  Each layer is
 * y = R . f_local . B, data movement around a local kernel, so its jvp and
 * backward pass the dot-product test as the operators do (layer.h). */
#ifndef ADJOIN_POINTWISE_LAYER_H
#define ADJOIN_POINTWISE_LAYER_H

#include "adjoin/activation.h"
#include "adjoin/decomposition.h"
#include "adjoin/layer.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

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

ADJ_END_DECLS

#endif

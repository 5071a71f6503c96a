/* A multilayer perceptron of 1.5D affine layers (affine15_layer.h) on one P_r x P_c
 * grid: affine, activation, affine, ..., affine (no activation after the
 * last), every activation (N, F) split by batch over P_c and by features over
 * P_r, so a loss on the output counts each sample once.  P_r = 1 is data
 * parallel, P_c = 1 model parallel.  The result is a network (network.h).
 * Collective over the input's base communicator. */
#ifndef ADJOIN_MLP15_H
#define ADJOIN_MLP15_H

#include "adjoin/affine15_layer.h"
#include "adjoin/activation.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

enum { ADJ_MLP15_MAX_LAYERS = 16 };

typedef struct adj_mlp15_config {
  adj_dtype dtype;
  const adj_decomposition *input;       /* x (N, F_in) on a P_c x P_r partition */
  int layers;                           /* 1..ADJ_MLP15_MAX_LAYERS affine layers */
  const int64_t *widths;                /* (layers) output features of each, >= P_r */
  adj_activation activation;            /* between layers (ReLU when zero-initialised) */
  bool no_bias;
} adj_mlp15_config;

int adj_mlp15_create(const adj_mlp15_config *config, adj_layer **network);

ADJ_END_DECLS

#endif

/* The distributed affine layer y = x W^T + b of the DistDL paper (section 4,
 * appendix C): W (F_out, F_in) on P_fo x P_fi, x (N, F_in) on P_b x P_fi, y
 * (N, F_out) on P_b x P_fo.  Broadcast x and W onto the work partition
 * P_b x P_fo x P_fi, local GEMM (affine.h), sum-reduce over P_fi onto y.  The
 * bias lives on the fi = 0 column of the weight partition and is broadcast
 * only to the fi = 0 workers, so the sum-reduce counts it once; parameter
 * gradients reach their owners through the broadcasts' adjoints. *
 * Creation is collective over the input decomposition's base communicator;
 * configuration errors are found from arguments every rank shares, so every
 * rank fails with the same message.  Parameters start at zero.  Each layer is
 * y = R . f_local . B, data movement around a local kernel, so its jvp and
 * backward pass the dot-product test as the operators do (layer.h). */
#ifndef ADJOIN_AFFINE_LAYER_H
#define ADJOIN_AFFINE_LAYER_H

#include <stdint.h>

#include "adjoin/decomposition.h"
#include "adjoin/layer.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

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

ADJ_END_DECLS

#endif

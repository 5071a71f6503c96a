/* The repartition layer: the DistDL paper's "transpose" glue, the
 * all-to-all repartition of repartition.h as a parameter-free layer, so a
 * network moves activations between two layers' layouts like any stage. *
 * Creation is collective over the input decomposition's base communicator;
 * configuration errors are found from arguments every rank shares, so every
 * rank fails with the same message.  Each layer is
 * y = R . f_local . B, data movement around a local kernel, so its jvp and
 * backward pass the dot-product test as the operators do (layer.h). */
#ifndef ADJOIN_REPARTITION_LAYER_H
#define ADJOIN_REPARTITION_LAYER_H

#include "adjoin/decomposition.h"
#include "adjoin/layer.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_repartition_layer_config {
  adj_dtype dtype;
  const adj_decomposition *input; /* x */
  const adj_decomposition *output; /* y: same global shape, any partition */
} adj_repartition_layer_config;

int adj_repartition_layer_create(const adj_repartition_layer_config *config, adj_layer **layer);

ADJ_END_DECLS

#endif

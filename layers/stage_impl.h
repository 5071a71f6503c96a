/* What a fusable layer computes, read back from a created layer, so the deep
 * halo layer (deep_halo_layer.h) can rebuild a run of conv, pool and
 * activation layers as local kernels over one halo exchange. */
#ifndef ADJOIN_LAYERS_STAGE_IMPL_H
#define ADJOIN_LAYERS_STAGE_IMPL_H

#include "adjoin/window.h"
#include "adjoin/conv.h"
#include "adjoin/pool.h"
#include "adjoin/activation.h"
#include "layer_impl.h"

typedef enum adj_stage_kind {
  ADJ_STAGE_OTHER = 0,
  ADJ_STAGE_CONV = 1,
  ADJ_STAGE_POOL = 2,
  ADJ_STAGE_ACTIVATION = 3,
} adj_stage_kind;

typedef struct adj_stage_description {
  adj_stage_kind kind;
  adj_window_geometry window; /* conv, pool: the global window (global padding) */
  int64_t out_channels;       /* conv */
  bool bias;                  /* conv */
  adj_conv_algorithm algorithm; /* conv: what its plan runs, so a rebuilt stage sums alike */
  bool feature_split;         /* conv: channels split, or work or output off the input's workers */
  adj_decomposition *weight;  /* conv: the parameters' layouts (borrowed) */
  adj_decomposition *bias_layout;
  adj_pool_kind pool;         /* pool */
  adj_activation activation;  /* activation */
} adj_stage_description;

/* Each fills *d and returns true when `layer` is of its kind; false (and d
 * untouched) otherwise. */
bool adj_conv_layer_describe(const adj_layer *layer, adj_stage_description *d);
bool adj_pool_layer_describe(const adj_layer *layer, adj_stage_description *d);
bool adj_activation_layer_describe(const adj_layer *layer, adj_stage_description *d);

#endif

/* Distributed padding (PyTorch's F.pad on (N, C, spatial...), and the
 * padding_mode of nn.Conv1d/2d/3d): zeros, reflect, replicate and circular,
 * for 1-3 spatial dimensions on any partition.
 *
 * Per padded spatial dimension of extent n, output position q (0 <= q <
 * left + n + right) reads input i = q - left when 0 <= i < n, and otherwise
 *   zeros      nothing (0)
 *   reflect    -i for i < 0, 2(n-1) - i for i >= n    (the edge not repeated)
 *   replicate  0 for i < 0, n-1 for i >= n
 *   circular   i mod n
 * Dimensions are padded one after another, so corners read the padding of the
 * dimensions before, which is PyTorch's result for every mode (these maps are
 * separable).  The map is linear: jvp is the forward on dx, and backward its
 * exact adjoint, which ADDS each padding entry's gradient into the input
 * entry it copies (reflect and replicate fold it back, circular wraps it).
 *
 * Distribution: the output has the input's partition; each worker keeps its
 * block, and the first and last workers along a padded dimension also hold the
 * left and right padding (output cuts: the input's shifted by `left`, the last
 * cut n + left + right).  Interior workers move nothing.  The boundary worker
 * of each side receives the input rows its padding copies from whichever
 * workers hold them (reflect: rows 1..left, replicate: row 0, circular: the
 * last `left` rows, i.e. the wrap-around neighbour), through a repartition of
 * just those rows; so a boundary worker whose own block is narrower than the
 * padding, or empty, still pads correctly.  The adjoint sends the folded
 * gradients back the same way.  adj_layer_output_layout gives the output cuts.
 *
 * A convolution or pooling with a padding mode other than zeros is this layer
 * followed by the convolution or pooling with zero padding, as PyTorch's
 * Conv2d computes it.
 *
 * Errors, the same on every rank, naming the value: an unknown mode, negative
 * padding, reflect padding >= the global extent (PyTorch's limit), circular
 * padding > the extent, replicate padding of an empty dimension, a partition
 * whose rank is not 2 + spatial_dims. */
#ifndef ADJOIN_PAD_LAYER_H
#define ADJOIN_PAD_LAYER_H

#include "adjoin/decomposition.h"
#include "adjoin/layer.h"
#include "adjoin/op.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef enum adj_padding_mode {
  ADJ_PAD_ZEROS = 0,
  ADJ_PAD_REFLECT = 1,
  ADJ_PAD_REPLICATE = 2,
  ADJ_PAD_CIRCULAR = 3
} adj_padding_mode;

typedef struct adj_pad_layer_config {
  adj_dtype dtype;
  const adj_decomposition *input; /* (N, C, spatial...) */
  int spatial_dims;               /* 1, 2 or 3 */
  adj_padding_mode mode;
  int64_t padding[3][2];          /* {left, right} >= 0 per spatial dimension */
} adj_pad_layer_config;

int adj_pad_layer_create(const adj_pad_layer_config *config, adj_layer **layer);

/* This worker's traffic for the padding since creation: the sum of the
 * counters of the moves of boundary rows (forward and adjoint; a worker that
 * keeps the rows it pads from moves nothing).  Fails (ADJ_ERR_ARG) when
 * `layer` is not a pad layer. */
int adj_pad_layer_counters(const adj_layer *layer, adj_op_counters *counters);

/* PyTorch's name of a mode ("zeros", "reflect", "replicate", "circular"), or
 * NULL for an unknown one. */
const char *adj_padding_mode_name(adj_padding_mode mode);
/* The mode of a PyTorch name; fails (ADJ_ERR_ARG) naming an unknown one. */
int adj_padding_mode_parse(const char *name, adj_padding_mode *mode);

ADJ_END_DECLS

#endif

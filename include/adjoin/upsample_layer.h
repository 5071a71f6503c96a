/* Distributed upsampling / interpolation (PyTorch's nn.Upsample and
 * F.interpolate): nearest, and linear / bilinear / trilinear with
 * align_corners on or off, to a given output size or by a scale factor, for
 * (N, C, spatial...) with 1-3 spatial dimensions on any partition.
 *
 * Per spatial dimension, output o reads source coordinate
 *   nearest                 src = min(floor(o r), n - 1)
 *   linear, align_corners   src = o (n - 1) / (m - 1)          (0 when m = 1)
 *   linear, otherwise       src = max((o + 1/2) r - 1/2, 0)
 * with r = n / m for a given size m, or 1 / scale_factor (and m = floor(n
 * scale_factor)) for a scale factor, as PyTorch does without
 * recompute_scale_factor.  Linear modes weight i0 = floor(src) by 1 - l and
 * i1 = min(i0 + 1, n - 1) by l = src - i0; dimensions combine as a tensor
 * product.  The map is linear: jvp is the forward on dx and backward its exact
 * adjoint (each output's weights scattered back).
 *
 * Distribution: the output is cut where the source index i0 crosses a balanced
 * cut of the input positions, so each worker's outputs read i0 in its balanced
 * input range and i1 at most one entry past it: the input halo is that of a
 * kernel of size 2 (1 for nearest), stride 1, one entry of right padding,
 * exchanged by the halo operator (whatever the input's cuts; its adjoint adds
 * halos back).  adj_layer_output_layout gives the output cuts.  Batch and
 * channels carry no halo.
 *
 * Errors, the same on every rank: a scale factor <= 0 (named), both or
 * neither of size and scale factor, an output extent of 0, align_corners with
 * nearest (PyTorch refuses it too), a partition whose rank is not 2 + the
 * spatial dimensions. */
#ifndef ADJOIN_UPSAMPLE_LAYER_H
#define ADJOIN_UPSAMPLE_LAYER_H

#include <stdbool.h>

#include "adjoin/decomposition.h"
#include "adjoin/layer.h"
#include "adjoin/upsample.h" /* adj_interp_mode */
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_upsample_layer_config {
  adj_dtype dtype;
  const adj_decomposition *input; /* (N, C, spatial...) */
  int spatial_dims;               /* 1, 2 or 3 */
  adj_interp_mode mode;           /* linear means bilinear in 2-D, trilinear in 3-D */
  bool align_corners;             /* linear only */
  int64_t size[3];                /* output extents, or all 0 to use scale_factor */
  double scale_factor[3];         /* > 0 per dimension, or all 0 to use size */
} adj_upsample_layer_config;

int adj_upsample_layer_create(const adj_upsample_layer_config *config, adj_layer **layer);

ADJ_END_DECLS

#endif

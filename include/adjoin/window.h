/* Sliding-window geometry over the spatial dimensions of an (N, C, spatial...)
 * tensor, shared by the convolution and pooling kernels (conv.h, pool.h) and
 * their distributed layers, which size halos from it (halo_geometry.h). */
#ifndef ADJOIN_WINDOW_H
#define ADJOIN_WINDOW_H

#include <stdint.h>

#include "adjoin/export.h"

ADJ_BEGIN_DECLS

enum { ADJ_MAX_SPATIAL_DIMS = 3 };

/* A sliding window over the last spatial_dims dimensions of an (N, C, spatial...)
 * tensor.  Output extent per dimension:
 *   out = (in + padding_left + padding_right - dilation * (kernel - 1) - 1) / stride + 1
 * Zero stride or dilation means 1, so designated initializers may omit them:
 *   &(adj_window_geometry){.spatial_dims = 2, .kernel = {5, 5},
 *                          .padding_left = {2, 2}, .padding_right = {2, 2}} */
typedef struct adj_window_geometry {
  int spatial_dims;                            /* 1, 2 or 3 */
  int64_t kernel[ADJ_MAX_SPATIAL_DIMS];        /* >= 1 */
  int64_t stride[ADJ_MAX_SPATIAL_DIMS];        /* >= 1 (0 means 1) */
  int64_t dilation[ADJ_MAX_SPATIAL_DIMS];      /* >= 1 (0 means 1) */
  int64_t padding_left[ADJ_MAX_SPATIAL_DIMS];  /* implicit zeros before the input, >= 0 */
  int64_t padding_right[ADJ_MAX_SPATIAL_DIMS]; /* implicit zeros after the input, >= 0 */
} adj_window_geometry;

/* out_spatial[d] for an input of extents in_spatial[d], d < spatial_dims.  Fails
 * (ADJ_ERR_SIZE) when the dilated kernel is larger than the padded input, and
 * (ADJ_ERR_ARG) for an extent out of its range above or a dilated kernel or
 * padded input too long for int64. */
int adj_window_output_shape(const adj_window_geometry *g, const int64_t *in_spatial, int64_t *out_spatial);

ADJ_END_DECLS

#endif

/* Upsampling's local arithmetic on one worker's block (N, C, spatial...): the
 * interpolation y = W x, W the tensor product of one map per spatial
 * dimension, and its adjoint dx = W^T dy.  The distributed layer
 * (upsample_layer.h) computes each dimension's map (which input positions
 * an output reads, with which weights, PyTorch's rules) and exchanges the
 * halos around it.
 *
 * A plan, made once per layer, classifies each dimension.  Nearest
 * neighbours with a whole factor f (output o reads input o / f: a scale
 * factor of 2, say) run as copies of each input value f times along rows
 * and of each row f times (the adjoint: sums of each f x f block), vectors
 * of the CPU's level with no index in the inner loops.  Any other map (the
 * linear modes, nearest with another ratio) runs one dimension at a time,
 * reading its tables, with float64 sums in between.
 *
 * Threads: the (N, C) planes are split over the kernels' team; each plane's
 * arithmetic is fixed by the plan, so results do not depend on the team. */
#ifndef ADJOIN_UPSAMPLE_H
#define ADJOIN_UPSAMPLE_H

#include <stdint.h>

#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef enum adj_interp_mode { ADJ_INTERP_NEAREST = 0, ADJ_INTERP_LINEAR = 1 } adj_interp_mode;

/* One spatial dimension's map from `in` input to `out` output positions:
 * output o reads input index[0][o] with weight weight[0][o] and, for the
 * linear mode, input index[1][o] with weight weight[1][o] (nearest reads
 * index[0] alone, with weight 1; its weights may be NULL).  Indices lie in
 * [0, in). */
typedef struct adj_upsample_axis {
  int64_t in, out;
  const int64_t *index[2];
  const double *weight[2];
} adj_upsample_axis;

typedef struct adj_upsample_plan adj_upsample_plan;

/* Plans the map of `spatial_dims` (1-3) dimensions, axes[0] the outermost;
 * copies the tables.  Fails (ADJ_ERR_ARG) for an unknown mode, a dimension
 * count outside 1..3, missing tables or an index outside [0, in), naming it;
 * ADJ_ERR_MEM when out of memory. */
int adj_upsample_plan_create(adj_interp_mode mode, int spatial_dims, const adj_upsample_axis *axes,
                             adj_upsample_plan **plan);
void adj_upsample_plan_destroy(adj_upsample_plan **plan);

/* y = W x for x (N, C, in...) and y (N, C, out...), y overwritten. */
int adj_upsample_forward(const adj_upsample_plan *plan, const adj_tensor *x, adj_tensor *y);

/* dx = W^T dy for dy (N, C, out...) and dx (N, C, in...), dx overwritten. */
int adj_upsample_adjoint(const adj_upsample_plan *plan, const adj_tensor *dy, adj_tensor *dx);

/* Whether the plan runs as whole-factor copies (the nearest fast path). */
int adj_upsample_plan_repeats(const adj_upsample_plan *plan);

ADJ_END_DECLS

#endif

/* Batch normalisation's local arithmetic on one worker's block, viewed as
 * (N, C, S): the batch, the channels and the product of the spatial extents
 * (S = 1 for a rank-2 (N, C) block).  The distributed layer
 * (batchnorm_layer.h) adds the reduction of the per-channel figures over the
 * workers that share a channel.
 *
 * Two kinds of pass, over the block with per-channel float64 figures:
 *
 *   statistics   per channel, sums over its N x S values, accumulated in
 *                float64 in an order fixed by the block's shape alone (so the
 *                same for any thread count): the moments of x, and the sums
 *                of an incoming gradient or tangent v against xhat;
 *   map          out = scale v + slope (x - mean) + shift per channel, the
 *                arithmetic in float64: the forward (v absent, slope = gamma
 *                inv, shift = beta), the input gradient and the jvp.
 *
 * xhat = (x - mean) inv is never stored: every pass recomputes it from x
 * (the layer's input, which stays unchanged from forward to backward, as
 * layer.h requires), which saves writing and reading a tensor the size of x.
 *
 * Threads: the statistics split the channels over the kernels' team, the
 * map splits the (N, C) planes; both are fast paths over vectors of the
 * CPU's level (the kernels' level, conv.h's adj_kernels_isa).
 *
 * Each function fails with ADJ_ERR_ARG for a NULL tensor or figure array that
 * is required, with ADJ_ERR_DTYPE or ADJ_ERR_SIZE for tensors of another
 * dtype or shape than x's, and with ADJ_ERR_SIZE for a rank outside 2..5. */
#ifndef ADJOIN_BATCHNORM_H
#define ADJOIN_BATCHNORM_H

#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* Per channel j: mean[j] of x's N x S values and m2[j] = sum (x - mean[j])^2,
 * in one pass of float64 sums of x - x0 and (x - x0)^2 around the channel's
 * first value x0 (so a large mean costs no digits of the variance). */
int adj_batchnorm_moments(const adj_tensor *x, /* (N, C, spatial...) */
                          double *mean,        /* (C) overwritten */
                          double *m2);         /* (C) overwritten */

/* Per channel j: sum_v[j] = sum v and sum_vxhat[j] = inv[j] sum v (x - mean[j]),
 * the sums a backward (v = dy) and a jvp (v = dx) need. */
int adj_batchnorm_sums(const adj_tensor *v,    /* (N, C, spatial...) */
                       const adj_tensor *x,    /* (N, C, spatial...) */
                       const double *mean, const double *inv, /* (C) */
                       double *sum_v,          /* (C) overwritten */
                       double *sum_vxhat);     /* (C) overwritten */

/* The per-channel coefficients of the map (each (C); scale may be NULL when
 * v is, shift NULL for 0). */
typedef struct adj_batchnorm_map {
  const double *mean, *scale, *slope, *shift;
} adj_batchnorm_map;

/* out = scale v + slope (x - mean) + shift per channel, in float64 and
 * rounded once; v NULL reads as zeros.  out may be v (in place). */
int adj_batchnorm_apply(const adj_tensor *v,   /* (N, C, spatial...) or NULL */
                        const adj_tensor *x,   /* (N, C, spatial...) */
                        const adj_batchnorm_map *map,
                        adj_tensor *out);      /* (N, C, spatial...) overwritten */

ADJ_END_DECLS

#endif

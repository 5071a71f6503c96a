/* The padded input grid of a unit-stride convolution (conv_plan_impl.h), shared by
 * the shifted-GEMM and direct paths. */
#include <stdint.h>
#include <string.h>

#include "conv_plan_impl.h"

#define ADJ_TYPED_FILE "conv_grid_typed.inc"
#include "instantiate.h"

bool adj_conv_grid_make(const adj_window_plan *p, adj_conv_grid *g) {
  for (int d = 0; d < 3; d++) {
    if (p->stride[d] != 1) return false;
    g->padded[d] = p->out[d] + (p->kernel[d] - 1) * p->dilation[d];
  }
  g->volume = g->padded[0] * g->padded[1] * g->padded[2];
  g->span = ((p->out[0] - 1) * g->padded[1] + p->out[1] - 1) * g->padded[2] + p->out[2];
  g->origin = (p->pad[0] * g->padded[1] + p->pad[1]) * g->padded[2] + p->pad[2];
  return true;
}

int64_t adj_conv_grid_offset(const adj_window_plan *p, const adj_conv_grid *g, int64_t k) {
  int64_t k0 = k / (p->kernel[1] * p->kernel[2]), k1 = k / p->kernel[2] % p->kernel[1], k2 = k % p->kernel[2];
  return (k0 * p->dilation[0] * g->padded[1] + k1 * p->dilation[1]) * g->padded[2] + k2 * p->dilation[2];
}

void adj_grid_copy(adj_dtype dtype, int64_t count, const int64_t *n, void *dense, int64_t dense_stride,
                   const int64_t *padded, void *grid, int64_t grid_stride, int64_t origin, bool to_grid) {
  ADJ_DISPATCH(dtype, grid_copy, count, n, dense, dense_stride, padded, grid, grid_stride, origin, to_grid);
}

/* Private to the convolution kernels (conv.c, conv_direct.c): the zero-padded
 * input grid of a unit-stride convolution, on which every kernel tap is one
 * fixed shift, and the direct path that works on it. */
#ifndef ADJOIN_LAYERS_CONV_IMPL_H
#define ADJOIN_LAYERS_CONV_IMPL_H

#include "kernels_impl.h"

/* Bytes rounded up to 64: slices of a workspace start 64-byte aligned, as the
 * workspace itself does. */
static inline size_t adj_align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

/* With unit strides, output position o reads input o - pad + k * dilation, so
 * on the input padded to out + (kernel - 1) * dilation per dimension, tap k is
 * the same shift for every output.  Output positions sit on the grid with the
 * padded input's row lengths: from the first to the last output there are
 * `span` grid positions, out_volume of them outputs and the rest (between
 * output lines) computed and dropped; span + the largest tap offset = volume. */
typedef struct adj_conv_grid {
  int64_t padded[3]; /* padded input extents */
  int64_t volume;    /* padded input volume */
  int64_t span;      /* grid positions from the first output to the last */
  int64_t origin;    /* grid offset of input element 0 (the left padding) */
} adj_conv_grid;

/* Fills g; false unless every stride is 1. */
bool adj_conv_grid_make(const adj_window_plan *p, adj_conv_grid *g);
/* Grid offset of kernel tap k (flat over the kernel). */
int64_t adj_conv_grid_offset(const adj_window_plan *p, const adj_conv_grid *g, int64_t k);
/* Copies each of `count` dense blocks (n[0], n[1], n[2]) to or from the grid
 * with rows padded[2] and planes padded[1] * padded[2], starting at origin. */
void adj_grid_copy(adj_dtype dtype, int64_t count, const int64_t *n, void *dense, int64_t dense_stride,
                   const int64_t *padded, void *grid, int64_t grid_stride, int64_t origin, bool to_grid);

/* ---- direct path (conv_direct.c) ----------------------------------------------------
 *
 * For convolutions with few input channels (LeNet's 1 and 6), whose GEMMs are
 * too thin for BLAS to run at speed: the forward, the input gradient and the
 * weight gradient as vectorized loops over the grid, sums in registers. */

struct adj_direct_kernels;

typedef struct adj_conv_direct {
  const struct adj_direct_kernels *kernels; /* the instruction-set level's kernels (conv_direct_impl.h) */
  adj_conv_grid grid;
  adj_dtype dtype;
  int64_t c_in, c_out, taps;
  int64_t span_rounded;   /* forward outputs and weight-gradient terms: span in whole vectors */
  int64_t volume_rounded; /* input-gradient outputs: the padded volume in whole vectors */
  int64_t margin;         /* zeros in front of each dy grid row: the largest tap offset */
  int64_t rows;           /* output rows (out[0] * out[1]) */
  int64_t row_vectors;    /* vectors per output row when rows are at least a vector long: the
                           * forward then writes y and the weight gradient reads dy where
                           * they are, the last vector of a row overlapping the one before
                           * it by `repeated` lanes; 0 otherwise (both go through the grids) */
  int64_t repeated;
  bool input_is_grid;     /* no padding: an image's x block is its grid as it lies, so the
                           * forward and the weight gradient read x in place (all but the
                           * last image, whose tail read would leave the tensor) and ... */
  int64_t plane_vectors;  /* ... the input gradient writes dx in place in this many vectors
                           * per channel, the last ending with the plane (0: through dx_grid) */
  bool channel_vectors;   /* C_out a multiple of the vector length: the forward and dw run
                           * with the output channels along the vectors, over real outputs only */
  int64_t positions;      /* outputs per channel (out_volume) */
  int64_t dy_row;         /* length of one channel's dy grid */
  int64_t chunk;          /* images whose grids the backward holds at once */
  size_t bytes;           /* workspace for the whole call */
} adj_conv_direct;

/* Fills d and returns true when the direct path suits the plan: unit strides,
 * fewer than 16 input channels, and at most half the grid positions dropped. */
bool adj_conv_direct_make(const adj_window_plan *p, int64_t c_out, adj_dtype dtype, adj_conv_direct *d);
/* y = conv(x; w) + b (b may be NULL); ws holds d->bytes. */
void adj_conv_direct_forward(const adj_window_plan *p, const adj_conv_direct *d, const adj_tensor *x,
                             const adj_tensor *w, const adj_tensor *b, adj_tensor *y, void *ws);
/* dx = J_x^T dy, dw += J_w^T dy, db += J_b^T dy (each may be NULL). */
void adj_conv_direct_backward(const adj_window_plan *p, const adj_conv_direct *d, const adj_tensor *x,
                              const adj_tensor *w, const adj_tensor *dy, adj_tensor *dx, adj_tensor *dw,
                              adj_tensor *db, void *ws);

#endif

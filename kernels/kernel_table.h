/* The kernel table: the hand-blocked kernels of one instruction-set level
 * (the direct convolution's, conv_direct_typed.inc, and the vector helpers
 * other kernels share: transposes and the bias-gradient row sums), with the
 * arguments of each, private to kernels/.
 *
 * kernel_levels.c is compiled once per level the build targets (see
 * kernels/meson.build and the kernel_isa option), each time with that level's
 * vector width and register blocks, and exports one table named for the
 * level; adj_kernel_table_select() picks the best the CPU runs, once. */
#ifndef ADJOIN_KERNELS_KERNEL_TABLE_H
#define ADJOIN_KERNELS_KERNEL_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "vector_math_impl.h"

/* For each vector v of positions, at in_at[v] on the input and out_at[v] on
 * the output (both v * vector length when the tables are NULL), lanes l:
 *   out[o * out_stride + out_at[v] + l] = bias[o] (0 without)
 *       + sum_i sum_t w[o * w_out + i * w_in + t] * in[i * in_stride + in_at[v] + l + offset[t]],
 * the taps t limited to [tap_lo[v], tap_hi[v]) when those tables are given
 * (with in_at): the others read only zeros there. */
typedef struct adj_correlation {
  int64_t n_out, n_in, taps, vectors;
  const int64_t *offset, *in_at, *out_at, *tap_lo, *tap_hi;
  const void *w, *bias, *in;
  int64_t w_out, w_in, in_stride, out_stride;
  int64_t row; /* without tables: the grid's row length, when a multiple of the vector
                * length, so that blocks of rows share the rows they read (0: none) */
  int64_t lanes; /* with tables: each vector's first `lanes` lanes are written, the rest
                  * of the memory after them untouched (0: whole vectors) */
  void *out;
} adj_correlation;

/* dw[o * w_out + i * w_in + t] += sum_g sum_v sum_l dy[g * dy_image + o * dy_stride + dy_at[v] + l]
 *                                 * in[g * in_image + i * in_stride + in_at[v] + l + offset[t]],
 * the tables as above, and lanes l < repeated left out of the vectors flagged
 * in `partial` (NULL: none), which repeat positions of the vector before.
 * With `lanes` > 0 (tables only) the sum runs over l < lanes instead, and dy
 * is read no further than that. */
typedef struct adj_correlation_gradient {
  int64_t n_out, n_in, taps, vectors, images, repeated, lanes;
  const int64_t *offset, *dy_at, *in_at;
  const unsigned char *partial;
  const void *dy, *in;
  int64_t dy_stride, dy_image, in_stride, in_image, w_out, w_in;
  void *dw;
} adj_correlation_gradient;

/* dw[o * w_out + i * w_in + t] += sum_g sum_p dy_t[g * positions * c_out + p * c_out + o]
 *                                 * x[g * x_image + i * x_stride + grid_at[p] + offset[t]],
 * with c_out a multiple of the vector length: dy transposed (position-major)
 * and each output position's place on the x grid. */
typedef struct adj_channel_gradient {
  int64_t c_out, c_in, taps, positions, images;
  const int64_t *offset, *grid_at;
  const void *dy_t, *x;
  int64_t x_image, x_stride, w_out, w_in;
  void *dw;
} adj_channel_gradient;

/* y[o * positions + p] = bias[o] (0 without) + sum_i sum_t w_t[(i * taps + t) * c_out + o]
 *                        * x[i * x_stride + grid_at[p] + offset[t]]   for one image,
 * with c_out a multiple of the vector length and w transposed. */
typedef struct adj_channel_forward {
  int64_t c_out, c_in, taps, positions;
  int64_t row; /* positions per output row (consecutive on the grid), or 0: rows unknown */
  const int64_t *offset, *grid_at;
  const void *w_t, *bias, *x;
  int64_t x_stride;
  void *y;
} adj_channel_forward;

/* The input gradient with the images along the vectors, `lanes` images
 * interleaved (the level's batch_vectors times its vector length):
 *   dx_b[(i * positions_in + q) * lanes + l] = sum_{k in [pair_start[q], pair_start[q + 1])} sum_o
 *       w_b[(pair_tap[k] * c_out + o) * c_in + i] * dy_b[(pair_at[k] * c_out + o) * lanes + l],
 * each input position q summing only the (tap, output) pairs that read it.
 * dy_b holds a position's output channels next to each other, so the sum over
 * o reads consecutive vectors. */
typedef struct adj_batch_gradient {
  int64_t c_in, c_out, positions_in, positions;
  const int64_t *pair_start, *pair_tap, *pair_at;
  const void *w_b, *dy_b;
  void *dx_b;
} adj_batch_gradient;

/* The kernels of one level, each as [0] float32 and [1] float64. */
typedef struct adj_kernel_table {
  const char *isa;  /* "x86-64-v4", "x86-64-v3" or "baseline" */
  int vector_bytes; /* the width the kernels' vectors have at this level */
  bool masked_lanes; /* moves of a vector's first lanes cost no more than whole ones (AVX-512) */
  void (*correlate[2])(const adj_correlation *a);
  void (*correlation_gradient[2])(const adj_correlation_gradient *a);
  void (*channel_gradient[2])(const adj_channel_gradient *a);
  void (*channel_forward[2])(const adj_channel_forward *a);
  void (*batch_gradient[2])(const adj_batch_gradient *a);
  int batch_vectors; /* vectors of images the batch gradient interleaves */
  /* out[(p * outer + o) * lanes + l] = in[(l * outer + o) * inner + p] for images l < count, 0 for l in
   * [count, lanes): each image's (outer, inner) block transposed as it goes onto the lanes */
  void (*interleave[2])(int64_t count, int64_t lanes, int64_t outer, int64_t inner, const void *in, void *out);
  /* out[l * rows + r] = in[r * lanes + l] for images l < count */
  void (*deinterleave[2])(int64_t count, int64_t lanes, int64_t rows, const void *in, void *out);
  /* out (cols, rows) = in (rows, cols)^T */
  void (*transpose[2])(int64_t rows, int64_t cols, const void *in, void *out);
  /* b[r] += sum_c y[r * ld + c]: the bias gradient, for every algorithm (adj_rows_sum_add) */
  void (*rows_sum_add[2])(const void *y, int64_t rows, int64_t cols, int64_t ld, void *b);
  /* y[i] = f(x[i]) for i < n (x and y the same array or apart), every element through the level's
   * vector routine, so its value does not depend on its place in the array */
  void (*vector_math[ADJ_VECTOR_FUNCTIONS][2])(const void *x, void *y, int64_t n);
} adj_kernel_table;

/* One table per level built (kernel_levels.c). */
extern const adj_kernel_table adj_kernel_table_v4, adj_kernel_table_v3, adj_kernel_table_baseline;

/* The best level both built and run by this CPU (chosen on the first call). */
const adj_kernel_table *adj_kernel_table_select(void);

#endif

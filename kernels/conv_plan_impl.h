/* Private to the convolution kernels: the validated shape of one call and
 * the three algorithms that compute it, each in its own file -- im2col +
 * GEMM (conv_im2col.c), shifted GEMMs (conv_shifted.c) and the direct loops
 * (conv_direct.c) -- the last two on the zero-padded input grid of a
 * unit-stride convolution (conv_grid.c); conv.c validates, chooses and
 * splits the batch over a thread team. */
#ifndef ADJOIN_KERNELS_CONV_PLAN_IMPL_H
#define ADJOIN_KERNELS_CONV_PLAN_IMPL_H

#include "kernels_impl.h"

/* Bytes rounded up to 64: slices of a workspace start 64-byte aligned, as the
 * workspace itself does. */
static inline size_t adj_align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

typedef struct adj_direct_tables adj_direct_tables; /* the direct path's index tables (conv_direct.c) */

/* A validated convolution and the algorithm its forward and backward run. */
typedef struct adj_conv_shape {
  adj_window_plan win;
  adj_dtype dtype;
  int rank;
  int64_t c_out;
  int64_t rows;       /* C_in * kernel_volume: the GEMM inner dimension */
  int64_t lines;      /* output lines per image: out[0] * out[1], each out[2] long */
  int64_t line_bytes; /* workspace one output line needs: its columns and its output */
  int64_t pad_bytes;  /* workspace a tile's last GEMM call may pad: ADJ_CONV_GEMM_COLUMNS positions' worth */
  int64_t y_shape[2 + ADJ_MAX_SPATIAL_DIMS];
  adj_conv_algorithm algorithm; /* DIRECT, SHIFTED or IM2COL: the forward and the backward with dx */
  adj_conv_algorithm first;     /* the backward without dx (a network's first layer) */
  bool measure;                 /* MEASURE was asked for: a plan times the candidates */
  adj_direct_tables *direct_tables; /* a plan's, which owns them, built once (either path DIRECT); NULL: each call
                                     * builds them */
} adj_conv_shape;

/* ---- im2col + GEMM (conv_im2col.c) -------------------------------------------------- */

/* Output positions per forward GEMM call: a tile's last call is padded to it
 * (conv_im2col.c says why).  A multiple of every OpenBLAS kernel's register
 * block along the positions, and wide enough that the call overhead is small
 * against even a 6 x 25 weight matrix's work. */
enum { ADJ_CONV_GEMM_COLUMNS = 256 };

/* One output term: conv(x; w) contributes when both are given (the jvp's dx or dw may be NULL). */
typedef struct adj_conv_term {
  const adj_tensor *x; /* (N, C_in, in...) */
  const adj_tensor *w; /* (C_out, C_in, kernel...) */
} adj_conv_term;

/* Tile shape (images per tile, lines per tile) for a workspace of `budget`
 * bytes; *images is 0 when there is nothing to compute. */
void adj_conv_tiling(const adj_conv_shape *cp, size_t budget, int64_t *images, int64_t *lines);
/* y = sum_t conv(x_t; w_t) + b (b may be NULL), in tiles that fit ws. */
void adj_im2col_forward(const adj_conv_shape *cp, int n_terms, const adj_conv_term *terms, const adj_tensor *b,
                        adj_tensor *y, const adj_workspace *ws);
/* dx = J_x^T dy, dw += J_w^T dy, db += J_b^T dy (each may be NULL), in tiles that fit ws. */
void adj_im2col_backward(const adj_conv_shape *cp, const adj_tensor *x, const adj_tensor *w, const adj_tensor *dy,
                         adj_tensor *dx, adj_tensor *dw, adj_tensor *db, const adj_workspace *ws);

/* ---- the padded grid (conv_grid.c) ---------------------------------------------------
 *
 * With unit strides, output position o reads input o - pad + k * dilation, so
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

/* ---- shifted GEMMs (conv_shifted.c) ------------------------------------------------- */

typedef struct adj_shift_plan {
  adj_conv_grid grid;
  int64_t bytes; /* workspace: padded input, output span, tap-major weights, columns */
} adj_shift_plan;

/* Fills s and returns true when the path applies (unit strides, images to
 * compute) and, unless any_shape, suits the shape: 16 or more input channels
 * and at most 25% of the grid positions dropped. */
bool adj_shift_plan_make(const adj_conv_shape *cp, bool any_shape, adj_shift_plan *s);
/* y = conv(x; w) + b (b may be NULL); ws holds s->bytes. */
void adj_shift_forward(const adj_conv_shape *cp, const adj_shift_plan *s, const adj_tensor *x, const adj_tensor *w,
                       const adj_tensor *b, adj_tensor *y, void *ws);
/* dx = J_x^T dy, dw += J_w^T dy, db += J_b^T dy (each may be NULL). */
void adj_shift_backward(const adj_conv_shape *cp, const adj_shift_plan *s, const adj_tensor *x, const adj_tensor *w,
                        const adj_tensor *dy, adj_tensor *dx, adj_tensor *dw, adj_tensor *db, void *ws);

/* ---- direct path (conv_direct.c) ----------------------------------------------------
 *
 * For convolutions with few input channels (LeNet's 1 and 6), whose GEMMs are
 * too thin for BLAS to run at speed: the forward, the input gradient and the
 * weight gradient as vectorized loops over the grid, sums in registers. */

struct adj_kernel_table;

typedef struct adj_conv_direct {
  const struct adj_kernel_table *kernels; /* the instruction-set level's kernels (kernel_table.h) */
  adj_conv_grid grid;
  adj_dtype dtype;
  int64_t c_in, c_out, taps;
  int64_t span_rounded;   /* forward outputs and weight-gradient terms: span in whole vectors */
  int64_t volume_rounded; /* input-gradient outputs: the padded volume in whole vectors */
  int64_t margin;         /* zeros in front of each dy grid row: the largest tap offset */
  int64_t rows;           /* output rows (out[0] * out[1]) */
  int64_t row_vectors;    /* vectors per output row when rows are at least a vector long (or,
                           * with row_lanes, one for a narrower row): the
                           * forward then writes y and the weight gradient reads dy where
                           * they are, the last vector of a row overlapping the one before
                           * it by `repeated` lanes; 0 otherwise (both go through the grids) */
  int64_t repeated;
  int64_t row_lanes;      /* a row narrower than a vector, in place as one vector of which
                           * the first row_lanes are its (row_vectors 1); 0: rows fill theirs */
  bool input_is_grid;     /* no padding: an image's x block is its grid as it lies, so the
                           * forward and the weight gradient read x in place (all but the
                           * last image, whose tail read would leave the tensor) and ... */
  int64_t plane_vectors;  /* ... the input gradient writes dx in place in this many vectors
                           * per channel, the last ending with the plane (0: through dx_grid) */
  bool channel_vectors;   /* C_out a multiple of the vector length, and each output the sum of
                           * many terms or the grid sparse: the forward and dw run with the
                           * output channels along the vectors, over real outputs only */
  bool dense_grid;        /* the grid drops at most about half its positions */
  int64_t positions;      /* outputs per channel (out_volume) */
  int64_t dy_row;         /* length of one channel's dy grid */
  int64_t chunk;          /* images whose grids the backward holds at once */
  int64_t positions_in;   /* input positions per channel (in_volume) */
  int64_t pairs;          /* (tap, output) pairs that read an input position, per channel pair */
  bool pair_tables;       /* few of the dy grid's (tap, position) products are real pairs: the
                           * tables list each input position's pairs (geometry only) ... */
  int64_t lanes;          /* ... and, with at least this many images (the level's batch
                           * vectors of d's dtype), the input gradient sums them with the
                           * images along the vectors; 0: on the dy grid */
  size_t bytes;           /* workspace for the whole call */
} adj_conv_direct;

/* Fills d and returns true when the direct path applies (unit strides, images
 * to compute) and, unless any_shape, suits the plan: fewer than 16 input
 * channels and at most half the grid positions dropped. */
bool adj_conv_direct_make(const adj_window_plan *p, int64_t c_out, adj_dtype dtype, bool any_shape,
                          adj_conv_direct *d);
/* The index tables of p's geometry (tap offsets, vector places, tap
 * ranges), which do not depend on the batch: a plan builds them once, with
 * the d of any batch; the passes given NULL build them in ws each call. */
int adj_direct_tables_create(const char *who, const adj_window_plan *p, const adj_conv_direct *d,
                             adj_direct_tables **tables);
void adj_direct_tables_destroy(adj_direct_tables **tables);
/* y = conv(x; w) + b (b may be NULL); ws holds d->bytes. */
void adj_conv_direct_forward(const adj_window_plan *p, const adj_conv_direct *d, const adj_tensor *x,
                             const adj_tensor *w, const adj_tensor *b, adj_tensor *y, const adj_direct_tables *tables,
                             void *ws);
/* dx = J_x^T dy, dw += J_w^T dy, db += J_b^T dy (each may be NULL). */
void adj_conv_direct_backward(const adj_window_plan *p, const adj_conv_direct *d, const adj_tensor *x,
                              const adj_tensor *w, const adj_tensor *dy, adj_tensor *dx, adj_tensor *dw,
                              adj_tensor *db, const adj_direct_tables *tables, void *ws);

#endif

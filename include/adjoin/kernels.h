/* Sequential local kernels: convolution, pooling, affine, activations, flatten
 * and losses on one worker's local block, in float32 and float64.
 *
 * The distributed layers of section 4 of the DistDL paper are built from data
 * movement operators around exactly these kernels (halo exchange, then a local
 * Conv or Pool on the padded block; broadcast of weights, then a local Affine),
 * so each kernel exposes the three maps a layer needs at a point (x, w, b):
 *
 *   forward   y  = f(x; w, b)
 *   jvp       dy = J (dx, dw, db)          the tangent-linear map; any of the
 *                                          perturbations may be NULL (= zero)
 *   backward  (dx, dw, db) = J^T dy        the adjoint of the jvp
 *
 * and jvp/backward pass the dot-product test <J v, u> = <v, J^T u> to round-off.
 * One header serves the whole module because the kernels share the window
 * geometry, the workspace and the overwrite/accumulate conventions below; the
 * implementation is split per kernel family in layers/.
 *
 * Conventions (llm.c style, with adjoin's status returns):
 *  - Layout is row-major, channels first: activations (N, C, spatial...), conv
 *    weights (C_out, C_in, kernel...), affine weights (F_out, F_in), bias (C_out).
 *    Every tensor argument carries its shape in a comment.
 *  - forward and jvp OVERWRITE their output.  backward OVERWRITES the input
 *    gradient dx (like an operator's adjoint) and ACCUMULATES (+=) into the
 *    parameter gradients dw and db, so a trainer zeroes them once per step and a
 *    layer whose weights are used several times sums naturally.  Passing NULL for
 *    dx, dw or db skips that gradient.
 *  - All tensors of one call share one dtype; shapes are checked and a mismatch
 *    returns ADJ_ERR_SIZE / ADJ_ERR_DTYPE with a message naming the values.
 *  - Nothing here allocates: scratch comes from an adj_workspace sized once with
 *    the kernel's *_workspace_size function.
 *  - Not collective: these are purely local. */
#ifndef ADJOIN_KERNELS_H
#define ADJOIN_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* ---- window geometry (convolution and pooling) ------------------------------------ */

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

/* ---- workspace ---------------------------------------------------------------------- */

/* Caller-owned scratch reused across calls (im2col buffers). */
typedef struct adj_workspace {
  void *data;   /* 64-byte aligned */
  size_t bytes;
} adj_workspace;

/* Makes ws hold at least `bytes` (grows, never shrinks); call it at setup time. */
int adj_workspace_reserve(adj_workspace *ws, size_t bytes);
/* Frees the storage; NULL-safe. */
void adj_workspace_release(adj_workspace *ws);

/* ---- convolution ------------------------------------------------------------------- */

/* Cross-correlation (the deep-learning "convolution") with zero padding:
 * y[n, co, o] = b[co] + sum_{ci, k} w[co, ci, k] x[n, ci, o*s - p + k*d].
 * Three algorithms compute it (adj_conv_algorithm below); the functions here
 * plan on every call, with the algorithm the rule (or ADJ_CONV_ALGORITHM)
 * picks; an adj_conv_plan plans once for many calls.
 *
 * Workspace: *bytes is the size that lets the kernel group several small
 * images into one large GEMM; any workspace of at least one image's share
 * (reported in the error message when too small) also works, more slowly. */
int adj_conv_workspace_size(const adj_window_geometry *g,
                            const adj_tensor *x, /* (N, C_in, in...) */
                            const adj_tensor *w, /* (C_out, C_in, kernel...) */
                            size_t *bytes);

int adj_conv_forward(const adj_window_geometry *g,
                     const adj_tensor *x, /* (N, C_in, in...) */
                     const adj_tensor *w, /* (C_out, C_in, kernel...) */
                     const adj_tensor *b, /* (C_out) or NULL */
                     adj_tensor *y,       /* (N, C_out, out...) overwritten */
                     adj_workspace *ws);

/* dy = conv(dx; w) + conv(x; dw) + db: the derivative at (x, w, b) in the
 * direction (dx, dw, db). */
int adj_conv_jvp(const adj_window_geometry *g,
                 const adj_tensor *x,  /* (N, C_in, in...) */
                 const adj_tensor *w,  /* (C_out, C_in, kernel...) */
                 const adj_tensor *dx, /* (N, C_in, in...) or NULL */
                 const adj_tensor *dw, /* (C_out, C_in, kernel...) or NULL */
                 const adj_tensor *db, /* (C_out) or NULL */
                 adj_tensor *dy,       /* (N, C_out, out...) overwritten */
                 adj_workspace *ws);

int adj_conv_backward(const adj_window_geometry *g,
                      const adj_tensor *x,  /* (N, C_in, in...) */
                      const adj_tensor *w,  /* (C_out, C_in, kernel...) */
                      const adj_tensor *dy, /* (N, C_out, out...) */
                      adj_tensor *dx,       /* (N, C_in, in...) overwritten, or NULL */
                      adj_tensor *dw,       /* (C_out, C_in, kernel...) +=, or NULL */
                      adj_tensor *db,       /* (C_out) +=, or NULL */
                      adj_workspace *ws);

/* ---- convolution plan ---------------------------------------------------------------
 *
 * Created once per layer (shapes, dtype and geometry fixed), applied many
 * times.  Creation validates the geometry and the shapes, chooses the
 * algorithm of the forward and backward passes and sizes the workspace:
 *   direct   vectorized loops on the zero-padded input grid, sums in
 *            registers, built per instruction-set level (unit strides);
 *   shifted  one GEMM per kernel tap on the padded grid (unit strides);
 *   im2col   im2col + GEMM on tiles of images (any geometry; the jvp's).
 * The rule (ADJ_CONV_ALGORITHM_AUTO): direct below 16 input channels,
 * shifted from 16, when their grids waste few positions; im2col otherwise;
 * at the baseline level beside OpenBLAS's AVX-512 kernels shifted also from
 * 2 input channels on dense grids.  The backward without dx (a first
 * layer's) chooses on its own: at x86-64-v4 direct also from 16 input
 * channels on dense grids; at the baseline on dense grids shifted also from
 * 2 input channels beside AVX2 kernels and with one beside AVX-512 ones;
 * im2col where shifted's own test takes the shape (16 or more input
 * channels: without dx there is no col2im to spare).
 * It assumes GEMMs with AVX2 and FMA: when OpenBLAS runs older kernels
 * (see adj_blas_kernels_behind) the direct kernels of x86-64-v3 and v4 take
 * every unit-stride shape and the baseline's stay below 16 channels.
 * A forced algorithm (config or the environment variable ADJ_CONV_ALGORITHM
 * = auto|direct|shifted|im2col|measure, which a config's AUTO defers to) runs
 * wherever it can: direct and shifted need unit strides, else im2col runs.
 * MEASURE (FFTW's FFTW_MEASURE, for plans only) times a forward and a
 * backward of every algorithm that applies, on scratch tensors of the plan's
 * shapes, at creation, and keeps the fastest: never slower than im2col as
 * measured, on whatever CPU runs it, at the price of a few passes at
 * creation.  Timings vary, so two runs (or two ranks) may pick differently
 * and their results then differ in the last bits; the default rule keeps
 * runs bit-reproducible.  The unplanned adj_conv_* calls treat it as AUTO.
 * A workspace smaller than adj_conv_plan_workspace_size() makes any
 * algorithm fall back to im2col tiles that fit. */

typedef enum adj_conv_algorithm {
  ADJ_CONV_ALGORITHM_AUTO = 0,
  ADJ_CONV_ALGORITHM_DIRECT,
  ADJ_CONV_ALGORITHM_SHIFTED,
  ADJ_CONV_ALGORITHM_IM2COL,
  ADJ_CONV_ALGORITHM_MEASURE,
} adj_conv_algorithm;

typedef struct adj_conv_plan_config {
  adj_window_geometry geometry;
  adj_conv_algorithm algorithm; /* AUTO (0): the rule, or ADJ_CONV_ALGORITHM */
} adj_conv_plan_config;

typedef struct adj_conv_plan adj_conv_plan;

/* x and w give the shapes and dtype only (their data is not read). */
int adj_conv_plan_create(const adj_conv_plan_config *config,
                         const adj_tensor *x, /* (N, C_in, in...) */
                         const adj_tensor *w, /* (C_out, C_in, kernel...) */
                         adj_conv_plan **plan);
void adj_conv_plan_destroy(adj_conv_plan **plan);
/* The workspace the plan's passes want (0 for a NULL plan). */
size_t adj_conv_plan_workspace_size(const adj_conv_plan *plan);
/* The algorithm of the forward and of the backward with dx (never AUTO). */
adj_conv_algorithm adj_conv_plan_algorithm(const adj_conv_plan *plan);
/* The algorithm of the backward without dx, a network's first layer's (never
 * AUTO; the same as adj_conv_plan_algorithm's unless the rule tells them apart). */
adj_conv_algorithm adj_conv_plan_algorithm_without_dx(const adj_conv_plan *plan);
/* "auto", "direct", "shifted", "im2col", "measure" ("?" for other values). */
const char *adj_conv_algorithm_name(adj_conv_algorithm algorithm);
/* The instruction-set level of the direct kernels this CPU runs:
 * "x86-64-v4", "x86-64-v3" or "baseline". */
const char *adj_kernels_isa(void);

/* Whether OpenBLAS, whose GEMMs the affine layers and the shifted and im2col
 * convolutions run, uses kernels below what this CPU runs.  A DYNAMIC_ARCH
 * OpenBLAS picks its kernels from the CPU's family and model when it loads;
 * a version older than the CPU does not know the model and falls back to its
 * oldest x86-64 kernels (Debian 12's OpenBLAS 0.3.21 on a Xeon of model 207
 * runs Prescott's, SSE3, at a fifth of the AVX-512 kernels' sgemm rate,
 * bench/RESULTS.md).  It chooses before main runs, so adjoin can only say so:
 * the environment variable OPENBLAS_CORETYPE, set before the program starts,
 * names the kernels instead.  True when OpenBLAS's kernels lack AVX2 and FMA
 * on a CPU that has them and OPENBLAS_CORETYPE is not set; `advice` (size
 * bytes, may be NULL) then receives one line naming the kernels, the CPU and
 * the value to set (SkylakeX with AVX-512, Haswell with AVX2), else "". */
bool adj_blas_kernels_behind(char *advice, size_t size);

/* The OPENBLAS_CORETYPE value adj_blas_kernels_behind advises ("SkylakeX" or
 * "Haswell"), or NULL when it advises nothing.  A launcher script asks for it
 * (`adjoin-train --openblas-coretype`) and exports it before starting the
 * ranks, since OpenBLAS reads it only as it loads. */
const char *adj_blas_kernels_coretype(void);

/* As adj_conv_forward / _jvp / _backward, on tensors of the plan's shapes. */
int adj_conv_plan_forward(const adj_conv_plan *plan, const adj_tensor *x, const adj_tensor *w,
                          const adj_tensor *b, adj_tensor *y, adj_workspace *ws);
int adj_conv_plan_jvp(const adj_conv_plan *plan, const adj_tensor *x, const adj_tensor *w,
                      const adj_tensor *dx, const adj_tensor *dw, const adj_tensor *db, adj_tensor *dy,
                      adj_workspace *ws);
int adj_conv_plan_backward(const adj_conv_plan *plan, const adj_tensor *x, const adj_tensor *w,
                           const adj_tensor *dy, adj_tensor *dx, adj_tensor *dw, adj_tensor *db,
                           adj_workspace *ws);

/* ---- pooling ------------------------------------------------------------------------ */

/* Max pooling ignores padding (a window must hold at least one real element;
 * ties go to the first maximum in row-major window order, and that element
 * receives the whole gradient).  Average pooling divides by the full kernel
 * volume, padding included (PyTorch's count_include_pad=True), so it is a
 * fixed linear map (its jvp is itself).  ADJ_POOL_AVG_EXCLUDE_PAD divides each
 * window by the number of its taps inside the input instead
 * (count_include_pad=False), still a fixed linear map; a window of padding
 * only has no such taps and is refused as for max pooling. */
typedef enum adj_pool_kind { ADJ_POOL_MAX = 0, ADJ_POOL_AVG = 1, ADJ_POOL_AVG_EXCLUDE_PAD = 2 } adj_pool_kind;

int adj_pool_forward(adj_pool_kind kind, const adj_window_geometry *g,
                     const adj_tensor *x, /* (N, C, in...) */
                     adj_tensor *y);      /* (N, C, out...) overwritten */

int adj_pool_jvp(adj_pool_kind kind, const adj_window_geometry *g,
                 const adj_tensor *x,  /* (N, C, in...) the linearisation point */
                 const adj_tensor *dx, /* (N, C, in...) */
                 adj_tensor *dy);      /* (N, C, out...) overwritten */

int adj_pool_backward(adj_pool_kind kind, const adj_window_geometry *g,
                      const adj_tensor *x,  /* (N, C, in...) */
                      const adj_tensor *dy, /* (N, C, out...) */
                      adj_tensor *dx);      /* (N, C, in...) overwritten */

/* ---- affine ------------------------------------------------------------------------- */

/* y = x W^T + b over a batch, one GEMM. */
int adj_affine_forward(const adj_tensor *x, /* (N, F_in) */
                       const adj_tensor *w, /* (F_out, F_in) */
                       const adj_tensor *b, /* (F_out) or NULL */
                       adj_tensor *y);      /* (N, F_out) overwritten */

/* dy = dx W^T + x dW^T + db. */
int adj_affine_jvp(const adj_tensor *x,  /* (N, F_in) */
                   const adj_tensor *w,  /* (F_out, F_in) */
                   const adj_tensor *dx, /* (N, F_in) or NULL */
                   const adj_tensor *dw, /* (F_out, F_in) or NULL */
                   const adj_tensor *db, /* (F_out) or NULL */
                   adj_tensor *dy);      /* (N, F_out) overwritten */

int adj_affine_backward(const adj_tensor *x,  /* (N, F_in) */
                        const adj_tensor *w,  /* (F_out, F_in) */
                        const adj_tensor *dy, /* (N, F_out) */
                        adj_tensor *dx,       /* (N, F_in) overwritten, or NULL */
                        adj_tensor *dw,       /* (F_out, F_in) +=, or NULL */
                        adj_tensor *db);      /* (F_out) +=, or NULL */

/* ---- pointwise activations ---------------------------------------------------------- */

typedef enum adj_activation_kind {
  ADJ_RELU = 0,
  ADJ_LEAKY_RELU = 1, /* x > 0 ? x : negative_slope * x */
  ADJ_TANH = 2,
  ADJ_SIGMOID = 3,
} adj_activation_kind;

typedef struct adj_activation {
  adj_activation_kind kind;
  double negative_slope; /* leaky ReLU only, e.g. 0.01 */
} adj_activation;

/* The Jacobian is diagonal, so jvp and backward compute the same product
 * f'(x) * v; both take the forward INPUT x (not y).  Any shape; in place
 * (y == x, dy == dx) is allowed.  At the kink of (leaky) ReLU, f'(0) is taken
 * from the negative side. */
int adj_activation_forward(const adj_activation *a, const adj_tensor *x, adj_tensor *y);
int adj_activation_jvp(const adj_activation *a, const adj_tensor *x, const adj_tensor *dx, adj_tensor *dy);
int adj_activation_backward(const adj_activation *a, const adj_tensor *x, const adj_tensor *dy, adj_tensor *dx);

/* ---- flatten ------------------------------------------------------------------------ */

/* A view of x (N, d1, d2, ...) as (N, d1*d2*...): no data moves, so flatten is
 * its own Jacobian and its adjoint is the reverse view, adj_unflatten_view. */
int adj_flatten_view(const adj_tensor *x, adj_tensor *view);
/* A view of g (N, F) with the shape (rank, shape) of the unflattened tensor. */
int adj_unflatten_view(const adj_tensor *g, int rank, const int64_t *shape, adj_tensor *view);

/* ---- losses ------------------------------------------------------------------------- */

/* Sum over the batch, or mean: softmax cross-entropy divides by N (samples),
 * mean-squared error by the number of elements (PyTorch's conventions).  A
 * distributed layer whose batch is split uses SUM and scales by the global count. */
typedef enum adj_reduction { ADJ_REDUCE_MEAN = 0, ADJ_REDUCE_SUM = 1 } adj_reduction;

/* loss = reduce_n ( logsumexp(z_n) - z_n[label_n] ), accumulated in float64.
 * labels[n] must lie in [0, C). */
int adj_softmax_xent_forward(const adj_tensor *logits, /* (N, C) */
                             const int64_t *labels,    /* (N) */
                             adj_reduction reduction, double *loss);
/* dloss = reduce_n < softmax(z_n) - onehot(label_n), dz_n >. */
int adj_softmax_xent_jvp(const adj_tensor *logits, /* (N, C) */
                         const int64_t *labels,    /* (N) */
                         adj_reduction reduction,
                         const adj_tensor *dlogits, /* (N, C) */
                         double *dloss);
/* dz = dloss * scale * (softmax(z) - onehot(label)); dloss is 1 for plain training. */
int adj_softmax_xent_backward(const adj_tensor *logits, /* (N, C) */
                              const int64_t *labels,    /* (N) */
                              adj_reduction reduction, double dloss,
                              adj_tensor *dlogits);     /* (N, C) overwritten */

/* loss = reduce (y - target)^2 over every element; the target is data (no gradient). */
int adj_mse_forward(const adj_tensor *y, const adj_tensor *target, adj_reduction reduction, double *loss);
/* dloss = scale * 2 <y - target, dy>. */
int adj_mse_jvp(const adj_tensor *y, const adj_tensor *target, adj_reduction reduction,
                const adj_tensor *dy, double *dloss);
/* dy = dloss * scale * 2 (y - target), overwritten. */
int adj_mse_backward(const adj_tensor *y, const adj_tensor *target, adj_reduction reduction, double dloss,
                     adj_tensor *dy);

ADJ_END_DECLS

#endif

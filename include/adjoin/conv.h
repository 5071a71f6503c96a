/* Convolution kernels on one worker's block, unplanned or through a plan
 * object made once per layer (cross-correlation, the deep-learning
 * "convolution").  Like every local kernel, each exposes the three maps a layer
 * needs at a point (x, w, b) -- forward y = f(x; w, b), jvp dy = J (dx, dw, db)
 * (any perturbation may be NULL = zero) and backward (dx, dw, db) = J^T dy --
 * and jvp/backward pass the dot-product test <J v, u> = <v, J^T u> to
 * round-off.  Layout is row-major, channels first; forward and jvp OVERWRITE
 * their output, backward OVERWRITES dx and ACCUMULATES (+=) into dw and db
 * (NULL skips that gradient); shapes and dtypes are checked and a mismatch
 * fails with ADJ_ERR_SIZE / ADJ_ERR_DTYPE naming the values.  Not collective. */
#ifndef ADJOIN_CONV_H
#define ADJOIN_CONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adjoin/tensor.h"
#include "adjoin/window.h"
#include "adjoin/workspace.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

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

/*
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
 * A forced algorithm (config, or the process's default that a config's AUTO
 * defers to: adj_conv_algorithm_set_default, else the environment variable
 * ADJ_CONV_ALGORITHM=auto|direct|shifted|im2col|measure, read once) runs
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
  adj_conv_algorithm algorithm; /* AUTO (0): the process's default, else the rule */
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

/* The process's default algorithm, which a config's AUTO defers to: what
 * adj_conv_algorithm_set_default set, else ADJ_CONV_ALGORITHM (read at the
 * first call), else AUTO (the rule).  Not collective, but every rank of a
 * distributed layer must set the same.  ADJ_ERR_ARG naming a bad variable's
 * value, a value outside the enum or a NULL pointer. */
int adj_conv_algorithm_get_default(adj_conv_algorithm *algorithm);
int adj_conv_algorithm_set_default(adj_conv_algorithm algorithm);
/* The instruction-set level of the direct kernels this CPU runs:
 * "x86-64-v4", "x86-64-v3" or "baseline". */
const char *adj_kernels_isa(void);

/* As adj_conv_forward / _jvp / _backward, on tensors of the plan's shapes. */
int adj_conv_plan_forward(const adj_conv_plan *plan, const adj_tensor *x, const adj_tensor *w,
                          const adj_tensor *b, adj_tensor *y, adj_workspace *ws);
int adj_conv_plan_jvp(const adj_conv_plan *plan, const adj_tensor *x, const adj_tensor *w,
                      const adj_tensor *dx, const adj_tensor *dw, const adj_tensor *db, adj_tensor *dy,
                      adj_workspace *ws);
int adj_conv_plan_backward(const adj_conv_plan *plan, const adj_tensor *x, const adj_tensor *w,
                           const adj_tensor *dy, adj_tensor *dx, adj_tensor *dw, adj_tensor *db,
                           adj_workspace *ws);

ADJ_END_DECLS

#endif

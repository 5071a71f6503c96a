/* Private helpers shared by the local kernels: argument checks, the window plan
 * (geometry normalised to three spatial dimensions so one loop nest serves 1-D,
 * 2-D and 3-D) and the tap iterator; the GEMM helpers are in blas_impl.h. */
#ifndef ADJOIN_KERNELS_KERNELS_IMPL_H
#define ADJOIN_KERNELS_KERNELS_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "adjoin/activation.h"
#include "adjoin/affine.h"
#include "adjoin/conv.h"
#include "adjoin/loss.h"
#include "adjoin/pool.h"
#include "adjoin/tensor.h"
#include "adjoin/window.h"
#include "adjoin/workspace.h"
#include "adjoin/threads.h"
#include "dtype_impl.h"
#include "error_impl.h"
#include "threads_impl.h"
#include "blas_impl.h"
#include "vectorize_impl.h"

/* ---- argument checks -------------------------------------------------------------- */

/* Fails unless t is non-NULL, has the dtype and exactly the given shape; the
 * message reads "<who>: <name> has shape [..] but needs [..]". */
int adj_check_tensor(const char *who, const char *name, const adj_tensor *t, adj_dtype dtype, int rank,
                     const int64_t *shape);
/* Same, for an optional tensor (NULL passes). */
int adj_check_optional(const char *who, const char *name, const adj_tensor *t, adj_dtype dtype, int rank,
                       const int64_t *shape);
/* Fails unless x is non-NULL with a valid float dtype and the given rank. */
int adj_check_input(const char *who, const char *name, const adj_tensor *x, int rank);

/* ---- window plan ------------------------------------------------------------------ */

typedef struct adj_window_plan {
  int spatial_dims;
  int64_t batch, channels;     /* N and C of the input */
  /* Per spatial dimension, padded at the front to three (extent 1, kernel 1). */
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], pad[3];
  int64_t in_volume, out_volume, kernel_volume;
} adj_window_plan;

/* Validates g against x (N, C, in...) and fills p; `who` prefixes messages. */
int adj_window_plan_make(const char *who, const adj_window_geometry *g, const adj_tensor *x, adj_window_plan *p);
/* The output shape (N, channels, out...) of the plan, returning its rank. */
int adj_window_plan_output_shape(const adj_window_plan *p, int64_t channels, int64_t *shape);

/* Outputs o in [*lo, *hi) read an input index o * stride + offset inside [0, in). */
static inline void adj_valid_range(int64_t offset, int64_t stride, int64_t in, int64_t out, int64_t *lo,
                                   int64_t *hi) {
  int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t last = in - 1 - offset; /* largest o * stride allowed */
  *lo = first < out ? first : out;
  *hi = last < 0 ? 0 : last / stride + 1;
  if (*hi > out) *hi = out;
  if (*hi < *lo) *hi = *lo;
}

/* Iterates the in-bounds taps of the window of one output position; each step
 * yields the flat offset of the tap in an input plane (in_volume elements). */
typedef struct adj_taps {
  const adj_window_plan *p;
  int64_t first[3]; /* input index of tap 0 in each dimension */
  int64_t lo[3], hi[3], j[3];
  bool done;
} adj_taps;

static inline void adj_taps_start(adj_taps *it, const adj_window_plan *p, int64_t flat_output) {
  int64_t o[3] = {flat_output / (p->out[1] * p->out[2]), flat_output / p->out[2] % p->out[1],
                  flat_output % p->out[2]};
  it->p = p;
  it->done = false;
  for (int d = 0; d < 3; d++) {
    it->first[d] = o[d] * p->stride[d] - p->pad[d];
    /* Taps k with 0 <= first + k * dilation < in. */
    adj_valid_range(it->first[d], p->dilation[d], p->in[d], p->kernel[d], &it->lo[d], &it->hi[d]);
    it->j[d] = it->lo[d];
    if (it->lo[d] >= it->hi[d]) it->done = true;
  }
}

static inline bool adj_taps_next(adj_taps *it, int64_t *offset) {
  if (it->done) return false;
  const adj_window_plan *p = it->p;
  int64_t i0 = it->first[0] + it->j[0] * p->dilation[0], i1 = it->first[1] + it->j[1] * p->dilation[1],
          i2 = it->first[2] + it->j[2] * p->dilation[2];
  *offset = (i0 * p->in[1] + i1) * p->in[2] + i2;
  for (int d = 2; d >= 0; d--) { /* odometer over the valid taps */
    if (++it->j[d] < it->hi[d]) return true;
    it->j[d] = it->lo[d];
  }
  it->done = true;
  return true;
}

#endif

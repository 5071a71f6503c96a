/* Convolution through shifted GEMMs, for unit strides and many input channels.
 *
 * With unit strides, kernel tap k reads the zero-padded input shifted by a fixed
 * offset, so over the padded grid  conv(x; w) = sum_k W_k Xp[:, off_k : off_k + L]
 * with W_k the (C_out, C_in) slice of tap k: one GEMM per tap on a strided view
 * of Xp and no im2col, so all the work runs inside OpenBLAS's threads.  Grid
 * rows keep the padded input's length, so the span L holds out_volume plus the
 * positions between output lines, which are computed and dropped (3.5% extra
 * for 56x56 with padding 1).  The input gradient is the adjoint, the same GEMMs
 * transposed adding into a padded dx.  The weight gradient keeps one large
 * GEMM (per-tap GEMMs would have a 64x64 output, too small to run at speed), but
 * its column matrix on the padded grid is one contiguous copy per (channel, tap)
 * row instead of im2col's per-line copies with bounds.  On the 2-core machine
 * (64->64 3x3 56x56 N=32, float32, bench-conv) forward + backward went from
 * 31% of sgemm's rate through im2col, whose copies are single-threaded while
 * OpenBLAS's second thread idles, to 45-48% (forward alone 56%). */

#include <string.h>

#include "conv_plan_impl.h"

enum { ADJ_SHIFT_MIN_CHANNELS = 16 }; /* the GEMMs' inner dimension is C_in */

bool adj_shift_plan_make(const adj_conv_shape *cp, bool any_shape, adj_shift_plan *s) {
  const adj_window_plan *p = &cp->win;
  if (!adj_conv_grid_make(p, &s->grid) || p->batch == 0) return false;
  const adj_conv_grid *g = &s->grid;
  s->bytes = (p->channels * g->volume + cp->c_out * g->span + p->kernel_volume * cp->c_out * p->channels +
              cp->rows * g->span) * (int64_t)adj_dtype_size(cp->dtype);
  return any_shape || (p->channels >= ADJ_SHIFT_MIN_CHANNELS && 4 * g->span <= 5 * p->out_volume);
}

typedef struct adj_shift_buffers {
  void *padded;  /* (C_in, padded volume) */
  void *span;    /* (C_out, L) */
  void *weights; /* (kernel_volume, C_out, C_in): w regrouped by tap */
  void *columns; /* (C_in * kernel_volume, L): the padded grid's column matrix */
} adj_shift_buffers;

static adj_shift_buffers adj_shift_setup(const adj_conv_shape *cp, const adj_shift_plan *s, const adj_tensor *w,
                                         void *ws) {
  const adj_window_plan *p = &cp->win;
  adj_shift_buffers b = {.padded = ws};
  b.span = adj_at(ws, cp->dtype, p->channels * s->grid.volume);
  b.weights = adj_at(b.span, cp->dtype, cp->c_out * s->grid.span);
  b.columns = adj_at(b.weights, cp->dtype, p->kernel_volume * cp->c_out * p->channels);
  size_t es = adj_dtype_size(cp->dtype);
  int64_t pairs = cp->c_out * p->channels;
  for (int64_t k = 0; k < p->kernel_volume; k++)
    for (int64_t i = 0; i < pairs; i++)
      memcpy(adj_at(b.weights, cp->dtype, k * pairs + i), adj_at_const(w->data, cp->dtype, i * p->kernel_volume + k), es);
  memset(b.padded, 0, (size_t)(p->channels * s->grid.volume) * es); /* the padding stays zero */
  return b;
}

/* y = conv(x; w) + b, image by image. */
void adj_shift_forward(const adj_conv_shape *cp, const adj_shift_plan *s, const adj_tensor *x,
                              const adj_tensor *w, const adj_tensor *b, adj_tensor *y, void *ws) {
  const adj_window_plan *p = &cp->win;
  adj_shift_buffers buf = adj_shift_setup(cp, s, w, ws);
  for (int64_t n = 0; n < p->batch; n++) {
    adj_grid_copy(cp->dtype, p->channels, p->in, adj_at(x->data, cp->dtype, n * p->channels * p->in_volume),
                  p->in_volume, s->grid.padded, buf.padded, s->grid.volume, s->grid.origin, true);
    if (b) adj_rows_fill(cp->dtype, buf.span, cp->c_out, s->grid.span, s->grid.span, b->data);
    for (int64_t k = 0; k < p->kernel_volume; k++)
      adj_gemm(cp->dtype, false, false, cp->c_out, s->grid.span, p->channels, 1.0,
               adj_at(buf.weights, cp->dtype, k * cp->c_out * p->channels), p->channels,
               adj_at(buf.padded, cp->dtype, adj_conv_grid_offset(p, &s->grid, k)), s->grid.volume,
               b || k ? 1.0 : 0.0, buf.span, s->grid.span);
    adj_grid_copy(cp->dtype, cp->c_out, p->out, adj_at(y->data, cp->dtype, n * cp->c_out * p->out_volume),
                  p->out_volume, s->grid.padded, buf.span, s->grid.span, 0, false);
  }
}

/* dw += dy X^T for one image whose padded input is in buf.padded and output
 * gradient (dropped positions zero) in buf.span. */
static void adj_shift_weight_gradient(const adj_conv_shape *cp, const adj_shift_plan *s, const adj_shift_buffers *buf,
                                      adj_tensor *dw) {
  const adj_window_plan *p = &cp->win;
  size_t run = (size_t)s->grid.span * adj_dtype_size(cp->dtype);
  for (int64_t ci = 0; ci < p->channels; ci++)
    for (int64_t k = 0; k < p->kernel_volume; k++)
      memcpy(adj_at(buf->columns, cp->dtype, (ci * p->kernel_volume + k) * s->grid.span),
             adj_at(buf->padded, cp->dtype, ci * s->grid.volume + adj_conv_grid_offset(p, &s->grid, k)), run);
  adj_gemm(cp->dtype, false, true, cp->c_out, cp->rows, s->grid.span, 1.0, buf->span, s->grid.span, buf->columns,
           s->grid.span, 1.0, dw->data, cp->rows);
}

/* dx = J_x^T dy (the forward's GEMMs transposed, adding into a padded dx whose
 * interior is then copied out), dw += J_w^T dy, db += J_b^T dy, image by image. */
void adj_shift_backward(const adj_conv_shape *cp, const adj_shift_plan *s, const adj_tensor *x,
                               const adj_tensor *w, const adj_tensor *dy, adj_tensor *dx, adj_tensor *dw,
                               adj_tensor *db, void *ws) {
  const adj_window_plan *p = &cp->win;
  adj_shift_buffers buf = adj_shift_setup(cp, s, w, ws);
  size_t es = adj_dtype_size(cp->dtype);
  for (int64_t n = 0; n < p->batch; n++) {
    memset(buf.span, 0, (size_t)(cp->c_out * s->grid.span) * es); /* dropped positions carry no gradient */
    adj_grid_copy(cp->dtype, cp->c_out, p->out, adj_at(dy->data, cp->dtype, n * cp->c_out * p->out_volume),
                  p->out_volume, s->grid.padded, buf.span, s->grid.span, 0, true);
    if (db) adj_rows_sum_add(cp->dtype, buf.span, cp->c_out, s->grid.span, s->grid.span, db->data);
    if (dw) {
      /* The previous image's dx filled the padding too; the copy below writes only the interior. */
      if (dx && n > 0) memset(buf.padded, 0, (size_t)(p->channels * s->grid.volume) * es);
      adj_grid_copy(cp->dtype, p->channels, p->in, adj_at(x->data, cp->dtype, n * p->channels * p->in_volume),
                    p->in_volume, s->grid.padded, buf.padded, s->grid.volume, s->grid.origin, true);
      adj_shift_weight_gradient(cp, s, &buf, dw);
    }
    if (!dx) continue;
    memset(buf.padded, 0, (size_t)(p->channels * s->grid.volume) * es);
    for (int64_t k = 0; k < p->kernel_volume; k++)
      adj_gemm(cp->dtype, true, false, p->channels, s->grid.span, cp->c_out, 1.0,
               adj_at(buf.weights, cp->dtype, k * cp->c_out * p->channels), p->channels, buf.span, s->grid.span, 1.0,
               adj_at(buf.padded, cp->dtype, adj_conv_grid_offset(p, &s->grid, k)), s->grid.volume);
    adj_grid_copy(cp->dtype, p->channels, p->in, adj_at(dx->data, cp->dtype, n * p->channels * p->in_volume),
                  p->in_volume, s->grid.padded, buf.padded, s->grid.volume, s->grid.origin, false);
  }
}

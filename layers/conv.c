/* Convolution: forward, jvp and backward through GEMMs.
 *
 * General path (any stride): im2col + GEMM.  The output positions are cut into
 * tiles, one GEMM each, sized so the tile's column matrix (C_in * kernel_volume
 * rows) holds about ADJ_CONV_TILE_ELEMENTS entries: wide enough for OpenBLAS,
 * small enough to stay in cache between im2col writing it and the GEMM reading
 * it.  Small images are grouped, several whole images per tile, so LeNet's
 * 10x10 outputs still give wide GEMMs; their output, (C_out, images *
 * out_volume), is then shuffled into (N, C_out, out...).  A tile of one image
 * writes straight into y.
 *
 * Unit-stride paths (forward and backward): with 16 or more input channels,
 * one GEMM per kernel tap on a padded copy of the input, no im2col ("shifted
 * GEMMs" below); with fewer, whose GEMMs are too thin for BLAS, the direct
 * vectorized loops of conv_direct.c.  The jvp always takes the general path. */
#include <stdint.h>
#include <string.h>

#include "conv_impl.h"

#define ADJ_TYPED_FILE "conv_typed.inc"
#include "instantiate.h"

enum {
  ADJ_CONV_TILE_ELEMENTS = 1 << 18, /* column-matrix entries per tile: 1 MiB in float32 */
  ADJ_CONV_MIN_COLUMNS = 256,       /* narrower GEMMs lose OpenBLAS's speed */
};

typedef struct adj_conv_plan {
  adj_window_plan win;
  adj_dtype dtype;
  int rank;
  int64_t c_out;
  int64_t rows;       /* C_in * kernel_volume: the GEMM inner dimension */
  int64_t lines;      /* output lines per image: out[0] * out[1], each out[2] long */
  int64_t line_bytes; /* workspace one output line needs: its columns and its output */
  int64_t y_shape[2 + ADJ_MAX_SPATIAL_DIMS];
} adj_conv_plan;

/* The output positions one GEMM handles: images [n0, n0 + images) whole, or
 * output lines [l0, l1) of image n0 alone. */
typedef struct adj_conv_tile {
  int64_t n0, images, l0, l1;
} adj_conv_tile;

static int adj_conv_plan_make(const char *who, const adj_window_geometry *g, const adj_tensor *x,
                              const adj_tensor *w, adj_conv_plan *cp) {
  ADJ_CALL(adj_window_plan_make(who, g, x, &cp->win));
  const adj_window_plan *p = &cp->win;
  cp->dtype = x->dtype;
  cp->rank = 2 + p->spatial_dims;
  ADJ_CALL(adj_check_input(who, "weights w (C_out, C_in, kernel...)", w, cp->rank));
  char w_text[160], x_text[160];
  ADJ_CHECK(w->shape[1] == p->channels, ADJ_ERR_SIZE,
            "%s: weights %s have %lld input channels but the input %s has %lld", who,
            adj_shape_format(w_text, sizeof w_text, w->rank, w->shape), (long long)w->shape[1],
            adj_shape_format(x_text, sizeof x_text, x->rank, x->shape), (long long)p->channels);
  int64_t w_shape[2 + ADJ_MAX_SPATIAL_DIMS] = {w->shape[0], p->channels};
  for (int d = 0; d < p->spatial_dims; d++) w_shape[2 + d] = g->kernel[d];
  ADJ_CALL(adj_check_tensor(who, "weights w", w, cp->dtype, cp->rank, w_shape));
  cp->c_out = w->shape[0];
  cp->rows = p->channels * p->kernel_volume;
  cp->lines = p->out[0] * p->out[1];
  adj_window_plan_output_shape(p, cp->c_out, cp->y_shape);
  ADJ_CALL(adj_check_blas_dim(who, "C_in * kernel volume", cp->rows));
  ADJ_CALL(adj_check_blas_dim(who, "C_out", cp->c_out));
  ADJ_CALL(adj_check_blas_dim(who, "batch * output volume", p->batch * p->out_volume));
  cp->line_bytes = (cp->rows + cp->c_out) * p->out[2] * (int64_t)adj_dtype_size(cp->dtype);
  return ADJ_SUCCESS;
}

/* Tile shape (images per tile, lines per tile) for a workspace of `budget`
 * bytes; *images is 0 when there is nothing to compute. */
static void adj_conv_tiling(const adj_conv_plan *cp, size_t budget, int64_t *images, int64_t *lines) {
  *images = *lines = 0;
  if (cp->win.batch == 0 || cp->line_bytes == 0) return;
  int64_t width = cp->win.out[2], target = ADJ_CONV_TILE_ELEMENTS / (cp->rows ? cp->rows : 1);
  if (target < ADJ_CONV_MIN_COLUMNS) target = ADJ_CONV_MIN_COLUMNS;
  *images = 1;
  *lines = target / width < 1 ? 1 : target / width;
  if (*lines >= cp->lines) { /* whole images fit: group several */
    *lines = cp->lines;
    *images = target / (cp->lines * width);
    *images = *images < 1 ? 1 : *images > cp->win.batch ? cp->win.batch : *images;
  }
  int64_t fit = (int64_t)(budget / (size_t)cp->line_bytes); /* lines the workspace holds */
  if (*images * *lines <= fit) return;
  if (fit >= cp->lines) *images = fit / cp->lines;
  else *images = 1, *lines = fit;
}

/* Fails unless the caller's workspace holds at least one output line. */
static int adj_conv_fit(const char *who, const adj_conv_plan *cp, const adj_workspace *ws) {
  size_t have = ws && ws->data ? ws->bytes : 0;
  int64_t images, lines;
  adj_conv_tiling(cp, have, &images, &lines);
  ADJ_CHECK(images == 0 || lines > 0, ADJ_ERR_SIZE,
            "%s: workspace holds %zu bytes but one output line needs %lld (size it with adj_conv_workspace_size)",
            who, have, (long long)cp->line_bytes);
  return ADJ_SUCCESS;
}

/* ---- tile helpers ----------------------------------------------------------------- */

static int64_t adj_tile_columns(const adj_conv_plan *cp, const adj_conv_tile *t) {
  return t->images * (t->l1 - t->l0) * cp->win.out[2];
}

/* Offset of the tile's first output position in an (N, C_out, out...) tensor. */
static int64_t adj_tile_output_offset(const adj_conv_plan *cp, const adj_conv_tile *t) {
  return t->n0 * cp->c_out * cp->win.out_volume + t->l0 * cp->win.out[2];
}

/* The tile's columns of x (N, C_in, in...) side by side in col (rows, columns);
 * or, with to_col false, their col2im added into x. */
static void adj_conv_tile_columns(const adj_conv_plan *cp, const adj_conv_tile *t, const void *x, void *col,
                                  bool to_col) {
  const adj_window_plan *p = &cp->win;
  int64_t per_image = (t->l1 - t->l0) * p->out[2];
  for (int64_t i = 0; i < t->images; i++)
    ADJ_DISPATCH(cp->dtype, col_transfer, p, adj_at((void *)x, cp->dtype, (t->n0 + i) * p->channels * p->in_volume),
                 adj_at(col, cp->dtype, i * per_image), adj_tile_columns(cp, t), t->l0, t->l1, to_col);
}

/* Moves a tile of whole images between layout (images, C_out, out_volume) in t
 * and the GEMM layout (C_out, images * out_volume) in matrix. */
static void adj_conv_shuffle(const adj_conv_plan *cp, const adj_conv_tile *tile, void *t /* (N, C_out, out...) */,
                             void *matrix, bool to_matrix) {
  int64_t ov = cp->win.out_volume;
  size_t run = (size_t)ov * adj_dtype_size(cp->dtype);
  for (int64_t i = 0; i < tile->images; i++)
    for (int64_t co = 0; co < cp->c_out; co++) {
      void *image = adj_at(t, cp->dtype, ((tile->n0 + i) * cp->c_out + co) * ov);
      void *column = adj_at(matrix, cp->dtype, co * tile->images * ov + i * ov);
      if (to_matrix) memcpy(column, image, run);
      else memcpy(image, column, run);
    }
}

/* One output term: conv(x; w) contributes when both are given (the jvp's dx or dw may be NULL). */
typedef struct adj_conv_term {
  const adj_tensor *x; /* (N, C_in, in...) */
  const adj_tensor *w; /* (C_out, C_in, kernel...) */
} adj_conv_term;

/* y[tile] = sum_t conv(x_t; w_t) + b. */
static void adj_conv_tile_forward(const adj_conv_plan *cp, const adj_conv_tile *t, int n_terms,
                                  const adj_conv_term *terms, const adj_tensor *b, adj_tensor *y, void *ws) {
  int64_t cols = adj_tile_columns(cp, t);
  bool direct = t->images == 1; /* a one-image tile is a strided block of y */
  void *col = ws;
  void *out = direct ? adj_at(y->data, cp->dtype, adj_tile_output_offset(cp, t)) : adj_at(ws, cp->dtype, cp->rows * cols);
  int64_t ld = direct ? cp->win.out_volume : cols;
  double beta = 0.0;
  if (b) {
    adj_rows_fill(cp->dtype, out, cp->c_out, cols, ld, b->data);
    beta = 1.0;
  }
  for (int k = 0; k < n_terms; k++) {
    if (!terms[k].x || !terms[k].w) continue;
    adj_conv_tile_columns(cp, t, terms[k].x->data, col, true);
    adj_gemm(cp->dtype, false, false, cp->c_out, cols, cp->rows, 1.0, terms[k].w->data, cp->rows, col, cols, beta,
             out, ld);
    beta = 1.0;
  }
  for (int64_t r = 0; beta == 0.0 && r < cp->c_out; r++) /* no term at all: the tile is zero */
    memset(adj_at(out, cp->dtype, r * ld), 0, (size_t)cols * adj_dtype_size(cp->dtype));
  if (!direct) adj_conv_shuffle(cp, t, y->data, out, false);
}

/* Steps *t through the batch's tiles in order; start from a zeroed tile. */
static bool adj_conv_next_tile(const adj_conv_plan *cp, int64_t images, int64_t lines, adj_conv_tile *t) {
  if (t->images > 0 && t->l1 == cp->lines) t->n0 += t->images, t->l1 = 0;
  if (images == 0 || t->n0 >= cp->win.batch) return false;
  t->images = cp->win.batch - t->n0 < images ? cp->win.batch - t->n0 : images;
  t->l0 = t->l1;
  t->l1 = t->l0 + lines < cp->lines ? t->l0 + lines : cp->lines;
  return true;
}

/* ---- unit-stride fast path: shifted GEMMs ---------------------------------------------
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

enum { ADJ_SHIFT_MIN_CHANNELS = 16 }; /* the GEMMs' inner dimension is C_in */

typedef struct adj_shift_plan {
  adj_conv_grid grid;
  int64_t bytes; /* workspace: padded input, output span, tap-major weights, columns */
} adj_shift_plan;

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

/* Fills s when the fast path applies: unit strides, enough input channels and
 * at most 25% of grid positions wasted. */
static bool adj_shift_plan_make(const adj_conv_plan *cp, adj_shift_plan *s) {
  const adj_window_plan *p = &cp->win;
  if (!adj_conv_grid_make(p, &s->grid)) return false;
  const adj_conv_grid *g = &s->grid;
  s->bytes = (p->channels * g->volume + cp->c_out * g->span + p->kernel_volume * cp->c_out * p->channels +
              cp->rows * g->span) * (int64_t)adj_dtype_size(cp->dtype);
  return p->channels >= ADJ_SHIFT_MIN_CHANNELS && 4 * g->span <= 5 * p->out_volume && p->batch > 0;
}

typedef struct adj_shift_buffers {
  void *padded;  /* (C_in, padded volume) */
  void *span;    /* (C_out, L) */
  void *weights; /* (kernel_volume, C_out, C_in): w regrouped by tap */
  void *columns; /* (C_in * kernel_volume, L): the padded grid's column matrix */
} adj_shift_buffers;

static adj_shift_buffers adj_shift_setup(const adj_conv_plan *cp, const adj_shift_plan *s, const adj_tensor *w,
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
static void adj_shift_forward(const adj_conv_plan *cp, const adj_shift_plan *s, const adj_tensor *x,
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
static void adj_shift_weight_gradient(const adj_conv_plan *cp, const adj_shift_plan *s, const adj_shift_buffers *buf,
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
static void adj_shift_backward(const adj_conv_plan *cp, const adj_shift_plan *s, const adj_tensor *x,
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

/* The fast path applies and the workspace holds its buffers. */
static bool adj_shift_usable(const adj_conv_plan *cp, const adj_workspace *ws, adj_shift_plan *s) {
  return adj_shift_plan_make(cp, s) && ws && ws->data && ws->bytes >= (size_t)s->bytes;
}

/* ---- batch-parallel driver ----------------------------------------------------------
 *
 * Images are independent, so a team of threads (adjoin/threads.h) splits the
 * batch into contiguous shares and each member runs the serial paths above on
 * its share, with its own slice of the workspace and BLAS single-threaded.
 * LeNet's GEMMs (6 x 25 and 16 x 150 weights) are too small for OpenBLAS to
 * split, and the im2col copies, which were single-threaded, now run on every
 * core.  Weight and bias gradients are sums over the batch: member 0 adds into
 * dw and db, the others into zeroed scratch at the end of their slice, which
 * is added in member order afterwards, so for a fixed team the sum order, and
 * the result, is the same run to run. */


/* Bytes of one member's gradient scratch (dw then db). */
static size_t adj_conv_scratch_bytes(const adj_conv_plan *cp) {
  return adj_align64((size_t)(cp->c_out * cp->rows + cp->c_out) * adj_dtype_size(cp->dtype));
}

/* What one member working on `images` images would like: the larger of the two
 * paths' workspaces. */
static size_t adj_conv_member_bytes(const adj_conv_plan *cp, int64_t images) {
  adj_conv_plan share = *cp;
  share.win.batch = images;
  int64_t tile_images, lines;
  adj_conv_tiling(&share, SIZE_MAX, &tile_images, &lines);
  size_t bytes = (size_t)(tile_images * lines * cp->line_bytes);
  adj_shift_plan s;
  if (adj_shift_plan_make(&share, &s) && (size_t)s.bytes > bytes) bytes = (size_t)s.bytes;
  adj_conv_direct d;
  if (adj_conv_direct_make(&share.win, cp->c_out, cp->dtype, &d) && d.bytes > bytes) bytes = d.bytes;
  return adj_align64(bytes);
}

/* The team for this call: adj_team_size over the images, shrunk until each
 * member's slice of ws holds one output line and its scratch. */
static int adj_conv_team(const adj_conv_plan *cp, const adj_workspace *ws) {
  const adj_window_plan *p = &cp->win;
  int team = adj_team_size(p->batch, p->batch * p->out_volume * cp->rows * cp->c_out);
  size_t have = ws && ws->data ? ws->bytes : 0;
  while (team > 1 && have / (size_t)team < (size_t)cp->line_bytes + adj_conv_scratch_bytes(cp) + 64) team--;
  return team;
}

int adj_conv_workspace_size(const adj_window_geometry *g, const adj_tensor *x, const adj_tensor *w,
                            size_t *bytes) {
  adj_conv_plan cp;
  ADJ_CALL(adj_conv_plan_make("conv workspace", g, x, w, &cp));
  ADJ_CHECK(bytes, ADJ_ERR_ARG, "conv workspace: bytes is NULL");
  const adj_window_plan *p = &cp.win;
  int team = adj_team_size(p->batch, p->batch * p->out_volume * cp.rows * cp.c_out);
  if (team == 1) {
    *bytes = adj_conv_member_bytes(&cp, p->batch);
    return ADJ_SUCCESS;
  }
  int64_t first, largest;
  adj_team_range(p->batch, team, 0, &first, &largest); /* member 0 has the largest share */
  *bytes = (size_t)team * (adj_conv_member_bytes(&cp, largest) + adj_conv_scratch_bytes(&cp));
  return ADJ_SUCCESS;
}

/* ---- forward / jvp / backward ------------------------------------------------------ */

static void adj_conv_apply(const adj_conv_plan *cp, int64_t images, int64_t lines, int n_terms,
                           const adj_conv_term *terms, const adj_tensor *b, adj_tensor *y, adj_workspace *ws) {
  for (adj_conv_tile t = {0}; adj_conv_next_tile(cp, images, lines, &t);)
    adj_conv_tile_forward(cp, &t, n_terms, terms, b, y, ws->data);
}

/* Gradient contributions of one tile; dx is cleared when its first tile of an image arrives. */
static void adj_conv_tile_backward(const adj_conv_plan *cp, const adj_conv_tile *t, const adj_tensor *x,
                                   const adj_tensor *w, const adj_tensor *dy, adj_tensor *dx, adj_tensor *dw,
                                   adj_tensor *db, void *ws) {
  const adj_window_plan *p = &cp->win;
  int64_t cols = adj_tile_columns(cp, t);
  bool direct = t->images == 1;
  void *col = ws;
  void *grad = adj_at(dy->data, cp->dtype, adj_tile_output_offset(cp, t));
  int64_t ld = direct ? p->out_volume : cols;
  if (!direct) {
    grad = adj_at(ws, cp->dtype, cp->rows * cols);
    adj_conv_shuffle(cp, t, dy->data, grad, true);
  }
  if (db) adj_rows_sum_add(cp->dtype, grad, cp->c_out, cols, ld, db->data);
  if (dw) {
    adj_conv_tile_columns(cp, t, x->data, col, true);
    adj_gemm(cp->dtype, false, true, cp->c_out, cp->rows, cols, 1.0, grad, ld, col, cols, 1.0, dw->data, cp->rows);
  }
  if (dx) {
    adj_gemm(cp->dtype, true, false, cp->rows, cols, cp->c_out, 1.0, w->data, cp->rows, grad, ld, 0.0, col, cols);
    if (t->l0 == 0)
      memset(adj_at(dx->data, cp->dtype, t->n0 * p->channels * p->in_volume), 0,
             (size_t)(t->images * p->channels * p->in_volume) * adj_dtype_size(cp->dtype));
    adj_conv_tile_columns(cp, t, dx->data, col, false);
  }
}

typedef enum adj_conv_pass { ADJ_CONV_FORWARD, ADJ_CONV_JVP, ADJ_CONV_BACKWARD } adj_conv_pass;

/* Every tensor one call touches.  x, dx, y, dy and gx carry the batch and are
 * cut per team member; the others are shared (gw, gb get scratch). */
typedef struct adj_conv_call {
  adj_conv_pass pass;
  const adj_tensor *x, *w, *b;    /* input, weights, bias (optional) */
  const adj_tensor *dx, *dw, *db; /* jvp: perturbations (each optional) */
  const adj_tensor *dy;           /* backward: output gradient */
  adj_tensor *y;                  /* forward: output; jvp: its perturbation */
  adj_tensor *gx, *gw, *gb;       /* backward: gradients (each optional) */
} adj_conv_call;

/* The call on the calling thread: the shifted-GEMM path when it applies and
 * the workspace holds it, else tiles of im2col + GEMM. */
static void adj_conv_run_serial(const adj_conv_plan *cp, const adj_conv_call *c, adj_workspace *ws) {
  int64_t images, lines;
  adj_conv_tiling(cp, ws->bytes, &images, &lines);
  adj_shift_plan s;
  adj_conv_direct d;
  bool direct = c->pass != ADJ_CONV_JVP && adj_conv_direct_make(&cp->win, cp->c_out, cp->dtype, &d) &&
                ws->bytes >= d.bytes;
  bool shift = c->pass != ADJ_CONV_JVP && adj_shift_usable(cp, ws, &s);
  if (c->pass == ADJ_CONV_FORWARD && direct) adj_conv_direct_forward(&cp->win, &d, c->x, c->w, c->b, c->y, ws->data);
  else if (c->pass == ADJ_CONV_BACKWARD && direct)
    adj_conv_direct_backward(&cp->win, &d, c->x, c->w, c->dy, c->gx, c->gw, c->gb, ws->data);
  else if (c->pass == ADJ_CONV_FORWARD && shift) adj_shift_forward(cp, &s, c->x, c->w, c->b, c->y, ws->data);
  else if (c->pass == ADJ_CONV_FORWARD) adj_conv_apply(cp, images, lines, 1, &(adj_conv_term){c->x, c->w}, c->b, c->y, ws);
  else if (c->pass == ADJ_CONV_JVP) {
    /* Product rule of the bilinear map (x, w) -> conv(x; w). */
    adj_conv_term terms[2] = {{c->dx, c->w}, {c->x, c->dw}};
    adj_conv_apply(cp, images, lines, 2, terms, c->db, c->y, ws);
  } else if (shift) adj_shift_backward(cp, &s, c->x, c->w, c->dy, c->gx, c->gw, c->gb, ws->data);
  else
    for (adj_conv_tile t = {0}; adj_conv_next_tile(cp, images, lines, &t);)
      adj_conv_tile_backward(cp, &t, c->x, c->w, c->dy, c->gx, c->gw, c->gb, ws->data);
}

/* Images [first, first + count) of a batch tensor (NULL stays NULL). */
static adj_tensor *adj_batch_share(const adj_tensor *t, int64_t first, int64_t count, adj_tensor *view) {
  if (!t) return NULL;
  int64_t shape[ADJ_MAX_RANK], per_image = t->shape[0] ? adj_tensor_volume(t) / t->shape[0] : 0;
  memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->rank);
  shape[0] = count;
  adj_tensor_view(view, t->dtype, t->rank, shape, adj_at(t->data, t->dtype, first * per_image));
  return view;
}

/* Views of the gradient scratch at the end of a member's slice, shaped like
 * c->gw and c->gb (NULL where the call has none). */
static void adj_conv_scratch_views(const adj_conv_plan *cp, const adj_conv_call *c, void *slice, size_t slice_bytes,
                                   adj_tensor *gw, adj_tensor *gb, adj_tensor **gw_out, adj_tensor **gb_out) {
  void *scratch = (char *)slice + slice_bytes - adj_conv_scratch_bytes(cp);
  *gw_out = *gb_out = NULL;
  if (c->gw) adj_tensor_view(gw, cp->dtype, c->gw->rank, c->gw->shape, scratch), *gw_out = gw;
  if (c->gb)
    adj_tensor_view(gb, cp->dtype, 1, &cp->c_out, adj_at(scratch, cp->dtype, cp->c_out * cp->rows)), *gb_out = gb;
}

/* Member `member`'s share of the call, its gradients in `scratch` unless it is member 0. */
static void adj_conv_member(const adj_conv_plan *cp, const adj_conv_call *c, int team, int member, void *slice,
                            size_t slice_bytes) {
  int64_t first, count;
  adj_team_range(cp->win.batch, team, member, &first, &count);
  adj_conv_plan share = *cp;
  share.win.batch = count;
  adj_tensor views[7];
  adj_conv_call mine = *c;
  mine.x = adj_batch_share(c->x, first, count, &views[0]);
  mine.dx = adj_batch_share(c->dx, first, count, &views[1]);
  mine.dy = adj_batch_share(c->dy, first, count, &views[2]);
  mine.y = adj_batch_share(c->y, first, count, &views[3]);
  mine.gx = adj_batch_share(c->gx, first, count, &views[4]);
  size_t scratch = adj_conv_scratch_bytes(cp);
  if (member > 0 && c->pass == ADJ_CONV_BACKWARD) {
    memset((char *)slice + slice_bytes - scratch, 0, scratch);
    adj_conv_scratch_views(cp, c, slice, slice_bytes, &views[5], &views[6], &mine.gw, &mine.gb);
  }
  adj_workspace own = {.data = slice, .bytes = slice_bytes - scratch};
  adj_conv_run_serial(&share, &mine, &own);
}

/* The call over a team (see "batch-parallel driver"). */
static void adj_conv_run(const adj_conv_plan *cp, const adj_conv_call *c, adj_workspace *ws) {
  int team = adj_conv_team(cp, ws);
  if (team == 1) {
    adj_conv_run_serial(cp, c, ws);
    return;
  }
  size_t slice = ws->bytes / (size_t)team / 64 * 64; /* aligned; adj_conv_team left room for the rounding */
  adj_blas_leave_threads_to_teams(team);
#pragma omp parallel for num_threads(team) schedule(static, 1)
  for (int member = 0; member < team; member++)
    adj_conv_member(cp, c, team, member, (char *)ws->data + (size_t)member * slice, slice);
  if (c->pass != ADJ_CONV_BACKWARD) return;
  for (int member = 1; member < team; member++) { /* in member order: a fixed sum order */
    adj_tensor gw, gb, *gw_part, *gb_part;
    adj_conv_scratch_views(cp, c, (char *)ws->data + (size_t)member * slice, slice, &gw, &gb, &gw_part, &gb_part);
    if (gw_part) adj_tensor_add(c->gw, gw_part);
    if (gb_part) adj_tensor_add(c->gb, gb_part);
  }
}

int adj_conv_forward(const adj_window_geometry *g, const adj_tensor *x, const adj_tensor *w, const adj_tensor *b,
                     adj_tensor *y, adj_workspace *ws) {
  static const char who[] = "conv forward";
  adj_conv_plan cp;
  ADJ_CALL(adj_conv_plan_make(who, g, x, w, &cp));
  ADJ_CALL(adj_check_optional(who, "bias b", b, cp.dtype, 1, &cp.c_out));
  ADJ_CALL(adj_check_tensor(who, "output y", y, cp.dtype, cp.rank, cp.y_shape));
  ADJ_CALL(adj_conv_fit(who, &cp, ws));
  adj_conv_run(&cp, &(adj_conv_call){.pass = ADJ_CONV_FORWARD, .x = x, .w = w, .b = b, .y = y}, ws);
  return ADJ_SUCCESS;
}

int adj_conv_jvp(const adj_window_geometry *g, const adj_tensor *x, const adj_tensor *w, const adj_tensor *dx,
                 const adj_tensor *dw, const adj_tensor *db, adj_tensor *dy, adj_workspace *ws) {
  static const char who[] = "conv jvp";
  adj_conv_plan cp;
  ADJ_CALL(adj_conv_plan_make(who, g, x, w, &cp));
  ADJ_CALL(adj_check_optional(who, "input perturbation dx", dx, cp.dtype, x->rank, x->shape));
  ADJ_CALL(adj_check_optional(who, "weight perturbation dw", dw, cp.dtype, w->rank, w->shape));
  ADJ_CALL(adj_check_optional(who, "bias perturbation db", db, cp.dtype, 1, &cp.c_out));
  ADJ_CALL(adj_check_tensor(who, "output dy", dy, cp.dtype, cp.rank, cp.y_shape));
  ADJ_CALL(adj_conv_fit(who, &cp, ws));
  adj_conv_call c = {.pass = ADJ_CONV_JVP, .x = x, .w = w, .dx = dx, .dw = dw, .db = db, .y = dy};
  adj_conv_run(&cp, &c, ws);
  return ADJ_SUCCESS;
}

int adj_conv_backward(const adj_window_geometry *g, const adj_tensor *x, const adj_tensor *w, const adj_tensor *dy,
                      adj_tensor *dx, adj_tensor *dw, adj_tensor *db, adj_workspace *ws) {
  static const char who[] = "conv backward";
  adj_conv_plan cp;
  ADJ_CALL(adj_conv_plan_make(who, g, x, w, &cp));
  ADJ_CALL(adj_check_tensor(who, "output gradient dy", dy, cp.dtype, cp.rank, cp.y_shape));
  ADJ_CALL(adj_check_optional(who, "input gradient dx", dx, cp.dtype, x->rank, x->shape));
  ADJ_CALL(adj_check_optional(who, "weight gradient dw", dw, cp.dtype, w->rank, w->shape));
  ADJ_CALL(adj_check_optional(who, "bias gradient db", db, cp.dtype, 1, &cp.c_out));
  ADJ_CALL(adj_conv_fit(who, &cp, ws));
  adj_conv_call c = {.pass = ADJ_CONV_BACKWARD, .x = x, .w = w, .dy = dy, .gx = dx, .gw = dw, .gb = db};
  adj_conv_run(&cp, &c, ws);
  return ADJ_SUCCESS;
}

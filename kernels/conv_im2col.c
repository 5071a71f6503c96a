/* Convolution through im2col + GEMM: the general path, any stride, and the
 * jvp's only one.
 *
 * The output positions are cut into tiles, one GEMM each, sized so the
 * tile's column matrix (C_in * kernel_volume rows) holds about
 * ADJ_CONV_TILE_ELEMENTS entries: wide enough for OpenBLAS, small enough to
 * stay in cache between im2col writing it and the GEMM reading it.  Small
 * images are grouped, several whole images per tile, so LeNet's 10x10
 * outputs still give wide GEMMs; their output, (C_out, images *
 * out_volume), is then shuffled into (N, C_out, out...).  A tile of one
 * image writes straight into y.
 *
 * The forward's GEMMs are cut into calls of exactly ADJ_CONV_GEMM_COLUMNS
 * positions, the tile's last padded with zero columns.  OpenBLAS rounds an
 * output by its place in a register block and picks kernels by the matrix
 * width, so an output's value would otherwise depend on where its tile
 * starts and how wide it is; with every call alike it does not (float64 on
 * the Haswell, Zen, SkylakeX and Sandybridge kernels), and a deep halo run,
 * which computes the same outputs in wider tiles, equals the layer-by-layer
 * run bit for bit. */
#include <stdint.h>
#include <string.h>

#include "conv_plan_impl.h"

#define ADJ_TYPED_FILE "conv_im2col_typed.inc"
#include "instantiate.h"

enum {
  ADJ_CONV_TILE_ELEMENTS = 1 << 18, /* column-matrix entries per tile: 1 MiB in float32 */
  ADJ_CONV_MIN_COLUMNS = 256,       /* narrower GEMMs lose OpenBLAS's speed */
};

/* The output positions one GEMM handles: images [n0, n0 + images) whole, or
 * output lines [l0, l1) of image n0 alone. */
typedef struct adj_conv_tile {
  int64_t n0, images, l0, l1;
} adj_conv_tile;

void adj_conv_tiling(const adj_conv_shape *cp, size_t budget, int64_t *images, int64_t *lines) {
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
  /* Lines the workspace holds beside the last GEMM call's padding; a
   * workspace too small for both gets unpadded tiles (adj_conv_tile_forward). */
  size_t line = (size_t)cp->line_bytes, pad = (size_t)cp->pad_bytes;
  int64_t fit = (int64_t)(budget >= line + pad ? (budget - pad) / line : budget / line);
  if (*images * *lines <= fit) return;
  if (fit >= cp->lines) *images = fit / cp->lines;
  else *images = 1, *lines = fit;
}

/* ---- tile helpers ----------------------------------------------------------------- */

static int64_t adj_tile_columns(const adj_conv_shape *cp, const adj_conv_tile *t) {
  return t->images * (t->l1 - t->l0) * cp->win.out[2];
}

/* Offset of the tile's first output position in an (N, C_out, out...) tensor. */
static int64_t adj_tile_output_offset(const adj_conv_shape *cp, const adj_conv_tile *t) {
  return t->n0 * cp->c_out * cp->win.out_volume + t->l0 * cp->win.out[2];
}

/* The tile's columns of x (N, C_in, in...) side by side in col (rows, columns;
 * rows ld apart); or, with to_col false, their col2im added into x. */
static void adj_conv_tile_columns(const adj_conv_shape *cp, const adj_conv_tile *t, const void *x, void *col,
                                  int64_t ld, bool to_col) {
  const adj_window_plan *p = &cp->win;
  int64_t per_image = (t->l1 - t->l0) * p->out[2];
  for (int64_t i = 0; i < t->images; i++)
    ADJ_DISPATCH(cp->dtype, col_transfer, p, adj_at((void *)x, cp->dtype, (t->n0 + i) * p->channels * p->in_volume),
                 adj_at(col, cp->dtype, i * per_image), ld, t->l0, t->l1, to_col);
}

/* Moves a tile of whole images between layout (images, C_out, out_volume) in t
 * and the GEMM layout (C_out, images * out_volume; rows ld apart) in matrix. */
static void adj_conv_shuffle(const adj_conv_shape *cp, const adj_conv_tile *tile, void *t /* (N, C_out, out...) */,
                             void *matrix, int64_t ld, bool to_matrix) {
  int64_t ov = cp->win.out_volume;
  size_t run = (size_t)ov * adj_dtype_size(cp->dtype);
  for (int64_t i = 0; i < tile->images; i++)
    for (int64_t co = 0; co < cp->c_out; co++) {
      void *image = adj_at(t, cp->dtype, ((tile->n0 + i) * cp->c_out + co) * ov);
      void *column = adj_at(matrix, cp->dtype, co * ld + i * ov);
      if (to_matrix) memcpy(column, image, run);
      else memcpy(image, column, run);
    }
}

/* out (C_out, cols; rows ld apart) = w col + beta out, in GEMM calls of
 * ADJ_CONV_GEMM_COLUMNS positions; col's rows are wide apart, wide being
 * cols rounded up to that with zero padding columns (or cols itself when the
 * workspace has no room: the last call is then narrower).  Unless out has room for the last
 * call's padding (a tile writing into y has none: its rows run on into the
 * next lines and channels), that call goes through spare (C_out,
 * ADJ_CONV_GEMM_COLUMNS). */
static void adj_conv_gemm_chunks(const adj_conv_shape *cp, const void *w, const void *col, int64_t cols, int64_t wide,
                                 double beta, void *out, int64_t ld, bool room, void *spare) {
  const int64_t chunk = ADJ_CONV_GEMM_COLUMNS;
  size_t es = adj_dtype_size(cp->dtype);
  for (int64_t s = 0; s < cols; s += chunk) {
    int64_t n = cols - s < chunk ? cols - s : chunk;
    bool padded = n < chunk && wide > cols; /* the last call, run over zero columns */
    const void *b = adj_at_const(col, cp->dtype, s);
    if (!padded || room) {
      adj_gemm(cp->dtype, false, false, cp->c_out, padded ? chunk : n, cp->rows, 1.0, w, cp->rows, b, wide, beta,
               adj_at(out, cp->dtype, s), ld);
      continue;
    }
    for (int64_t r = 0; beta != 0.0 && r < cp->c_out; r++)
      memcpy(adj_at(spare, cp->dtype, r * chunk), adj_at(out, cp->dtype, r * ld + s), (size_t)n * es);
    adj_gemm(cp->dtype, false, false, cp->c_out, chunk, cp->rows, 1.0, w, cp->rows, b, wide, beta, spare, chunk);
    for (int64_t r = 0; r < cp->c_out; r++)
      memcpy(adj_at(out, cp->dtype, r * ld + s), adj_at(spare, cp->dtype, r * chunk), (size_t)n * es);
  }
}

/* y[tile] = sum_t conv(x_t; w_t) + b; a term contributes when both its x and
 * w are given (the jvp's dx or dw may be NULL). */
static void adj_conv_tile_forward(const adj_conv_shape *cp, const adj_conv_tile *t, int n_terms,
                                  const adj_conv_term *terms, const adj_tensor *b, adj_tensor *y,
                                  const adj_workspace *ws) {
  size_t es = adj_dtype_size(cp->dtype);
  int64_t cols = adj_tile_columns(cp, t);
  int64_t wide = (cols + ADJ_CONV_GEMM_COLUMNS - 1) / ADJ_CONV_GEMM_COLUMNS * ADJ_CONV_GEMM_COLUMNS;
  /* Below adj_conv_workspace_size's bytes the padding may not fit: then the
   * last call is narrower, the result the same up to rounding. */
  if ((size_t)((cp->rows + cp->c_out) * wide) * es > ws->bytes) wide = cols;
  bool direct = t->images == 1; /* a one-image tile is a strided block of y */
  void *col = ws->data, *matrix = adj_at(ws->data, cp->dtype, cp->rows * wide);
  void *out = direct ? adj_at(y->data, cp->dtype, adj_tile_output_offset(cp, t)) : matrix;
  int64_t ld = direct ? cp->win.out_volume : wide;
  double beta = 0.0;
  if (b) {
    adj_rows_fill(cp->dtype, out, cp->c_out, cols, ld, b->data);
    beta = 1.0;
  }
  for (int k = 0; k < n_terms; k++) {
    if (!terms[k].x || !terms[k].w) continue;
    adj_conv_tile_columns(cp, t, terms[k].x->data, col, wide, true);
    for (int64_t r = 0; r < cp->rows && wide > cols; r++)
      memset(adj_at(col, cp->dtype, r * wide + cols), 0, (size_t)(wide - cols) * es);
    adj_conv_gemm_chunks(cp, terms[k].w->data, col, cols, wide, beta, out, ld, !direct, matrix);
    beta = 1.0;
  }
  for (int64_t r = 0; beta == 0.0 && r < cp->c_out; r++) /* no term at all: the tile is zero */
    memset(adj_at(out, cp->dtype, r * ld), 0, (size_t)cols * es);
  if (!direct) adj_conv_shuffle(cp, t, y->data, out, wide, false);
}

/* Steps *t through the batch's tiles in order; start from a zeroed tile. */
static bool adj_conv_next_tile(const adj_conv_shape *cp, int64_t images, int64_t lines, adj_conv_tile *t) {
  if (t->images > 0 && t->l1 == cp->lines) t->n0 += t->images, t->l1 = 0;
  if (images == 0 || t->n0 >= cp->win.batch) return false;
  t->images = cp->win.batch - t->n0 < images ? cp->win.batch - t->n0 : images;
  t->l0 = t->l1;
  t->l1 = t->l0 + lines < cp->lines ? t->l0 + lines : cp->lines;
  return true;
}

void adj_im2col_forward(const adj_conv_shape *cp, int n_terms, const adj_conv_term *terms, const adj_tensor *b,
                        adj_tensor *y, const adj_workspace *ws) {
  int64_t images, lines;
  adj_conv_tiling(cp, ws->bytes, &images, &lines);
  for (adj_conv_tile t = {0}; adj_conv_next_tile(cp, images, lines, &t);)
    adj_conv_tile_forward(cp, &t, n_terms, terms, b, y, ws);
}

/* Gradient contributions of one tile; dx is cleared when its first tile of an image arrives. */
static void adj_conv_tile_backward(const adj_conv_shape *cp, const adj_conv_tile *t, const adj_tensor *x,
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
    adj_conv_shuffle(cp, t, dy->data, grad, cols, true);
  }
  if (db) adj_rows_sum_add(cp->dtype, grad, cp->c_out, cols, ld, db->data);
  if (dw) {
    adj_conv_tile_columns(cp, t, x->data, col, cols, true);
    adj_gemm(cp->dtype, false, true, cp->c_out, cp->rows, cols, 1.0, grad, ld, col, cols, 1.0, dw->data, cp->rows);
  }
  if (dx) {
    adj_gemm(cp->dtype, true, false, cp->rows, cols, cp->c_out, 1.0, w->data, cp->rows, grad, ld, 0.0, col, cols);
    if (t->l0 == 0)
      memset(adj_at(dx->data, cp->dtype, t->n0 * p->channels * p->in_volume), 0,
             (size_t)(t->images * p->channels * p->in_volume) * adj_dtype_size(cp->dtype));
    adj_conv_tile_columns(cp, t, dx->data, col, cols, false);
  }
}

void adj_im2col_backward(const adj_conv_shape *cp, const adj_tensor *x, const adj_tensor *w, const adj_tensor *dy,
                         adj_tensor *dx, adj_tensor *dw, adj_tensor *db, const adj_workspace *ws) {
  int64_t images, lines;
  adj_conv_tiling(cp, ws->bytes, &images, &lines);
  for (adj_conv_tile t = {0}; adj_conv_next_tile(cp, images, lines, &t);)
    adj_conv_tile_backward(cp, &t, x, w, dy, dx, dw, db, ws->data);
}

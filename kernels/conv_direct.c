/* Direct convolution on the padded grid (conv_plan_impl.h), for few input channels.
 *
 * LeNet's convolutions have 1 and 6 input channels: through im2col their GEMMs
 * are (6 x 25) and (16 x 150) times a column matrix that im2col spends as long
 * writing as the GEMM spends reading (29 and 57 GFLOP/s on the 2-core AVX-512
 * machine, against OpenBLAS's 299 on large GEMMs).  Here each pass is one
 * "shifted correlation" on the grid, every tap a fixed offset:
 *
 *   forward  y[o][j]  = b[o] + sum_i sum_t w[o][i][t] xg[i][j + off_t]     j < span
 *   dx       dxg[i][q] = sum_o sum_t w[o][i][t] dyg[o][margin + q - off_t]  q < volume
 *   dw       dw[o][i][t] += sum_images sum_j dyg[o][margin + j] xg[i][j + off_t]
 *
 * where dyg holds dy on the grid (zero at the dropped positions and in a front
 * margin of the largest tap offset), so dx is the forward's correlation again
 * with the taps mirrored.  The kernels (conv_direct_typed.inc) take whole
 * vectors of positions and keep their sums in registers; they are compiled
 * once per instruction-set level with its vector width and register blocks
 * (kernel_levels.c), the best level the CPU runs chosen once, and with
 * contracted multiply-adds (kernels/meson.build).  The price is the
 * dropped grid positions (LeNet's conv2: 144 per channel for 100 outputs) and
 * the copies onto the grids.  Four refinements avoid most of both: output
 * rows at least a vector wide are computed in place (conv1's 28), and at
 * x86-64-v4 narrower ones too, as one vector with masked lanes; without
 * padding x and dx are their own grids (conv2); when C_out is a multiple
 * of the vector length (conv2's 16) the forward and the weight gradient put
 * the output channels along the vectors and visit only the real outputs; and
 * on planes so small that most of the dy grid is zeros (a distributed
 * layer's blocks) the input gradient sums each input position's real (tap,
 * output) pairs with the images along the vectors. */
#include <stdlib.h>
#include <string.h>

#include "kernel_table.h"
#include "conv_plan_impl.h"

enum {
  ADJ_DIRECT_MAX_CHANNELS = 16, /* from 16 input channels the shifted GEMMs are faster */
  ADJ_DIRECT_CHUNK_BYTES = 192 << 10, /* the backward's grids of one chunk stay in L2 */
  /* ... except on small planes with 16-lane vectors and the output channels
   * along them (float32 at x86-64-v4), up to this many input channels and
   * output positions: the encoder-decoder's 16->32 and 32->16 3x3 layers at
   * 14x14 ran forward + backward 1.2-1.3x faster direct than shifted, a
   * 64->64 3x3 layer at 7x7 1.2x, at 56x56 level (float64 at v4, and float32
   * at x86-64-v3, ran direct 1.0-1.7x slower: bench-layers, docs/kernels.md). */
  ADJ_DIRECT_WIDE_MAX_CHANNELS = 64,
  ADJ_DIRECT_WIDE_MAX_POSITIONS = 1024,
  ADJ_DIRECT_WIDE_LANES = 16,
  /* Output channels along the vectors cost a transpose of y (in registers)
   * and of dy per image, which pays where each output sums many terms
   * (C_in x taps): LeNet's conv2 (150 terms) ran forward + backward 1.3x
   * faster so, a conv1d with 16 channels and 3 taps (48) level, but the
   * encoder-decoder's first layer (1 channel, 3x3: 9 terms) 2.1x slower
   * at x86-64-v4 and 1.5x at v3 than with positions along the vectors and
   * rows in place (bench-layers --filter conv, both forced direct). */
  ADJ_DIRECT_CHANNEL_MIN_TERMS = 32,
};

/* The kernel fn of d's level and dtype. */
#define ADJ_KERNEL(d, fn) ((d)->kernels->fn[(d)->dtype == ADJ_FLOAT64])

static int64_t adj_round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

/* Elements of d's dtype in one vector of its kernels' level. */
static int64_t adj_vector_length(const adj_conv_direct *d) {
  return d->kernels->vector_bytes / (int64_t)adj_dtype_size(d->dtype);
}

/* The index tables: tap offsets (and mirrored), each vector's place on the
 * grid and on y or dy, the in-place input gradient's vectors and their tap
 * ranges, each output's grid position, the partial-vector flags.  They hang
 * on the geometry alone, not the batch. */
struct adj_direct_tables {
  int64_t *offset, *mirrored;
  int64_t *in_at, *out_at; /* (rows * row_vectors): each row vector on the grid and on y or dy */
  int64_t *plane_at;       /* (plane_vectors): the input gradient's vectors on one channel plane */
  int64_t *tap_lo, *tap_hi; /* (plane_vectors): the taps that read some of dy's span there */
  int64_t *grid_at;         /* (positions, with channel_vectors): each output's grid position */
  int64_t *pair_start;      /* (positions_in + 1, with pair_tables): each input position's pairs */
  int64_t *pair_tap, *pair_at; /* (pairs): their tap and output position */
  unsigned char *partial;   /* (rows * row_vectors): the vector repeats lanes of the one before */
};

/* The grids, in the workspace after room for the tables. */
typedef struct adj_direct_buffers {
  const adj_direct_tables *t;
  void *x_grid;  /* (chunk, C_in, volume) + tail: the kernels read up to span_rounded - span past it */
  void *dy_grid; /* (chunk, C_out, dy_row); the forward's output span (C_out, span_rounded) */
  void *dx_grid; /* (C_in, volume_rounded) */
  void *dy_t;    /* (chunk, positions, C_out), with channel_vectors: dy transposed */
  void *w_t;     /* (C_in * taps, C_out), with channel_vectors: w transposed */
  void *batch_w;  /* (taps, C_out, C_in), with lanes: w for the batch input gradient */
  void *batch_dy; /* (positions, C_out, lanes): a group of images' dy, interleaved */
  void *batch_dx; /* (C_in, positions_in, lanes): their dx */
} adj_direct_buffers;

/* Bytes of d's tables; laid out from `at` into t when t is given. */
static size_t adj_direct_tables_layout(const adj_conv_direct *d, void *at, adj_direct_tables *t) {
  size_t vectors = (size_t)(d->rows * d->row_vectors), grid_at = d->channel_vectors ? (size_t)d->positions : 0;
  size_t pairs = d->pair_tables ? (size_t)(d->positions_in + 1 + 2 * d->pairs) : 0;
  size_t words = 2 * (size_t)d->taps + 2 * vectors + 3 * (size_t)d->plane_vectors + grid_at + pairs;
  if (t) {
    t->offset = at;
    t->mirrored = t->offset + d->taps;
    t->in_at = t->mirrored + d->taps;
    t->out_at = t->in_at + vectors;
    t->plane_at = t->out_at + vectors;
    t->tap_lo = t->plane_at + d->plane_vectors;
    t->tap_hi = t->tap_lo + d->plane_vectors;
    t->grid_at = t->tap_hi + d->plane_vectors;
    t->pair_start = t->grid_at + grid_at;
    t->pair_tap = t->pair_start + (d->pair_tables ? d->positions_in + 1 : 0);
    t->pair_at = t->pair_tap + (d->pair_tables ? d->pairs : 0);
    t->partial = (unsigned char *)(t->pair_at + (d->pair_tables ? d->pairs : 0));
  }
  return words * sizeof(int64_t) + vectors;
}

/* Workspace: room for the tables (used by the stateless calls), then the grids. */
static size_t adj_direct_layout(const adj_conv_direct *d, void *ws, adj_direct_buffers *b) {
  size_t es = adj_dtype_size(d->dtype), grid_at = d->channel_vectors ? (size_t)d->positions : 0;
  size_t at = adj_align64(adj_direct_tables_layout(d, NULL, NULL));
  size_t x_bytes = adj_align64((size_t)(d->chunk * d->c_in * d->grid.volume + d->span_rounded) * es);
  size_t dy_bytes = adj_align64((size_t)(d->chunk * d->c_out * d->dy_row) * es);
  size_t dx_bytes = adj_align64((size_t)(d->c_in * d->volume_rounded) * es);
  size_t dy_t_bytes = adj_align64(grid_at * (size_t)(d->chunk * d->c_out) * es);
  size_t w_t_bytes = d->channel_vectors ? adj_align64((size_t)(d->c_out * d->c_in * d->taps) * es) : 0;
  size_t batch_w = d->lanes ? adj_align64((size_t)(d->taps * d->c_out * d->c_in) * es) : 0;
  size_t batch_dy = adj_align64((size_t)(d->positions * d->c_out * d->lanes) * es);
  size_t batch_dx = adj_align64((size_t)(d->c_in * d->positions_in * d->lanes) * es);
  if (b) {
    b->x_grid = (char *)ws + at;
    b->dy_grid = (char *)ws + at + x_bytes;
    b->dx_grid = (char *)ws + at + x_bytes + dy_bytes;
    b->dy_t = (char *)ws + at + x_bytes + dy_bytes + dx_bytes;
    b->w_t = (char *)b->dy_t + dy_t_bytes;
    b->batch_w = (char *)b->w_t + w_t_bytes;
    b->batch_dy = (char *)b->batch_w + batch_w;
    b->batch_dx = (char *)b->batch_dy + batch_dy;
  }
  return at + x_bytes + dy_bytes + dx_bytes + dy_t_bytes + w_t_bytes + batch_w + batch_dy + batch_dx;
}

/* Rows of at least one vector: ceil(width / vl) vectors each, the last one
 * ending with the row (so it repeats some lanes of the one before), which
 * computes as many positions as the grid's rows with their dropped columns.
 * A narrower row is one vector of which only the row's lanes are written and
 * read, where the kernels' level masks lanes at no cost and those vectors
 * waste no more lanes than the grid's dropped positions: then the forward's
 * output and the weight gradient's dy need no copies onto the grid (a dist4
 * worker's conv1 block: 14-wide rows, 16 lanes, against 196 of 256 on the
 * grid). */
static void adj_direct_rows(const adj_window_plan *p, int64_t vl, adj_conv_direct *d) {
  int64_t width = p->out[2];
  d->rows = p->out[0] * p->out[1];
  d->row_vectors = width >= vl ? (width + vl - 1) / vl : 0;
  d->repeated = d->row_vectors ? d->row_vectors * vl - width : 0;
  d->row_lanes = 0;
  if (!d->row_vectors && d->kernels->masked_lanes && width * d->span_rounded >= p->out_volume * vl) {
    d->row_vectors = 1;
    d->row_lanes = width;
  }
}

/* (q, k) pairs of one dimension with input q and tap k reading output
 * q + pad - k * dilation inside the output. */
static int64_t adj_dimension_pairs(const adj_window_plan *p, int dim) {
  int64_t count = 0;
  for (int64_t q = 0; q < p->in[dim]; q++)
    for (int64_t k = 0; k < p->kernel[dim]; k++) {
      int64_t o = q + p->pad[dim] - k * p->dilation[dim];
      count += o >= 0 && o < p->out[dim];
    }
  return count;
}

/* The input gradient on the dy grid computes every (tap, position) product of
 * its vectors, of which only `pairs` are real.  Below three in five the
 * gradient with the images along the vectors, which computes only those, is
 * ahead at x86-64-v3 and the baseline for 3 and more input channels (a dist4
 * worker's conv2 block, 28-30% real: 1.4-2x; LeNet's conv2 plane, 48-51%:
 * 1.1-1.4x); with one input channel each dy vector feeds too few sums and
 * it falls behind even at 60% (bench/RESULTS.md).  It needs a vector group
 * of images to fill its lanes. */
static void adj_direct_pair_rule(const adj_window_plan *p, int64_t vl, adj_conv_direct *d) {
  d->positions_in = p->in_volume;
  d->pairs = adj_dimension_pairs(p, 0) * adj_dimension_pairs(p, 1) * adj_dimension_pairs(p, 2);
  int64_t grid_positions = d->plane_vectors ? d->plane_vectors * vl : d->volume_rounded;
  d->pair_tables = d->c_in >= 3 && 5 * d->pairs < 3 * grid_positions * d->taps;
  d->lanes = d->kernels->batch_vectors * vl;
  if (!d->pair_tables || p->batch < d->lanes) d->lanes = 0;
}

/* Whether the rule takes direct from ADJ_DIRECT_MAX_CHANNELS input channels on. */
static bool adj_direct_wide_channels(const adj_window_plan *p, int64_t c_out, int64_t vl) {
  return vl >= ADJ_DIRECT_WIDE_LANES && c_out % vl == 0 && p->channels <= ADJ_DIRECT_WIDE_MAX_CHANNELS &&
         p->out_volume <= ADJ_DIRECT_WIDE_MAX_POSITIONS;
}

bool adj_conv_direct_make(const adj_window_plan *p, int64_t c_out, adj_dtype dtype, bool any_shape,
                          adj_conv_direct *d) {
  if (!adj_conv_grid_make(p, &d->grid) || p->batch == 0) return false;
  d->kernels = adj_kernel_table_select();
  d->dtype = dtype;
  int64_t vl = adj_vector_length(d);
  if (!any_shape && p->channels >= ADJ_DIRECT_MAX_CHANNELS && !adj_direct_wide_channels(p, c_out, vl)) return false;
  d->c_in = p->channels;
  d->c_out = c_out;
  d->taps = p->kernel_volume;
  d->span_rounded = adj_round_up(d->grid.span, vl);
  d->volume_rounded = adj_round_up(d->grid.volume, vl);
  d->margin = d->grid.volume - d->grid.span; /* the largest tap offset */
  d->dy_row = d->margin + (d->span_rounded > d->volume_rounded ? d->span_rounded : d->volume_rounded);
  adj_direct_rows(p, vl, d);
  d->input_is_grid = true;
  for (int k = 0; k < 3; k++) d->input_is_grid &= d->grid.padded[k] == p->in[k];
  d->plane_vectors = d->input_is_grid && d->grid.volume >= vl ? (d->grid.volume + vl - 1) / vl : 0;
  /* The grid's dropped positions cost the kernels that put positions along
   * the vectors; with the output channels along them the forward and the
   * weight gradient visit only real outputs, and on small planes (a
   * distributed layer's blocks) the input gradient's share of dropped
   * positions still costs less than shifted or im2col (bench/RESULTS.md). */
  d->dense_grid = 2 * d->span_rounded <= 3 * p->out_volume + 2 * vl;
  d->channel_vectors = c_out % vl == 0 && (!d->dense_grid || d->c_in * d->taps >= ADJ_DIRECT_CHANNEL_MIN_TERMS);
  d->positions = p->out_volume;
  int64_t per_image = d->c_in * d->grid.volume + d->c_out * d->dy_row;
  per_image = (per_image + (d->channel_vectors ? c_out * p->out_volume : 0)) * (int64_t)adj_dtype_size(dtype);
  d->chunk = ADJ_DIRECT_CHUNK_BYTES / per_image;
  d->chunk = d->chunk < 1 ? 1 : d->chunk > p->batch ? p->batch : d->chunk;
  adj_direct_pair_rule(p, vl, d);
  d->bytes = adj_direct_layout(d, NULL, NULL);
  return any_shape || d->channel_vectors || d->dense_grid;
}

/* Rows of at least a vector: each vector's place on the grid and on y (or
 * dy), the last of a row flagged as repeating lanes of the one before. */
static void adj_direct_row_tables(const adj_window_plan *p, const adj_conv_direct *d, adj_direct_tables *t) {
  int64_t width = p->out[2], vl = adj_vector_length(d);
  for (int64_t r = 0, v = 0; r < d->rows; r++)
    for (int64_t k = 0; k < d->row_vectors; k++, v++) {
      int64_t column = k + 1 < d->row_vectors || d->row_lanes ? k * vl : width - vl;
      t->in_at[v] = ((r / p->out[1]) * d->grid.padded[1] + r % p->out[1]) * d->grid.padded[2] + column;
      t->out_at[v] = r * width + column;
      t->partial[v] = k > 0 && k + 1 == d->row_vectors && d->repeated > 0;
    }
}

/* The in-place input gradient's vectors over one channel plane, and the taps
 * each needs: position q reads dy grid position q - offset[t], nonzero only
 * in [0, span), and offsets grow with t, so those taps are a range. */
static void adj_direct_plane_tables(const adj_conv_direct *d, adj_direct_tables *t) {
  int64_t vl = adj_vector_length(d);
  for (int64_t v = 0; v < d->plane_vectors; v++) {
    int64_t first = v + 1 < d->plane_vectors ? v * vl : d->grid.volume - vl;
    t->plane_at[v] = first;
    t->tap_lo[v] = d->taps, t->tap_hi[v] = 0;
    for (int64_t k = 0; k < d->taps; k++)
      if (first + vl - 1 - t->offset[k] >= 0 && first - t->offset[k] < d->grid.span) {
        t->tap_lo[v] = k < t->tap_lo[v] ? k : t->tap_lo[v];
        t->tap_hi[v] = k + 1;
      }
  }
}

/* Each input position's (tap, output) pairs, in tap order. */
static void adj_direct_pair_table(const adj_window_plan *p, adj_direct_tables *t) {
  int64_t k = 0, q = 0;
  for (int64_t q0 = 0; q0 < p->in[0]; q0++)
    for (int64_t q1 = 0; q1 < p->in[1]; q1++)
      for (int64_t q2 = 0; q2 < p->in[2]; q2++, q++) {
        t->pair_start[q] = k;
        for (int64_t tap = 0; tap < p->kernel_volume; tap++) {
          int64_t k0 = tap / (p->kernel[1] * p->kernel[2]), k1 = tap / p->kernel[2] % p->kernel[1];
          int64_t o0 = q0 + p->pad[0] - k0 * p->dilation[0], o1 = q1 + p->pad[1] - k1 * p->dilation[1];
          int64_t o2 = q2 + p->pad[2] - tap % p->kernel[2] * p->dilation[2];
          if (o0 < 0 || o0 >= p->out[0] || o1 < 0 || o1 >= p->out[1] || o2 < 0 || o2 >= p->out[2]) continue;
          t->pair_tap[k] = tap;
          t->pair_at[k++] = (o0 * p->out[1] + o1) * p->out[2] + o2;
        }
      }
  t->pair_start[q] = k;
}

static void adj_direct_tables_fill(const adj_window_plan *p, const adj_conv_direct *d, adj_direct_tables *t) {
  for (int64_t k = 0; k < d->taps; k++) {
    t->offset[k] = adj_conv_grid_offset(p, &d->grid, k);
    t->mirrored[k] = d->margin - t->offset[k];
  }
  adj_direct_row_tables(p, d, t);
  adj_direct_plane_tables(d, t);
  for (int64_t q = 0; d->channel_vectors && q < d->positions; q++) {
    int64_t o0 = q / (p->out[1] * p->out[2]), o1 = q / p->out[2] % p->out[1], o2 = q % p->out[2];
    t->grid_at[q] = (o0 * d->grid.padded[1] + o1) * d->grid.padded[2] + o2;
  }
  if (d->pair_tables) adj_direct_pair_table(p, t);
}

int adj_direct_tables_create(const char *who, const adj_window_plan *p, const adj_conv_direct *d,
                             adj_direct_tables **tables) {
  size_t bytes = adj_direct_tables_layout(d, NULL, NULL);
  adj_direct_tables *t = malloc(sizeof *t + bytes);
  ADJ_CHECK(t, ADJ_ERR_MEM, "%s: out of memory for %zu bytes of direct-convolution tables", who, bytes);
  adj_direct_tables_layout(d, t + 1, t);
  adj_direct_tables_fill(p, d, t);
  *tables = t;
  return ADJ_SUCCESS;
}

void adj_direct_tables_destroy(adj_direct_tables **tables) {
  if (!tables) return;
  free(*tables);
  *tables = NULL;
}

/* Lays out ws: the grids and, without a plan's tables, the tables built in
 * `own` over the workspace's head. */
static adj_direct_buffers adj_direct_setup(const adj_window_plan *p, const adj_conv_direct *d,
                                           const adj_direct_tables *tables, adj_direct_tables *own, void *ws) {
  adj_direct_buffers b;
  adj_direct_layout(d, ws, &b);
  if (!tables) {
    adj_direct_tables_layout(d, ws, own);
    adj_direct_tables_fill(p, d, own);
    tables = own;
  }
  b.t = tables;
  return b;
}

/* Zeroes the grids of `images` images (the padding and dropped positions
 * must read as zero; the copies onto the grids write only inputs and
 * outputs), x's with its tail. */
static void adj_direct_zero_x_grids(const adj_conv_direct *d, const adj_direct_buffers *b, int64_t images) {
  memset(b->x_grid, 0, (size_t)(images * d->c_in * d->grid.volume + d->span_rounded) * adj_dtype_size(d->dtype));
}

static void adj_direct_zero_dy_grids(const adj_conv_direct *d, const adj_direct_buffers *b, int64_t images) {
  memset(b->dy_grid, 0, (size_t)(images * d->c_out * d->dy_row) * adj_dtype_size(d->dtype));
}


/* One image's forward with the output channels along the vectors. */
static void adj_direct_channel_forward(const adj_conv_direct *d, const adj_direct_buffers *buf, const void *x_grid,
                                       const adj_tensor *b, void *y_n) {
  adj_channel_forward a = {.c_out = d->c_out, .c_in = d->c_in, .taps = d->taps, .positions = d->positions,
                           .row = d->rows ? d->positions / d->rows : 0, .offset = buf->t->offset, .grid_at = buf->t->grid_at, .w_t = buf->w_t,
                           .bias = b ? b->data : NULL, .x = x_grid, .x_stride = d->grid.volume, .y = y_n};
  ADJ_KERNEL(d, channel_forward)(&a);
}

/* With the output channels along the vectors, or whole-vector rows, each
 * image's y is written directly; otherwise the correlation writes the grid's
 * output span, copied out row by row. */
void adj_conv_direct_forward(const adj_window_plan *p, const adj_conv_direct *d, const adj_tensor *x,
                             const adj_tensor *w, const adj_tensor *b, adj_tensor *y, const adj_direct_tables *tables,
                             void *ws) {
  adj_direct_tables own;
  adj_direct_buffers buf = adj_direct_setup(p, d, tables, &own, ws);
  adj_direct_zero_x_grids(d, &buf, 1); /* the last image's, at least, goes through it */
  bool rows = d->row_vectors > 0, channel = d->channel_vectors;
  if (channel) ADJ_KERNEL(d, transpose)(d->c_out, d->c_in * d->taps, w->data, buf.w_t);
  adj_correlation a = {.n_out = d->c_out, .n_in = d->c_in, .taps = d->taps, .offset = buf.t->offset,
                       .w = w->data, .bias = b ? b->data : NULL, .in = buf.x_grid, .w_out = d->c_in * d->taps,
                       .w_in = d->taps, .in_stride = d->grid.volume};
  if (rows) {
    a.vectors = d->rows * d->row_vectors, a.in_at = buf.t->in_at, a.out_at = buf.t->out_at;
    a.out_stride = p->out_volume, a.lanes = d->row_lanes;
  } else {
    a.vectors = d->span_rounded / adj_vector_length(d), a.out = buf.dy_grid;
    a.out_stride = d->span_rounded;
  }
  for (int64_t n = 0; n < p->batch; n++) {
    const void *x_n = adj_at_const(x->data, d->dtype, n * d->c_in * p->in_volume);
    a.in = d->input_is_grid && n + 1 < p->batch ? x_n : buf.x_grid; /* a tail read runs into image n + 1 */
    if (a.in == buf.x_grid)
      adj_grid_copy(d->dtype, d->c_in, p->in, (void *)x_n, p->in_volume, d->grid.padded, buf.x_grid, d->grid.volume,
                    d->grid.origin, true);
    void *y_n = adj_at(y->data, d->dtype, n * d->c_out * p->out_volume);
    if (channel) {
      adj_direct_channel_forward(d, &buf, a.in, b, y_n);
      continue;
    }
    if (rows) a.out = y_n;
    ADJ_KERNEL(d, correlate)(&a);
    if (!rows)
      adj_grid_copy(d->dtype, d->c_out, p->out, y_n, p->out_volume, d->grid.padded, buf.dy_grid, d->span_rounded, 0,
                    false);
  }
}

/* The weight gradient of a chunk whose x grids start at x_grids, with the
 * output channels along the vectors (dy transposed into buf->dy_t). */
static void adj_direct_channel_gradient(const adj_conv_direct *d, const adj_direct_buffers *buf, int64_t count,
                                        const void *x_grids, adj_tensor *dw) {
  adj_channel_gradient a = {.c_out = d->c_out, .c_in = d->c_in, .taps = d->taps, .positions = d->positions,
                            .images = count, .offset = buf->t->offset, .grid_at = buf->t->grid_at, .dy_t = buf->dy_t,
                            .x = x_grids, .x_image = d->c_in * d->grid.volume, .x_stride = d->grid.volume,
                            .w_out = d->c_in * d->taps, .w_in = d->taps, .dw = dw->data};
  ADJ_KERNEL(d, channel_gradient)(&a);
}

/* The weight gradient of a chunk whose x grids start at x_grids, from dy on
 * its grid or, with whole-vector rows and no input gradient wanted, from dy
 * where it is. */
static void adj_direct_weight_gradient(const adj_conv_direct *d, const adj_direct_buffers *buf, int64_t count,
                                       const void *x_grids, const void *dy_dense, adj_tensor *dw) {
  adj_correlation_gradient a = {.n_out = d->c_out, .n_in = d->c_in, .taps = d->taps, .images = count,
                                .offset = buf->t->offset, .in = x_grids, .in_stride = d->grid.volume,
                                .in_image = d->c_in * d->grid.volume, .w_out = d->c_in * d->taps, .w_in = d->taps,
                                .dw = dw->data};
  if (dy_dense) {
    a.vectors = d->rows * d->row_vectors, a.dy_at = buf->t->out_at, a.in_at = buf->t->in_at;
    a.partial = buf->t->partial;
    a.repeated = d->repeated, a.lanes = d->row_lanes;
    a.dy = dy_dense, a.dy_stride = d->positions, a.dy_image = d->c_out * d->positions;
  } else {
    a.vectors = d->span_rounded / adj_vector_length(d);
    a.dy = adj_at(buf->dy_grid, d->dtype, d->margin), a.dy_stride = d->dy_row, a.dy_image = d->c_out * d->dy_row;
  }
  ADJ_KERNEL(d, correlation_gradient)(&a);
}

/* The input gradient of one image from its dy grid: written in place when
 * the grid is dx's own layout, else through dx_grid. */
static void adj_direct_input_gradient(const adj_window_plan *p, const adj_conv_direct *d,
                                      const adj_direct_buffers *buf, const void *dy_grid, const adj_tensor *w,
                                      void *dx_n) {
  bool in_place = d->plane_vectors > 0;
  adj_correlation a = {.n_out = d->c_in, .n_in = d->c_out, .taps = d->taps, .offset = buf->t->mirrored, .w = w->data,
                       .in = dy_grid, .w_out = d->taps, .w_in = d->c_in * d->taps, .in_stride = d->dy_row};
  if (in_place) {
    a.vectors = d->plane_vectors, a.in_at = a.out_at = buf->t->plane_at;
    a.tap_lo = buf->t->tap_lo, a.tap_hi = buf->t->tap_hi;
    a.out = dx_n, a.out_stride = d->grid.volume;
  } else {
    a.vectors = d->volume_rounded / adj_vector_length(d);
    a.out = buf->dx_grid, a.out_stride = d->volume_rounded;
    a.row = d->grid.padded[2];
  }
  ADJ_KERNEL(d, correlate)(&a);
  if (!in_place)
    adj_grid_copy(d->dtype, d->c_in, p->in, dx_n, p->in_volume, d->grid.padded, buf->dx_grid, d->volume_rounded,
                  d->grid.origin, false);
}

/* Whether the weight gradient reads dy where it is (whole-vector rows, no
 * input gradient wanted) and whether the backward copies dy onto its grids. */
static bool adj_direct_dy_in_place(const adj_conv_direct *d, const adj_tensor *dx, const adj_tensor *dw) {
  return dw && !dx && !d->channel_vectors && d->row_vectors > 0;
}

static bool adj_direct_dy_on_grids(const adj_conv_direct *d, const adj_tensor *dx, const adj_tensor *dw) {
  return dx || (dw && !d->channel_vectors && !adj_direct_dy_in_place(d, dx, dw));
}

/* Images [n0, n0 + count): x onto its grids (unless its blocks are their own
 * grids), dy onto its grids (for dx, and for a positions-along-vectors dw
 * without whole-vector rows) or transposed (for a channels-along-vectors dw),
 * db, then dw over the whole chunk and dx image by image. */
static void adj_direct_backward_chunk(const adj_window_plan *p, const adj_conv_direct *d,
                                      const adj_direct_buffers *buf, int64_t n0, int64_t count, const adj_tensor *x,
                                      const adj_tensor *w, const adj_tensor *dy, adj_tensor *dx, adj_tensor *dw,
                                      adj_tensor *db) {
  int64_t x_image = d->c_in * d->grid.volume, dy_image = d->c_out * d->dy_row;
  bool channel = dw && d->channel_vectors, dy_in_place = adj_direct_dy_in_place(d, dx, dw);
  bool dy_grid = adj_direct_dy_on_grids(d, dx, dw);
  bool x_in_place = d->input_is_grid && n0 + count < p->batch; /* the tail read stays inside x */
  const void *x_n0 = adj_at_const(x->data, d->dtype, n0 * d->c_in * p->in_volume);
  for (int64_t g = 0; g < count; g++) {
    const void *dy_n = adj_at_const(dy->data, d->dtype, (n0 + g) * d->c_out * p->out_volume);
    if (dy_grid)
      adj_grid_copy(d->dtype, d->c_out, p->out, (void *)dy_n, p->out_volume, d->grid.padded,
                    adj_at(buf->dy_grid, d->dtype, g * dy_image), d->dy_row, d->margin, true);
    if (channel)
      ADJ_KERNEL(d, transpose)(d->c_out, d->positions, dy_n, adj_at(buf->dy_t, d->dtype, g * d->positions * d->c_out));
    if (db) adj_rows_sum_add(d->dtype, dy_n, d->c_out, p->out_volume, p->out_volume, db->data);
    if (dw && !x_in_place)
      adj_grid_copy(d->dtype, d->c_in, p->in, (void *)adj_at_const(x_n0, d->dtype, g * d->c_in * p->in_volume),
                    p->in_volume, d->grid.padded, adj_at(buf->x_grid, d->dtype, g * x_image), d->grid.volume,
                    d->grid.origin, true);
  }
  if (channel) adj_direct_channel_gradient(d, buf, count, x_in_place ? x_n0 : buf->x_grid, dw);
  else if (dw)
    adj_direct_weight_gradient(d, buf, count, x_in_place ? x_n0 : buf->x_grid,
                               dy_in_place ? adj_at_const(dy->data, d->dtype, n0 * d->c_out * p->out_volume) : NULL,
                               dw);
  for (int64_t g = 0; dx && g < count; g++)
    adj_direct_input_gradient(p, d, buf, adj_at(buf->dy_grid, d->dtype, g * dy_image), w,
                              adj_at(dx->data, d->dtype, (n0 + g) * d->c_in * p->in_volume));
}

/* The input gradient of every image by its (tap, output) pairs, the images
 * along the vectors d->lanes at a time (the last group padded with zeros). */
static void adj_direct_pair_input_gradient(const adj_window_plan *p, const adj_conv_direct *d,
                                           const adj_direct_buffers *buf, const adj_tensor *w, const adj_tensor *dy,
                                           adj_tensor *dx) {
  ADJ_KERNEL(d, transpose)(d->c_out * d->c_in, d->taps, w->data, buf->batch_w);
  adj_batch_gradient a = {.c_in = d->c_in, .c_out = d->c_out, .positions_in = d->positions_in,
                          .positions = d->positions, .pair_start = buf->t->pair_start, .pair_tap = buf->t->pair_tap,
                          .pair_at = buf->t->pair_at, .w_b = buf->batch_w, .dy_b = buf->batch_dy,
                          .dx_b = buf->batch_dx};
  int64_t dy_image = d->c_out * d->positions, dx_image = d->c_in * d->positions_in;
  for (int64_t n0 = 0; n0 < p->batch; n0 += d->lanes) {
    int64_t count = p->batch - n0 < d->lanes ? p->batch - n0 : d->lanes;
    ADJ_KERNEL(d, interleave)(count, d->lanes, d->c_out, d->positions, adj_at_const(dy->data, d->dtype, n0 * dy_image),
                              buf->batch_dy);
    ADJ_KERNEL(d, batch_gradient)(&a);
    ADJ_KERNEL(d, deinterleave)(count, d->lanes, dx_image, buf->batch_dx, adj_at(dx->data, d->dtype, n0 * dx_image));
  }
}

void adj_conv_direct_backward(const adj_window_plan *p, const adj_conv_direct *d, const adj_tensor *x,
                              const adj_tensor *w, const adj_tensor *dy, adj_tensor *dx, adj_tensor *dw,
                              adj_tensor *db, const adj_direct_tables *tables, void *ws) {
  adj_direct_tables own;
  adj_direct_buffers buf = adj_direct_setup(p, d, tables, &own, ws);
  if (dx && d->lanes) {
    adj_direct_pair_input_gradient(p, d, &buf, w, dy, dx);
    dx = NULL; /* done: the chunks below need no dy grids for it */
  }
  if (dw) adj_direct_zero_x_grids(d, &buf, d->chunk); /* the last chunk, at least, copies x */
  if (adj_direct_dy_on_grids(d, dx, dw)) adj_direct_zero_dy_grids(d, &buf, d->chunk);
  for (int64_t n0 = 0; n0 < p->batch; n0 += d->chunk) {
    int64_t count = p->batch - n0 < d->chunk ? p->batch - n0 : d->chunk;
    adj_direct_backward_chunk(p, d, &buf, n0, count, x, w, dy, dx, dw, db);
  }
}

/* Distributed padding (see include/adjoin/pad_layer.h).  One stage per padded
 * spatial dimension, applied in order:
 *   y = S_last ... S_first x,   S = (bulk copy) + sum over sides F_side R_side P_side
 * with P the pack of the rows this worker contributes to a side's padding, R
 * the repartition of those rows onto the boundary worker, and F the local
 * fill of the padding rows from them.  backward applies the stages' adjoints
 * in reverse: F^T adds each padding row's gradient into the row it copies,
 * R^T returns the rows, P^T adds them into the input gradient. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/pad_layer.h"
#include "adjoin/repartition.h"
#include "dist_layer_impl.h"
#include "threads_impl.h"

/* One side of one stage: the source rows [a, b) of the global input (along
 * the stage's dimension) that its padding copies. */
typedef struct adj_pad_side {
  int64_t width;          /* padding entries on this side */
  int64_t a, b;           /* source rows, global */
  adj_op *move;           /* the rows onto the boundary worker; NULL for zeros or no padding */
  adj_box source;         /* this worker's share of the rows, in its input block */
  adj_tensor sent, slab;  /* the share packed; the rows on the boundary worker */
} adj_pad_side;

typedef struct adj_pad_stage {
  int dim;                /* tensor dimension (2 + spatial) */
  int64_t n;              /* global extent before padding */
  bool boundary[2];       /* this worker holds the left / right padding */
  adj_box bulk;           /* the input block inside the output block */
  adj_pad_side side[2];
  adj_tensor out;         /* the stage's output (the last stage writes y) */
} adj_pad_stage;

typedef struct adj_pad {
  adj_padding_mode mode;
  int stages;
  adj_pad_stage stage[3];
  adj_box inner; /* zeros: where this worker's input block lies in its output block */
} adj_pad;

static const char *const adj_padding_mode_names[] = {"zeros", "reflect", "replicate", "circular"};

const char *adj_padding_mode_name(adj_padding_mode mode) {
  return mode >= ADJ_PAD_ZEROS && mode <= ADJ_PAD_CIRCULAR ? adj_padding_mode_names[mode] : NULL;
}

int adj_padding_mode_parse(const char *name, adj_padding_mode *mode) {
  ADJ_CHECK(mode, ADJ_ERR_ARG, "padding mode: output pointer is NULL");
  for (int m = ADJ_PAD_ZEROS; m <= ADJ_PAD_CIRCULAR; m++)
    if (name && !strcmp(name, adj_padding_mode_names[m])) return *mode = (adj_padding_mode)m, ADJ_SUCCESS;
  return adj_error_set(ADJ_ERR_ARG, "padding mode: unknown mode '%s' (zeros, reflect, replicate, circular)",
                       name ? name : "(null)");
}

/* The input row that padding position i (i < 0 or i >= n) copies. */
static int64_t adj_pad_source_row(adj_padding_mode mode, int64_t n, int64_t i) {
  switch (mode) {
    case ADJ_PAD_REFLECT: return i < 0 ? -i : 2 * (n - 1) - i;
    case ADJ_PAD_REPLICATE: return i < 0 ? 0 : n - 1;
    default: return ((i % n) + n) % n;
  }
}

/* Input position of padding entry j of a side (left: j - width, right: n + j). */
static int64_t adj_pad_position(const adj_pad_stage *s, int side, int64_t j) {
  return side ? s->n + j : j - s->side[0].width;
}

/* ---- application ------------------------------------------------------------------------ */

/* The box of one row along the stage's dimension, whole in the others. */
static adj_box adj_pad_row(const adj_tensor *t, int dim, int64_t row) {
  adj_box b = adj_box_whole(t->rank, t->shape);
  b.start[dim] = row, b.extent[dim] = 1;
  return b;
}

/* Output row of padding entry j on this worker. */
static int64_t adj_pad_out_row(const adj_pad_stage *s, const adj_tensor *out, int side, int64_t j) {
  return side ? out->shape[s->dim] - s->side[1].width + j : j;
}

/* The slab row padding entry j of a side copies. */
static adj_box adj_pad_slab_row(const adj_pad *p, const adj_pad_stage *s, int side, int64_t j) {
  const adj_pad_side *e = &s->side[side];
  return adj_pad_row(&e->slab, s->dim, adj_pad_source_row(p->mode, s->n, adj_pad_position(s, side, j)) - e->a);
}

static int adj_pad_stage_forward(const adj_pad *p, adj_pad_stage *s, const adj_tensor *in, adj_tensor *out) {
  adj_box whole = adj_box_whole(in->rank, in->shape);
  adj_tensor_copy_box(out, &s->bulk, in, &whole, ADJ_UNPACK_COPY);
  for (int side = 0; side < 2; side++) {
    adj_pad_side *e = &s->side[side];
    if (e->move) {
      adj_tensor_pack(in, &e->source, e->sent.data);
      ADJ_CALL(adj_op_forward(e->move, &e->sent, &e->slab));
    }
    if (!s->boundary[side]) continue;
    for (int64_t j = 0; j < e->width; j++) {
      adj_box to = adj_pad_row(out, s->dim, adj_pad_out_row(s, out, side, j));
      if (!e->move) {
        adj_tensor_clear_box(out, &to);
        continue;
      }
      adj_box from = adj_pad_slab_row(p, s, side, j);
      adj_tensor_copy_box(out, &to, &e->slab, &from, ADJ_UNPACK_COPY);
    }
  }
  return ADJ_SUCCESS;
}

static int adj_pad_stage_adjoint(const adj_pad *p, adj_pad_stage *s, const adj_tensor *dout, adj_tensor *din) {
  adj_box whole = adj_box_whole(din->rank, din->shape);
  adj_tensor_copy_box(din, &whole, dout, &s->bulk, ADJ_UNPACK_COPY);
  for (int side = 0; side < 2; side++) {
    adj_pad_side *e = &s->side[side];
    if (!e->move) continue;
    adj_tensor_zero(&e->slab);
    for (int64_t j = 0; s->boundary[side] && j < e->width; j++) {
      adj_box from = adj_pad_row(dout, s->dim, adj_pad_out_row(s, dout, side, j));
      adj_box to = adj_pad_slab_row(p, s, side, j);
      adj_tensor_copy_box(&e->slab, &to, dout, &from, ADJ_UNPACK_ADD);
    }
    ADJ_CALL(adj_op_adjoint(e->move, &e->slab, &e->sent));
    adj_tensor_unpack(din, &e->source, e->sent.data, ADJ_UNPACK_ADD);
  }
  return ADJ_SUCCESS;
}

/* Zero padding moves nothing between workers: the output is zeros around the
 * input block, written in one pass instead of a copy per stage. */
static bool adj_pad_direct(const adj_pad *p) { return p->mode == ADJ_PAD_ZEROS && p->stages; }

/* The rows (lines along the last dimension) of one pass of zero padding, for
 * a team: the forward writes each row of the padded block once (zeros, or
 * zeros around the input row that lands in it), the adjoint copies each
 * input row's gradient out of its padded row. */
typedef struct adj_pad_rows {
  const adj_box *inner;     /* the input block inside the padded block */
  const int64_t *padded;    /* the padded block's shape */
  const char *from;
  char *to;
  size_t esize;
  bool adjoint;             /* rows of the input block (else of the padded block) */
} adj_pad_rows;

/* Row `row`'s coordinates in the first rank - 1 dimensions of `shape`. */
static void adj_pad_row_coords(int rank, const int64_t *shape, int64_t row, int64_t *c) {
  for (int k = rank - 2; k >= 0; k--) c[k] = row % shape[k], row /= shape[k];
}

static void adj_pad_rows_share(void *arg, int64_t first, int64_t count, int member) {
  const adj_pad_rows *w = arg;
  const adj_box *in = w->inner;
  int r = in->rank, last = r - 1;
  const int64_t *rows_shape = w->adjoint ? in->extent : w->padded;
  int64_t c[ADJ_MAX_RANK];
  adj_pad_row_coords(r, rows_shape, first, c);
  size_t left = (size_t)in->start[last] * w->esize, middle = (size_t)in->extent[last] * w->esize;
  size_t row_bytes = (size_t)w->padded[last] * w->esize;
  for (int64_t row = first; row < first + count; row++) {
    /* The row in the input block and in the padded block. */
    int64_t in_row = 0, padded_row = 0;
    bool inside = true;
    for (int k = 0; k < last; k++) {
      int64_t at = w->adjoint ? c[k] + in->start[k] : c[k], local = at - in->start[k];
      inside &= local >= 0 && local < in->extent[k];
      in_row = in_row * in->extent[k] + local, padded_row = padded_row * w->padded[k] + at;
    }
    const char *src = w->from + (size_t)(w->adjoint ? padded_row : in_row) * (w->adjoint ? row_bytes : middle);
    char *dst = w->to + (size_t)(w->adjoint ? in_row : padded_row) * (w->adjoint ? middle : row_bytes);
    if (w->adjoint) {
      memcpy(dst, src + left, middle);
    } else if (!inside) {
      memset(dst, 0, row_bytes);
    } else {
      memset(dst, 0, left);
      memcpy(dst + left, src, middle);
      memset(dst + left + middle, 0, row_bytes - left - middle);
    }
    for (int k = last - 1; k >= 0 && ++c[k] == rows_shape[k]; k--) c[k] = 0;
  }
}

/* y = zeros around x (forward), or dx = dy's rows inside (adjoint). */
static void adj_pad_zeros(const adj_pad *p, const adj_tensor *from, adj_tensor *to, bool adjoint) {
  const adj_tensor *padded = adjoint ? from : to;
  adj_pad_rows w = {&p->inner, padded->shape, from->data, to->data, adj_dtype_size(to->dtype), adjoint};
  /* Rows of the input block (adjoint) or of the padded block (forward). */
  const int64_t *shape = adjoint ? p->inner.extent : padded->shape;
  int64_t rows = 1;
  for (int k = 0; k < padded->rank - 1; k++) rows *= shape[k];
  int64_t volume = adj_tensor_volume(to);
  if (rows > 0 && volume > 0) adj_team_run(adj_team_size(rows, volume), rows, adj_pad_rows_share, &w);
}

static int adj_pad_apply(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  adj_pad *p = l->impl;
  if (adj_pad_direct(p)) {
    adj_pad_zeros(p, x, y, false);
    return ADJ_SUCCESS;
  }
  const adj_tensor *in = x;
  for (int k = 0; k < p->stages; k++) {
    adj_tensor *out = k == p->stages - 1 ? y : &p->stage[k].out;
    ADJ_CALL(adj_pad_stage_forward(p, &p->stage[k], in, out));
    in = out;
  }
  if (!p->stages) adj_tensor_copy_flat(y, x);
  return ADJ_SUCCESS;
}

static int adj_pad_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) { return adj_pad_apply(l, x, y); }

static int adj_pad_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  if (dx) return adj_pad_apply(l, dx, dy);
  adj_tensor_zero(dy);
  return ADJ_SUCCESS;
}

/* Stage k's output gradient lives in stage k's buffer (dy for the last). */
static int adj_pad_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  adj_pad *p = l->impl;
  if (!dx) return ADJ_SUCCESS;
  if (!p->stages) adj_tensor_copy_flat(dx, dy);
  if (adj_pad_direct(p)) {
    adj_pad_zeros(p, dy, dx, true);
    return ADJ_SUCCESS;
  }
  const adj_tensor *dout = dy;
  for (int k = p->stages - 1; k >= 0; k--) {
    adj_tensor *din = k == 0 ? dx : &p->stage[k - 1].out;
    ADJ_CALL(adj_pad_stage_adjoint(p, &p->stage[k], dout, din));
    dout = din;
  }
  return ADJ_SUCCESS;
}

static void adj_pad_free(adj_pad *p) {
  if (!p) return;
  for (int k = 0; k < 3; k++) {
    for (int side = 0; side < 2; side++) {
      adj_op_destroy(&p->stage[k].side[side].move);
      adj_tensor_destroy(&p->stage[k].side[side].sent);
      adj_tensor_destroy(&p->stage[k].side[side].slab);
    }
    adj_tensor_destroy(&p->stage[k].out);
  }
  free(p);
}

static void adj_pad_destroy(adj_layer *l) { adj_pad_free(l->impl); }

static const adj_layer_methods adj_pad_methods = {adj_pad_forward, adj_pad_jvp, adj_pad_backward, adj_pad_destroy};

int adj_pad_layer_counters(const adj_layer *l, adj_op_counters *counters) {
  ADJ_CHECK(l && counters && l->methods.forward == adj_pad_forward, ADJ_ERR_ARG,
            "pad layer counters: %s is not a pad layer", l ? l->name : "(NULL)");
  const adj_pad *p = l->impl;
  *counters = (adj_op_counters){0};
  for (int k = 0; k < p->stages; k++)
    for (int side = 0; side < 2; side++) {
      if (!p->stage[k].side[side].move) continue;
      adj_op_counters c;
      adj_op_get_counters(p->stage[k].side[side].move, &c);
      counters->forward_applications += c.forward_applications;
      counters->adjoint_applications += c.adjoint_applications;
      counters->bytes_sent += c.bytes_sent, counters->bytes_received += c.bytes_received;
      counters->messages_sent += c.messages_sent, counters->messages_received += c.messages_received;
    }
  return ADJ_SUCCESS;
}

/* ---- validation ------------------------------------------------------------------------- */

/* The global extent must hold every row the mode copies (PyTorch's limits). */
static int adj_pad_check_extent(const char *who, adj_padding_mode mode, int d, int64_t n, const int64_t *pad) {
  for (int side = 0; side < 2; side++) {
    const char *name = side ? "right" : "left";
    ADJ_CHECK(pad[side] >= 0, ADJ_ERR_ARG, "%s: %s padding %lld in spatial dimension %d must be >= 0", who, name,
              (long long)pad[side], d);
    if (!pad[side] || mode == ADJ_PAD_ZEROS) continue;
    ADJ_CHECK(mode != ADJ_PAD_REFLECT || pad[side] < n, ADJ_ERR_SIZE,
              "%s: reflect %s padding %lld in spatial dimension %d must be < the extent %lld", who, name,
              (long long)pad[side], d, (long long)n);
    ADJ_CHECK(mode != ADJ_PAD_CIRCULAR || pad[side] <= n, ADJ_ERR_SIZE,
              "%s: circular %s padding %lld in spatial dimension %d must be <= the extent %lld", who, name,
              (long long)pad[side], d, (long long)n);
    ADJ_CHECK(mode != ADJ_PAD_REPLICATE || n > 0, ADJ_ERR_SIZE,
              "%s: replicate %s padding %lld in spatial dimension %d needs a nonempty extent (it is 0)", who, name,
              (long long)pad[side], d);
  }
  return ADJ_SUCCESS;
}

static int adj_pad_validate(const char *who, const adj_pad_layer_config *c) {
  ADJ_CALL(adj_layer_config_check(who, c, c ? c->dtype : ADJ_FLOAT64, c ? c->input : NULL));
  int sd = c->spatial_dims, rank = adj_decomposition_rank(c->input);
  ADJ_CHECK(sd >= 1 && sd <= 3, ADJ_ERR_ARG, "%s: spatial_dims is %d, not 1, 2 or 3", who, sd);
  ADJ_CHECK(rank == 2 + sd, ADJ_ERR_SIZE,
            "%s: the input has rank %d but %d spatial dimensions need %d (N, C, spatial...)", who, rank, sd, 2 + sd);
  ADJ_CHECK(adj_padding_mode_name(c->mode), ADJ_ERR_ARG,
            "%s: unknown padding mode %d (zeros 0, reflect 1, replicate 2, circular 3)", who, (int)c->mode);
  const int64_t *shape = adj_decomposition_global_shape(c->input);
  for (int d = 0; d < sd; d++) ADJ_CALL(adj_pad_check_extent(who, c->mode, d, shape[2 + d], c->padding[d]));
  return ADJ_SUCCESS;
}

/* ---- planning --------------------------------------------------------------------------- */

/* A decomposition of `input`'s partition and cuts, except along dim: global
 * extent `extent` and cuts cut[p] (P + 1 entries). */
static int adj_pad_decomposition(const adj_decomposition *input, int dim, int64_t extent, const int64_t *cut,
                                 adj_decomposition **out) {
  int rank = adj_decomposition_rank(input);
  int64_t shape[ADJ_MAX_RANK];
  const int64_t *cuts[ADJ_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    shape[i] = i == dim ? extent : adj_decomposition_global_shape(input)[i];
    cuts[i] = i == dim ? cut : adj_decomposition_cuts(input, i);
  }
  return adj_decomposition_create_explicit(adj_decomposition_partition(input), rank, shape, cuts, out);
}

static int64_t adj_clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Plans one side's move: every worker's share of rows [a, b) onto the
 * boundary worker.  Collective. */
static int adj_pad_side_plan(adj_dtype dtype, const adj_decomposition *in, adj_pad_stage *s, int side) {
  adj_pad_side *e = &s->side[side];
  int parts = adj_partition_shape(adj_decomposition_partition(in))[s->dim];
  const int64_t *c = adj_decomposition_cuts(in, s->dim);
  int64_t w = e->b - e->a, from[65], to[65];
  for (int q = 0; q <= parts; q++) { /* parts <= 64: checked by the stage */
    from[q] = adj_clamp(c[q], e->a, e->b) - e->a;
    to[q] = q == 0 ? 0 : side == 0 || q == parts ? w : 0;
  }
  adj_decomposition *source = NULL, *target = NULL;
  int status = adj_pad_decomposition(in, s->dim, w, from, &source);
  if (!status) status = adj_pad_decomposition(in, s->dim, w, to, &target);
  if (!status) status = adj_repartition_create(dtype, source, target, &e->move);
  if (!status) {
    int local = adj_decomposition_create_local(source, dtype, &e->sent);
    if (!local) local = adj_decomposition_create_local(target, dtype, &e->slab);
    status = adj_layer_agree(in, local);
  }
  adj_box block = adj_decomposition_local_block(in), mine = status ? block : adj_decomposition_local_block(source);
  /* The share in this worker's block coordinates (an empty share starts at 0). */
  e->source = adj_box_whole(block.rank, block.extent);
  e->source.extent[s->dim] = mine.extent[s->dim];
  e->source.start[s->dim] = mine.extent[s->dim] ? mine.start[s->dim] + e->a - block.start[s->dim] : 0;
  adj_decomposition_destroy(&source);
  adj_decomposition_destroy(&target);
  return status;
}

/* Plans the stage padding `in` along dim; *out is its output layout.  Collective. */
static int adj_pad_stage_plan(const adj_pad *p, adj_dtype dtype, const adj_decomposition *in, adj_pad_stage *s,
                              const int64_t *pad, adj_decomposition **out) {
  const adj_partition *partition = adj_decomposition_partition(in);
  int parts = adj_partition_shape(partition)[s->dim];
  const int64_t *c = adj_decomposition_cuts(in, s->dim);
  s->n = adj_decomposition_global_shape(in)[s->dim];
  int64_t shifted[65];
  ADJ_CHECK(parts <= 64, ADJ_ERR_ARG, "pad layer: %d parts in dimension %d; at most 64 are supported", parts, s->dim);
  for (int q = 0; q <= parts; q++) shifted[q] = q == 0 ? 0 : q == parts ? s->n + pad[0] + pad[1] : c[q] + pad[0];
  ADJ_CALL(adj_pad_decomposition(in, s->dim, s->n + pad[0] + pad[1], shifted, out));
  bool active = adj_partition_active(partition);
  int coord = active ? adj_partition_coords(partition)[s->dim] : -1;
  s->boundary[0] = active && coord == 0;
  s->boundary[1] = active && coord == parts - 1;
  adj_box block = adj_decomposition_local_block(in);
  s->bulk = adj_box_whole(block.rank, block.extent);
  s->bulk.start[s->dim] = s->boundary[0] ? pad[0] : 0;
  int status = ADJ_SUCCESS;
  for (int side = 0; side < 2 && !status; side++) {
    adj_pad_side *e = &s->side[side];
    e->width = pad[side];
    if (!e->width || p->mode == ADJ_PAD_ZEROS) continue;
    int64_t first = adj_pad_source_row(p->mode, s->n, adj_pad_position(s, side, 0));
    int64_t last = adj_pad_source_row(p->mode, s->n, adj_pad_position(s, side, e->width - 1));
    e->a = first < last ? first : last;
    e->b = (first < last ? last : first) + 1;
    status = adj_pad_side_plan(dtype, in, s, side);
  }
  if (status) adj_decomposition_destroy(out);
  return status;
}

/* Plans every padded dimension's stage and the buffers between stages;
 * *output is the last stage's layout.  Collective. */
static int adj_pad_plan(adj_pad *p, const adj_pad_layer_config *c, adj_decomposition **output) {
  int total = 0;
  for (int d = 0; d < c->spatial_dims; d++) total += c->padding[d][0] || c->padding[d][1];
  adj_decomposition *in = NULL;
  int status = ADJ_SUCCESS;
  for (int d = 0; d < c->spatial_dims && !status; d++) {
    if (!c->padding[d][0] && !c->padding[d][1]) continue;
    adj_pad_stage *s = &p->stage[p->stages++];
    s->dim = 2 + d;
    adj_decomposition *out = NULL;
    status = adj_pad_stage_plan(p, c->dtype, in ? in : c->input, s, c->padding[d], &out);
    if (!status && p->stages < total)
      status = adj_layer_agree(out, adj_decomposition_create_local(out, c->dtype, &s->out));
    adj_decomposition_destroy(&in);
    in = out;
  }
  if (status) adj_decomposition_destroy(&in);
  adj_box block = adj_decomposition_local_block(c->input);
  p->inner = adj_box_whole(block.rank, block.extent);
  for (int k = 0; k < p->stages; k++) p->inner.start[p->stage[k].dim] = p->stage[k].bulk.start[p->stage[k].dim];
  *output = in;
  return status;
}

int adj_pad_layer_create(const adj_pad_layer_config *c, adj_layer **layer) {
  static const char who[] = "pad layer";
  *layer = NULL;
  ADJ_CALL(adj_pad_validate(who, c));
  adj_pad *p = calloc(1, sizeof *p);
  int status = adj_layer_agree(c->input, p ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", who));
  if (status) {
    free(p);
    return status;
  }
  p->mode = c->mode;
  adj_decomposition *output = NULL;
  status = adj_pad_plan(p, c, &output);
  /* Nothing padded: the output is the input's layout. */
  if (!status && !output) status = adj_pad_decomposition(c->input, 0, adj_decomposition_global_shape(c->input)[0],
                                                         adj_decomposition_cuts(c->input, 0), &output);
  char name[64];
  snprintf(name, sizeof name, "pad_%s%dd", adj_padding_mode_name(c->mode), c->spatial_dims);
  if (!status) status = adj_layer_alloc_between(name, c->dtype, c->input, output, &adj_pad_methods, p, layer);
  if (status) adj_pad_free(p);
  adj_decomposition_destroy(&output);
  return status;
}

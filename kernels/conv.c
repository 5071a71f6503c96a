/* Convolution: validation, the choice of algorithm, the thread team and the
 * entry points (adjoin/conv.h), stateless and planned.
 *
 * The algorithms live in their own files (conv_plan_impl.h): im2col + GEMM, any
 * geometry and the jvp's (conv_im2col.c); with unit strides, one GEMM per
 * tap on the padded grid for 16 or more input channels (conv_shifted.c) and,
 * for fewer, whose GEMMs are too thin for BLAS, the direct vectorized loops
 * (conv_direct.c), built per instruction-set level. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adjoin/conv.h"
#include "kernel_table.h"
#include "conv_plan_impl.h"
#include "setting_impl.h"

/* ---- validation and the choice of algorithm ---------------------------------------- */

const char *adj_conv_algorithm_name(adj_conv_algorithm algorithm) {
  switch (algorithm) {
    case ADJ_CONV_ALGORITHM_AUTO: return "auto";
    case ADJ_CONV_ALGORITHM_DIRECT: return "direct";
    case ADJ_CONV_ALGORITHM_SHIFTED: return "shifted";
    case ADJ_CONV_ALGORITHM_IM2COL: return "im2col";
    case ADJ_CONV_ALGORITHM_MEASURE: return "measure";
  }
  return "?";
}

const char *adj_kernels_isa(void) { return adj_kernel_table_select()->isa; }

static adj_setting adj_conv_algorithm_setting = ADJ_SETTING_INIT("ADJ_CONV_ALGORITHM");
static const char *const adj_conv_algorithm_names[] = {"auto", "direct", "shifted", "im2col", "measure"};

ADJ_SETTING_CHOICE_ACCESSORS(adj_conv_algorithm, adj_conv_algorithm, adj_conv_algorithm_setting,
                             adj_conv_algorithm_names)

/* The algorithm for cp's forward and backward with dx, or (first) for its
 * backward without dx: the requested one where it applies (direct and shifted
 * need unit strides), else im2col; under AUTO the rule of adjoin/conv.h
 * (each path's own test of whether it suits). */
static adj_conv_algorithm adj_conv_choose(const adj_conv_shape *cp, adj_conv_algorithm requested, bool first) {
  adj_conv_direct d;
  adj_shift_plan s;
  bool any = requested != ADJ_CONV_ALGORITHM_AUTO;
  /* The rule assumes GEMMs with AVX2 and FMA.  OpenBLAS kernels without them
   * (an OpenBLAS older than the CPU falls back to SSE3) run shifted and
   * im2col at a fifth of that rate: the direct kernels of x86-64-v3 and v4
   * then take every shape they run (the 64->64 layer: 200 GFLOP/s against
   * 56), and the baseline's keep what they win alone (bench/RESULTS.md). */
  int vector_bytes = adj_kernel_table_select()->vector_bytes, blas_bytes = adj_blas_kernels_vector_bytes();
  bool fast_blas = blas_bytes >= 32, wide = vector_bytes >= 32;
  bool direct = (!any || requested == ADJ_CONV_ALGORITHM_DIRECT) &&
                adj_conv_direct_make(&cp->win, cp->c_out, cp->dtype, any || (!fast_blas && wide), &d);
  /* Without dx the backward is the weight gradient alone, which x86-64-v4's
   * direct kernels run faster than either GEMM from 16 input channels on too,
   * where the grid drops few positions (the 64->64 layer: 231 GFLOP/s against
   * 169-172; at x86-64-v3 141 against 168-171). */
  if (!any && first && vector_bytes >= 64 && !direct &&
      adj_conv_direct_make(&cp->win, cp->c_out, cp->dtype, true, &d) && d.dense_grid)
    return ADJ_CONV_ALGORITHM_DIRECT;
  /* Against GEMMs of four times their width (16-byte vectors, the baseline
   * level, beside OpenBLAS's AVX-512 kernels) the direct kernels fall behind
   * shifted GEMM from a few input channels on (LeNet-5's conv2 and up), so
   * there shifted takes any such shape it can run; with one input channel
   * (conv1), and on planes so small that their grids drop most positions
   * (a dist4 worker's conv2 block), direct stays ahead.  Against AVX2 GEMMs,
   * twice their width, direct stays ahead on conv2 too (an AMD Zen 3: 35
   * GFLOP/s against 27 shifted and 31 im2col).  The weight gradient alone
   * leans further to GEMMs: shifted takes it from 2 input channels beside
   * AVX2 GEMMs (conv2 on that Zen 3: 44 against 32 direct) and with one
   * channel too beside AVX-512 ones (bench/RESULTS.md). */
  int gemm_lead = blas_bytes / vector_bytes; /* how many times wider OpenBLAS's vectors are */
  bool narrow = direct && !any && !wide && d.dense_grid &&
                (first ? gemm_lead >= (cp->win.channels > 1 ? 2 : 4) : gemm_lead >= 4 && cp->win.channels > 1);
  bool shifted = (!any || requested == ADJ_CONV_ALGORITHM_SHIFTED) && adj_shift_plan_make(cp, any || narrow, &s);
  if (direct && !(narrow && shifted)) return ADJ_CONV_ALGORITHM_DIRECT;
  /* Without dx the weight gradient needs no col2im, and im2col's one GEMM
   * over the unrolled input, its output all taps wide, runs level with or
   * ahead of shifted's GEMM per tap on the shapes shifted's own test admits
   * (16 or more input channels; the 64->64 layer on an AMD Zen 3 at the
   * baseline, 108-135 GFLOP/s against 98-129, bench/RESULTS.md). */
  if (shifted && first && !any && !narrow) return ADJ_CONV_ALGORITHM_IM2COL;
  if (shifted) return ADJ_CONV_ALGORITHM_SHIFTED;
  return ADJ_CONV_ALGORITHM_IM2COL;
}

/* Validates g, x and w and fills cp, its algorithm chosen for `requested`
 * (AUTO defers to ADJ_CONV_ALGORITHM). */
static int adj_conv_shape_make(const char *who, const adj_window_geometry *g, const adj_tensor *x,
                               const adj_tensor *w, adj_conv_algorithm requested, adj_conv_shape *cp) {
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
  cp->pad_bytes = (cp->rows + cp->c_out) * ADJ_CONV_GEMM_COLUMNS * (int64_t)adj_dtype_size(cp->dtype);
  ADJ_CHECK(requested >= ADJ_CONV_ALGORITHM_AUTO && requested <= ADJ_CONV_ALGORITHM_MEASURE, ADJ_ERR_ARG,
            "%s: algorithm %d is not an adj_conv_algorithm", who, (int)requested);
  if (requested == ADJ_CONV_ALGORITHM_AUTO) ADJ_CALL(adj_conv_algorithm_get_default(&requested));
  cp->measure = requested == ADJ_CONV_ALGORITHM_MEASURE;
  cp->direct_tables = NULL;
  adj_conv_algorithm rule = cp->measure ? ADJ_CONV_ALGORITHM_AUTO : requested; /* a plan measures later */
  cp->algorithm = adj_conv_choose(cp, rule, false);
  cp->first = adj_conv_choose(cp, rule, true);
  return ADJ_SUCCESS;
}

/* Fails unless the caller's workspace holds at least one output line. */
static int adj_conv_fit(const char *who, const adj_conv_shape *cp, const adj_workspace *ws) {
  size_t have = ws && ws->data ? ws->bytes : 0;
  int64_t images, lines;
  adj_conv_tiling(cp, have, &images, &lines);
  ADJ_CHECK(images == 0 || lines > 0, ADJ_ERR_SIZE,
            "%s: workspace holds %zu bytes but one output line needs %lld (size it with adj_conv_workspace_size)",
            who, have, (long long)cp->line_bytes);
  return ADJ_SUCCESS;
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
static size_t adj_conv_scratch_bytes(const adj_conv_shape *cp) {
  return adj_align64((size_t)(cp->c_out * cp->rows + cp->c_out) * adj_dtype_size(cp->dtype));
}

/* Whether either path of cp runs `algorithm`. */
static bool adj_conv_runs(const adj_conv_shape *cp, adj_conv_algorithm algorithm) {
  return cp->algorithm == algorithm || cp->first == algorithm;
}

/* What one member working on `images` images would like: the largest of the
 * chosen algorithms' workspaces and im2col's widest tiles (the jvp's). */
static size_t adj_conv_member_bytes(const adj_conv_shape *cp, int64_t images) {
  adj_conv_shape share = *cp;
  share.win.batch = images;
  int64_t tile_images, lines;
  adj_conv_tiling(&share, SIZE_MAX, &tile_images, &lines);
  size_t bytes = (size_t)(tile_images * lines * cp->line_bytes + cp->pad_bytes);
  adj_shift_plan s;
  if (adj_conv_runs(cp, ADJ_CONV_ALGORITHM_SHIFTED) && adj_shift_plan_make(&share, true, &s) && (size_t)s.bytes > bytes)
    bytes = (size_t)s.bytes;
  adj_conv_direct d;
  if (adj_conv_runs(cp, ADJ_CONV_ALGORITHM_DIRECT) &&
      adj_conv_direct_make(&share.win, cp->c_out, cp->dtype, true, &d) && d.bytes > bytes)
    bytes = d.bytes;
  return adj_align64(bytes);
}

/* The team for this call: adj_team_size over the images, shrunk until each
 * member's slice of ws holds one output line and its scratch. */
static int adj_conv_team(const adj_conv_shape *cp, const adj_workspace *ws) {
  const adj_window_plan *p = &cp->win;
  int team = adj_team_size(p->batch, p->batch * p->out_volume * cp->rows * cp->c_out);
  size_t have = ws && ws->data ? ws->bytes : 0;
  while (team > 1 && have / (size_t)team < (size_t)cp->line_bytes + adj_conv_scratch_bytes(cp) + 64) team--;
  return team;
}

/* The workspace cp's calls want. */
static size_t adj_conv_shape_workspace(const adj_conv_shape *cp) {
  const adj_window_plan *p = &cp->win;
  int team = adj_team_size(p->batch, p->batch * p->out_volume * cp->rows * cp->c_out);
  if (team == 1) return adj_conv_member_bytes(cp, p->batch);
  int64_t first, largest;
  adj_team_range(p->batch, team, 0, &first, &largest); /* member 0 has the largest share */
  return (size_t)team * (adj_conv_member_bytes(cp, largest) + adj_conv_scratch_bytes(cp));
}

int adj_conv_workspace_size(const adj_window_geometry *g, const adj_tensor *x, const adj_tensor *w,
                            size_t *bytes) {
  adj_conv_shape cp;
  ADJ_CALL(adj_conv_shape_make("conv workspace", g, x, w, ADJ_CONV_ALGORITHM_AUTO, &cp));
  ADJ_CHECK(bytes, ADJ_ERR_ARG, "conv workspace: bytes is NULL");
  *bytes = adj_conv_shape_workspace(&cp);
  return ADJ_SUCCESS;
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

/* The call on the calling thread: the chosen algorithm where the workspace
 * holds its buffers, else tiles of im2col + GEMM; the jvp always the latter. */
static void adj_conv_run_serial(const adj_conv_shape *cp, const adj_conv_call *c, adj_workspace *ws) {
  if (c->pass == ADJ_CONV_JVP) {
    /* Product rule of the bilinear map (x, w) -> conv(x; w). */
    adj_conv_term terms[2] = {{c->dx, c->w}, {c->x, c->dw}};
    adj_im2col_forward(cp, 2, terms, c->db, c->y, ws);
    return;
  }
  bool forward = c->pass == ADJ_CONV_FORWARD;
  adj_conv_algorithm algorithm = forward || c->gx ? cp->algorithm : cp->first;
  adj_conv_direct d;
  if (algorithm == ADJ_CONV_ALGORITHM_DIRECT && adj_conv_direct_make(&cp->win, cp->c_out, cp->dtype, true, &d) &&
      ws->bytes >= d.bytes) {
    if (forward) adj_conv_direct_forward(&cp->win, &d, c->x, c->w, c->b, c->y, cp->direct_tables, ws->data);
    else adj_conv_direct_backward(&cp->win, &d, c->x, c->w, c->dy, c->gx, c->gw, c->gb, cp->direct_tables, ws->data);
    return;
  }
  adj_shift_plan s;
  if (algorithm == ADJ_CONV_ALGORITHM_SHIFTED && adj_shift_plan_make(cp, true, &s) && ws->bytes >= (size_t)s.bytes) {
    if (forward) adj_shift_forward(cp, &s, c->x, c->w, c->b, c->y, ws->data);
    else adj_shift_backward(cp, &s, c->x, c->w, c->dy, c->gx, c->gw, c->gb, ws->data);
    return;
  }
  if (forward) adj_im2col_forward(cp, 1, &(adj_conv_term){c->x, c->w}, c->b, c->y, ws);
  else adj_im2col_backward(cp, c->x, c->w, c->dy, c->gx, c->gw, c->gb, ws);
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
static void adj_conv_scratch_views(const adj_conv_shape *cp, const adj_conv_call *c, void *slice, size_t slice_bytes,
                                   adj_tensor *gw, adj_tensor *gb, adj_tensor **gw_out, adj_tensor **gb_out) {
  void *scratch = (char *)slice + slice_bytes - adj_conv_scratch_bytes(cp);
  *gw_out = *gb_out = NULL;
  if (c->gw) adj_tensor_view(gw, cp->dtype, c->gw->rank, c->gw->shape, scratch), *gw_out = gw;
  if (c->gb)
    adj_tensor_view(gb, cp->dtype, 1, &cp->c_out, adj_at(scratch, cp->dtype, cp->c_out * cp->rows)), *gb_out = gb;
}

/* The call over a team (adj_team_run): each member's slice of the workspace. */
typedef struct adj_conv_work {
  const adj_conv_shape *cp;
  const adj_conv_call *c;
  char *slices;
  size_t slice;
} adj_conv_work;

/* Member `member`'s share of the call, its gradients in `scratch` unless it is member 0. */
static void adj_conv_member(void *arg, int64_t first, int64_t count, int member) {
  const adj_conv_work *w = arg;
  const adj_conv_shape *cp = w->cp;
  const adj_conv_call *c = w->c;
  void *slice = w->slices + (size_t)member * w->slice;
  adj_conv_shape share = *cp;
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
    memset((char *)slice + w->slice - scratch, 0, scratch);
    adj_conv_scratch_views(cp, c, slice, w->slice, &views[5], &views[6], &mine.gw, &mine.gb);
  }
  adj_workspace own = {.data = slice, .bytes = w->slice - scratch};
  adj_conv_run_serial(&share, &mine, &own);
}

/* The call over a team (see "batch-parallel driver"). */
static void adj_conv_run(const adj_conv_shape *cp, const adj_conv_call *c, adj_workspace *ws) {
  int team = adj_conv_team(cp, ws);
  if (team == 1) {
    adj_conv_run_serial(cp, c, ws);
    return;
  }
  size_t slice = ws->bytes / (size_t)team / 64 * 64; /* aligned; adj_conv_team left room for the rounding */
  adj_blas_leave_threads_to_teams(team);
  adj_conv_work w = {cp, c, ws->data, slice};
  adj_team_run(team, cp->win.batch, adj_conv_member, &w);
  if (c->pass != ADJ_CONV_BACKWARD) return;
  for (int member = 1; member < team; member++) { /* in member order: a fixed sum order */
    adj_tensor gw, gb, *gw_part, *gb_part;
    adj_conv_scratch_views(cp, c, (char *)ws->data + (size_t)member * slice, slice, &gw, &gb, &gw_part, &gb_part);
    if (gw_part) adj_tensor_add(c->gw, gw_part);
    if (gb_part) adj_tensor_add(c->gb, gb_part);
  }
}

/* ---- entry points ------------------------------------------------------------------ */

static int adj_conv_forward_shaped(const char *who, const adj_conv_shape *cp, const adj_tensor *x,
                                   const adj_tensor *w, const adj_tensor *b, adj_tensor *y, adj_workspace *ws) {
  ADJ_CALL(adj_check_optional(who, "bias b", b, cp->dtype, 1, &cp->c_out));
  ADJ_CALL(adj_check_tensor(who, "output y", y, cp->dtype, cp->rank, cp->y_shape));
  ADJ_CALL(adj_conv_fit(who, cp, ws));
  adj_conv_run(cp, &(adj_conv_call){.pass = ADJ_CONV_FORWARD, .x = x, .w = w, .b = b, .y = y}, ws);
  return ADJ_SUCCESS;
}

static int adj_conv_jvp_shaped(const char *who, const adj_conv_shape *cp, const adj_tensor *x, const adj_tensor *w,
                               const adj_tensor *dx, const adj_tensor *dw, const adj_tensor *db, adj_tensor *dy,
                               adj_workspace *ws) {
  ADJ_CALL(adj_check_optional(who, "input perturbation dx", dx, cp->dtype, x->rank, x->shape));
  ADJ_CALL(adj_check_optional(who, "weight perturbation dw", dw, cp->dtype, w->rank, w->shape));
  ADJ_CALL(adj_check_optional(who, "bias perturbation db", db, cp->dtype, 1, &cp->c_out));
  ADJ_CALL(adj_check_tensor(who, "output dy", dy, cp->dtype, cp->rank, cp->y_shape));
  ADJ_CALL(adj_conv_fit(who, cp, ws));
  adj_conv_call c = {.pass = ADJ_CONV_JVP, .x = x, .w = w, .dx = dx, .dw = dw, .db = db, .y = dy};
  adj_conv_run(cp, &c, ws);
  return ADJ_SUCCESS;
}

static int adj_conv_backward_shaped(const char *who, const adj_conv_shape *cp, const adj_tensor *x,
                                    const adj_tensor *w, const adj_tensor *dy, adj_tensor *dx, adj_tensor *dw,
                                    adj_tensor *db, adj_workspace *ws) {
  ADJ_CALL(adj_check_tensor(who, "output gradient dy", dy, cp->dtype, cp->rank, cp->y_shape));
  ADJ_CALL(adj_check_optional(who, "input gradient dx", dx, cp->dtype, x->rank, x->shape));
  ADJ_CALL(adj_check_optional(who, "weight gradient dw", dw, cp->dtype, w->rank, w->shape));
  ADJ_CALL(adj_check_optional(who, "bias gradient db", db, cp->dtype, 1, &cp->c_out));
  ADJ_CALL(adj_conv_fit(who, cp, ws));
  adj_conv_call c = {.pass = ADJ_CONV_BACKWARD, .x = x, .w = w, .dy = dy, .gx = dx, .gw = dw, .gb = db};
  adj_conv_run(cp, &c, ws);
  return ADJ_SUCCESS;
}

int adj_conv_forward(const adj_window_geometry *g, const adj_tensor *x, const adj_tensor *w, const adj_tensor *b,
                     adj_tensor *y, adj_workspace *ws) {
  static const char who[] = "conv forward";
  adj_conv_shape cp;
  ADJ_CALL(adj_conv_shape_make(who, g, x, w, ADJ_CONV_ALGORITHM_AUTO, &cp));
  return adj_conv_forward_shaped(who, &cp, x, w, b, y, ws);
}

int adj_conv_jvp(const adj_window_geometry *g, const adj_tensor *x, const adj_tensor *w, const adj_tensor *dx,
                 const adj_tensor *dw, const adj_tensor *db, adj_tensor *dy, adj_workspace *ws) {
  static const char who[] = "conv jvp";
  adj_conv_shape cp;
  ADJ_CALL(adj_conv_shape_make(who, g, x, w, ADJ_CONV_ALGORITHM_AUTO, &cp));
  return adj_conv_jvp_shaped(who, &cp, x, w, dx, dw, db, dy, ws);
}

int adj_conv_backward(const adj_window_geometry *g, const adj_tensor *x, const adj_tensor *w, const adj_tensor *dy,
                      adj_tensor *dx, adj_tensor *dw, adj_tensor *db, adj_workspace *ws) {
  static const char who[] = "conv backward";
  adj_conv_shape cp;
  ADJ_CALL(adj_conv_shape_make(who, g, x, w, ADJ_CONV_ALGORITHM_AUTO, &cp));
  return adj_conv_backward_shaped(who, &cp, x, w, dy, dx, dw, db, ws);
}

/* ---- the plan object ---------------------------------------------------------------- */

struct adj_conv_plan {
  adj_conv_shape shape; /* with the direct algorithm's tables, built at creation */
  int64_t x_shape[ADJ_MAX_RANK], w_shape[ADJ_MAX_RANK];
  size_t workspace;
};

/* ---- MEASURE: time the candidates on scratch tensors --------------------------------- */

enum { ADJ_MEASURE_REPEATS = 3 };

static double adj_conv_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Scratch operands of cp's shapes (x_shape, w_shape given), filled with a
 * fixed pattern so the timed passes do real arithmetic. */
typedef struct adj_conv_scratch {
  adj_tensor x, w, b, y, dx, dw, db;
} adj_conv_scratch;

static void adj_conv_scratch_free(adj_conv_scratch *s) {
  adj_tensor *all[] = {&s->x, &s->w, &s->b, &s->y, &s->dx, &s->dw, &s->db};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) adj_tensor_destroy(all[i]);
}

static int adj_conv_scratch_make(const adj_conv_shape *cp, const int64_t *x_shape, const int64_t *w_shape,
                                 adj_conv_scratch *s) {
  *s = (adj_conv_scratch){0};
  int status = adj_tensor_create(&s->x, cp->dtype, cp->rank, x_shape);
  if (!status) status = adj_tensor_create(&s->dx, cp->dtype, cp->rank, x_shape);
  if (!status) status = adj_tensor_create(&s->w, cp->dtype, cp->rank, w_shape);
  if (!status) status = adj_tensor_create(&s->dw, cp->dtype, cp->rank, w_shape);
  if (!status) status = adj_tensor_create(&s->b, cp->dtype, 1, &cp->c_out);
  if (!status) status = adj_tensor_create(&s->db, cp->dtype, 1, &cp->c_out);
  if (!status) status = adj_tensor_create(&s->y, cp->dtype, cp->rank, cp->y_shape);
  if (status) {
    adj_conv_scratch_free(s);
    return status;
  }
  adj_tensor *filled[] = {&s->x, &s->w, &s->b, &s->y};
  for (size_t i = 0; i < sizeof filled / sizeof filled[0]; i++)
    for (int64_t k = 0; k < adj_tensor_volume(filled[i]); k++)
      adj_tensor_set(filled[i], k, (double)((k * 7919) % 13) / 13.0 - 0.5);
  return ADJ_SUCCESS;
}

/* Best of a few forward + backward passes of cp (after one warm-up), in
 * seconds; the backward's dy is the scratch y. */
static int adj_conv_time(const char *who, const adj_conv_shape *cp, adj_conv_scratch *s, double *best) {
  adj_workspace ws = {0};
  ADJ_CALL(adj_workspace_reserve(&ws, adj_conv_shape_workspace(cp)));
  int status = ADJ_SUCCESS;
  *best = INFINITY;
  for (int r = 0; r <= ADJ_MEASURE_REPEATS && !status; r++) {
    double t0 = adj_conv_seconds();
    status = adj_conv_forward_shaped(who, cp, &s->x, &s->w, &s->b, &s->y, &ws);
    if (!status) status = adj_conv_backward_shaped(who, cp, &s->x, &s->w, &s->y, &s->dx, &s->dw, &s->db, &ws);
    double t = adj_conv_seconds() - t0;
    if (r > 0 && t < *best) *best = t;
  }
  adj_workspace_release(&ws);
  return status;
}

/* Sets both of cp's paths to the algorithm of the fastest forward + backward. */
static int adj_conv_measure(const char *who, adj_conv_shape *cp, const int64_t *x_shape, const int64_t *w_shape) {
  adj_conv_scratch s;
  ADJ_CALL(adj_conv_scratch_make(cp, x_shape, w_shape, &s));
  static const adj_conv_algorithm candidates[] = {ADJ_CONV_ALGORITHM_IM2COL, ADJ_CONV_ALGORITHM_SHIFTED,
                                                  ADJ_CONV_ALGORITHM_DIRECT};
  adj_conv_algorithm fastest = ADJ_CONV_ALGORITHM_IM2COL;
  double fastest_seconds = INFINITY;
  int status = ADJ_SUCCESS;
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0] && !status; i++) {
    adj_conv_shape trial = *cp;
    trial.algorithm = trial.first = adj_conv_choose(cp, candidates[i], false);
    if (trial.algorithm != candidates[i]) continue; /* does not apply to this geometry */
    double seconds = INFINITY;
    status = adj_conv_time(who, &trial, &s, &seconds);
    if (!status && seconds < fastest_seconds) fastest = candidates[i], fastest_seconds = seconds;
  }
  adj_conv_scratch_free(&s);
  cp->algorithm = cp->first = fastest;
  return status;
}

/* The direct algorithm's tables, once for every call of the plan. */
static int adj_conv_plan_tables(const char *who, adj_conv_plan *q) {
  adj_conv_direct d;
  if (!adj_conv_runs(&q->shape, ADJ_CONV_ALGORITHM_DIRECT) ||
      !adj_conv_direct_make(&q->shape.win, q->shape.c_out, q->shape.dtype, true, &d))
    return ADJ_SUCCESS;
  return adj_direct_tables_create(who, &q->shape.win, &d, &q->shape.direct_tables);
}

int adj_conv_plan_create(const adj_conv_plan_config *config, const adj_tensor *x, const adj_tensor *w,
                         adj_conv_plan **plan) {
  static const char who[] = "conv plan create";
  ADJ_CHECK(plan, ADJ_ERR_ARG, "%s: plan is NULL", who);
  *plan = NULL;
  ADJ_CHECK(config, ADJ_ERR_ARG, "%s: config is NULL", who);
  adj_conv_plan *q = calloc(1, sizeof *q);
  ADJ_CHECK(q, ADJ_ERR_MEM, "%s: out of memory", who);
  int status = adj_conv_shape_make(who, &config->geometry, x, w, config->algorithm, &q->shape);
  if (!status) {
    memcpy(q->x_shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    memcpy(q->w_shape, w->shape, sizeof(int64_t) * (size_t)w->rank);
    if (q->shape.measure) status = adj_conv_measure(who, &q->shape, q->x_shape, q->w_shape);
  }
  if (!status) status = adj_conv_plan_tables(who, q);
  if (status) {
    free(q);
    return status;
  }
  q->workspace = adj_conv_shape_workspace(&q->shape);
  *plan = q;
  return ADJ_SUCCESS;
}

void adj_conv_plan_destroy(adj_conv_plan **plan) {
  if (!plan) return;
  if (*plan) adj_direct_tables_destroy(&(*plan)->shape.direct_tables);
  free(*plan);
  *plan = NULL;
}

size_t adj_conv_plan_workspace_size(const adj_conv_plan *plan) { return plan ? plan->workspace : 0; }

adj_conv_algorithm adj_conv_plan_algorithm(const adj_conv_plan *plan) {
  return plan ? plan->shape.algorithm : ADJ_CONV_ALGORITHM_AUTO;
}

adj_conv_algorithm adj_conv_plan_algorithm_without_dx(const adj_conv_plan *plan) {
  return plan ? plan->shape.first : ADJ_CONV_ALGORITHM_AUTO;
}

/* Fails unless x and w have the plan's shapes and dtype. */
static int adj_conv_plan_check(const char *who, const adj_conv_plan *plan, const adj_tensor *x, const adj_tensor *w) {
  ADJ_CHECK(plan, ADJ_ERR_ARG, "%s: plan is NULL", who);
  const adj_conv_shape *cp = &plan->shape;
  ADJ_CALL(adj_check_tensor(who, "input x", x, cp->dtype, cp->rank, plan->x_shape));
  ADJ_CALL(adj_check_tensor(who, "weights w", w, cp->dtype, cp->rank, plan->w_shape));
  return ADJ_SUCCESS;
}

int adj_conv_plan_forward(const adj_conv_plan *plan, const adj_tensor *x, const adj_tensor *w, const adj_tensor *b,
                          adj_tensor *y, adj_workspace *ws) {
  static const char who[] = "conv plan forward";
  ADJ_CALL(adj_conv_plan_check(who, plan, x, w));
  return adj_conv_forward_shaped(who, &plan->shape, x, w, b, y, ws);
}

int adj_conv_plan_jvp(const adj_conv_plan *plan, const adj_tensor *x, const adj_tensor *w, const adj_tensor *dx,
                      const adj_tensor *dw, const adj_tensor *db, adj_tensor *dy, adj_workspace *ws) {
  static const char who[] = "conv plan jvp";
  ADJ_CALL(adj_conv_plan_check(who, plan, x, w));
  return adj_conv_jvp_shaped(who, &plan->shape, x, w, dx, dw, db, dy, ws);
}

int adj_conv_plan_backward(const adj_conv_plan *plan, const adj_tensor *x, const adj_tensor *w, const adj_tensor *dy,
                           adj_tensor *dx, adj_tensor *dw, adj_tensor *db, adj_workspace *ws) {
  static const char who[] = "conv plan backward";
  ADJ_CALL(adj_conv_plan_check(who, plan, x, w));
  return adj_conv_backward_shaped(who, &plan->shape, x, w, dy, dx, dw, db, ws);
}

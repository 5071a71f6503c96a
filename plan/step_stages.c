/* The step model's stage of each layer kind (step_model.h): the local
 * computation's twin on worker 0, the operators the layer creates and what
 * they move, and the buffers it allocates, read off the layers' creation
 * code (layers/conv_layer.c, pool_layer.c, affine_layer.c, affine15_layer.c,
 * batchnorm_layer.c, upsample_layer.c, xent_layer.c, loss_layers.c). */
#include <math.h>
#include <string.h>

#include "adjoin/conv.h"
#include "adjoin/decomposition.h"
#include "activation_impl.h"
#include "adjoin/threads.h"
#include "error_impl.h"
#include "step_model_impl.h"

/* ---- window geometry ----------------------------------------------------------------------------- */

/* One spatial dimension of a window layer (halo_geometry.h's rules): the
 * output is balanced over the parts, each part reads the input its outputs
 * need, and holds its balanced bulk. */
typedef struct step_dim {
  int64_t bulk0, halo0, input0, out0; /* worker 0: bulk, halo, kernel input, outputs */
  int64_t pad0[2];                    /* worker 0's local zero padding */
  int64_t halo_max, extent_max;       /* the most any part receives, and holds (bulk + halo) */
} step_dim;

/* Part p of spatial dimension j: its bulk, the halo it receives (both sides)
 * and the input range its outputs need. */
typedef struct step_part {
  int64_t bulk, halo, need0, need1, outputs;
} step_part;

static step_part step_window_part(const step_layout *in, int64_t m, const adj_window_geometry *g, int j, int p) {
  int64_t s = g->stride[j], pl = g->padding_left[j], span = g->dilation[j] * (g->kernel[j] - 1) + 1;
  int64_t n = in->shape[2 + j], b0 = step_cut(in, 2 + j, p), o0;
  step_part r = {.bulk = step_cut(in, 2 + j, p + 1) - b0};
  adj_balanced_block(m, in->parts[2 + j], p, &o0, &r.outputs);
  if (r.outputs == 0) return r;
  r.need0 = o0 * s - pl > 0 ? o0 * s - pl : 0;
  r.need1 = (o0 + r.outputs - 1) * s - pl + span < n ? (o0 + r.outputs - 1) * s - pl + span : n;
  r.halo = (b0 > r.need0 ? b0 - r.need0 : 0) + (r.need1 > b0 + r.bulk ? r.need1 - (b0 + r.bulk) : 0);
  return r;
}

static void step_window_dim(const step_layout *in, int64_t m, const adj_window_geometry *g, int j, step_dim *r) {
  int parts = in->parts[2 + j];
  step_part first = step_window_part(in, m, g, j, 0);
  int64_t reach = (first.outputs - 1) * g->stride[j] - g->padding_left[j] + g->dilation[j] * (g->kernel[j] - 1) + 1;
  *r = (step_dim){.bulk0 = first.bulk, .halo0 = first.halo, .input0 = first.need1 - first.need0, .out0 = first.outputs,
                  .pad0 = {g->padding_left[j], reach > in->shape[2 + j] ? reach - in->shape[2 + j] : 0}};
  for (int p = 0; p < parts; p++) {
    step_part q = p ? step_window_part(in, m, g, j, p) : first;
    if (q.halo > r->halo_max) r->halo_max = q.halo;
    if (q.bulk + q.halo > r->extent_max) r->extent_max = q.bulk + q.halo;
  }
}

/* The spatial dimensions of the current layout for a window. */
static void step_window(const step_walk *w, const adj_window_geometry *g, const int64_t *out, step_dim *dims) {
  for (int j = 0; j < g->spatial_dims; j++) step_window_dim(&w->cur, out[j], g, j, &dims[j]);
}

/* Entries worker `index` of the spatial grid receives in the nested rounds
 * (one per split dimension; a round's section includes the halos of the
 * rounds before it, so corners are relayed), per sample and channel. */
static double step_halo_worker(const step_walk *w, const adj_window_geometry *g, const int64_t *out, int64_t index) {
  int sd = g->spatial_dims;
  step_part parts[ADJ_MAX_SPATIAL_DIMS];
  for (int j = sd - 1; j >= 0; j--) {
    int count = w->cur.parts[2 + j];
    parts[j] = step_window_part(&w->cur, out[j], g, j, (int)(index % count));
    index /= count;
  }
  double entries = 0;
  for (int j = 0; j < sd; j++) {
    double section = (double)parts[j].halo;
    for (int i = 0; i < sd && section > 0; i++)
      if (i != j) section *= (double)(parts[i].bulk + (i < j ? parts[i].halo : 0));
    entries += section;
  }
  return entries;
}

/* The nested halo exchange of the busiest worker, `cross` = batch block x
 * channel block entries per spatial position, forward and, when the input
 * gradient is wanted, its adjoint.  Grids beyond 4096 spatial workers take
 * each dimension's largest halo and extent instead (a bound). */
static void step_halo(const step_walk *w, adj_step_stage *s, const adj_window_geometry *g, const int64_t *out,
                      const step_dim *dims, double cross) {
  int sd = g->spatial_dims, rounds = 0;
  int64_t grid = 1;
  for (int j = 0; j < sd; j++) grid *= w->cur.parts[2 + j], rounds += w->cur.parts[2 + j] > 1 && dims[j].halo_max > 0;
  if (rounds == 0) return;
  double entries = 0;
  for (int64_t k = 0; grid <= 4096 && k < grid; k++) entries = fmax(entries, step_halo_worker(w, g, out, k));
  for (int j = 0; grid > 4096 && j < sd; j++) {
    double section = (double)dims[j].halo_max;
    for (int i = 0; i < sd; i++)
      if (i != j) section *= (double)(i < j ? dims[i].extent_max : step_first_block(&w->cur, 2 + i));
    entries += section;
  }
  double bytes = entries * cross * w->esize;
  step_charge(w, s, ADJ_STEP_FORWARD, "halo", ADJ_COMM_P2P, 2, bytes, 2 * rounds);
  if (s->input_gradient) step_charge(w, s, ADJ_STEP_BACKWARD, "halo", ADJ_COMM_P2P, 2, bytes, 2 * rounds);
}

/* Worker 0's halo-extended block, kernel input and output volumes per sample
 * and channel, and whether the kernel input is trimmed out of the block. */
static void step_window_volumes(int sd, const step_dim *dims, double *held, double *input, double *output,
                                bool *trims) {
  *held = *input = *output = 1, *trims = false;
  for (int j = 0; j < sd; j++) {
    *held *= (double)(dims[j].bulk0 + dims[j].halo0);
    *input *= (double)dims[j].input0;
    *output *= (double)dims[j].out0;
    *trims |= dims[j].input0 != dims[j].bulk0 + dims[j].halo0;
  }
}

/* The twin of a window layer: worker 0's kernel input, local padding and
 * outputs. */
static void step_window_twin(adj_desc_layer *twin, adj_window_geometry *g, int sd, const step_dim *dims,
                             int64_t channels_in, int64_t channels_out) {
  twin->in_shape[0] = channels_in, twin->out_shape[0] = channels_out;
  for (int j = 0; j < sd; j++) {
    twin->in_shape[1 + j] = dims[j].input0, twin->out_shape[1 + j] = dims[j].out0;
    g->padding_left[j] = dims[j].pad0[0], g->padding_right[j] = dims[j].pad0[1];
  }
}

/* ---- outputs ----------------------------------------------------------------------------------- */

/* A layer's output layout becomes current; the network keeps the output and
 * its gradient (worker 0's block). */
static void step_output_layout(step_walk *w, adj_step_stage *s, const step_layout *out) {
  double block = w->esize;
  for (int k = 0; k < out->ndim; k++) block *= (double)step_first_block(out, k);
  s->memory[ADJ_STEP_MEMORY_ACTIVATIONS] += 2 * (int64_t)block;
  s->workers = (int)step_workers(out) > s->workers ? (int)step_workers(out) : s->workers;
  w->cur = *out;
}

/* The layer's output layout becomes current, balanced; the network keeps
 * it and its gradient (worker 0's block). */
static void step_output(step_walk *w, adj_step_stage *s, int ndim, const int *parts, const int64_t *per_sample) {
  step_layout out = {.ndim = ndim};
  memcpy(out.parts, parts, sizeof out.parts);
  out.shape[0] = w->batch;
  memcpy(&out.shape[1], per_sample, sizeof(int64_t) * (size_t)(ndim - 1));
  step_output_layout(w, s, &out);
}


static void step_buffer(adj_step_stage *s, double elements, double esize) {
  s->memory[ADJ_STEP_MEMORY_BUFFERS] += (int64_t)(elements * esize);
}

/* The local convolution plan's workspace for the twin's shapes. */
static void step_conv_workspace(const step_walk *w, adj_step_stage *s, const adj_desc_layer *twin, int64_t n,
                                const adj_window_geometry *g) {
  adj_tensor x = {.dtype = w->m->o.dtype, .rank = twin->in_rank + 1}, wt = {.dtype = w->m->o.dtype,
                                                                         .rank = twin->in_rank + 1};
  x.shape[0] = n, wt.shape[0] = twin->out_shape[0], wt.shape[1] = twin->in_shape[0];
  for (int k = 0; k < twin->in_rank; k++) x.shape[1 + k] = twin->in_shape[k];
  for (int j = 0; j < g->spatial_dims; j++) wt.shape[2 + j] = g->kernel[j];
  adj_conv_plan *plan = NULL;
  adj_conv_plan_config c = {.geometry = *g};
  /* The workspace holds a block per kernel thread. */
  int threads = adj_threads_get();
  adj_threads_set(w->threads);
  int status = adj_conv_plan_create(&c, &x, &wt, &plan);
  adj_threads_set(threads);
  if (status == ADJ_SUCCESS)
    s->memory[ADJ_STEP_MEMORY_WORKSPACE] += (int64_t)adj_conv_plan_workspace_size(plan);
  else
    adj_clear_error();
  adj_conv_plan_destroy(&plan);
}

/* Worker 0's per-sample block of the current layout. */
static void step_local_block(const step_walk *w, int64_t *block) {
  for (int k = 1; k < w->cur.ndim; k++) block[k - 1] = step_first_block(&w->cur, k);
}

/* ---- padding modes ------------------------------------------------------------------------------ */

int step_pad(step_walk *w, int i, const adj_padding_mode mode, const int64_t (*padding)[2]) {
  adj_step_stage *s;
  ADJ_CALL(step_stage_new(w, i, "pad", NULL, &s));
  int sd = w->cur.ndim - 2;
  adj_desc_layer twin = {.kind = ADJ_DESC_PAD, .in_rank = sd + 1, .out_rank = sd + 1, .u.pad = {.mode = mode}};
  int64_t out[ADJ_DESC_MAX_DIMS] = {w->cur.shape[1]};
  step_local_block(w, twin.in_shape);
  twin.out_shape[0] = twin.in_shape[0];
  double rows = 0, cross = (double)twin.in_shape[0] * (double)step_block(w->batch, w->cur.parts[0]);
  for (int j = 0; j < sd; j++) {
    int64_t n = w->cur.shape[2 + j], grown = n + padding[j][0] + padding[j][1];
    int parts = w->cur.parts[2 + j];
    twin.out_shape[1 + j] = step_block(grown, parts);
    twin.u.pad.padding[j][0] = padding[j][0], twin.u.pad.padding[j][1] = parts > 1 ? 0 : padding[j][1];
    twin.in_shape[1 + j] = twin.out_shape[1 + j] - twin.u.pad.padding[j][0] - twin.u.pad.padding[j][1];
    out[1 + j] = grown;
    /* Reflected, replicated or wrapped rows come from the other end's worker. */
    if (mode == ADJ_PAD_ZEROS || parts == 1) continue;
    double section = cross * (double)(padding[j][0] > padding[j][1] ? padding[j][0] : padding[j][1]);
    for (int k = 0; k < sd; k++)
      if (k != j) section *= (double)twin.in_shape[1 + k];
    rows += section;
  }
  if (rows > 0) {
    step_charge(w, s, ADJ_STEP_FORWARD, "padding rows", ADJ_COMM_P2P, 2, rows * w->esize, 1);
    if (s->input_gradient) step_charge(w, s, ADJ_STEP_BACKWARD, "padding rows", ADJ_COMM_P2P, 2, rows * w->esize, 1);
  }
  ADJ_CALL(step_compute(w, s, &twin, step_block(w->batch, w->cur.parts[0]), false));
  step_output(w, s, w->cur.ndim, w->cur.parts, out);
  return ADJ_SUCCESS;
}

/* A window layer's padding mode runs as a pad layer before it (network_build.c);
 * the window then pads nothing. */
static int step_mode_padding(step_walk *w, int i, adj_padding_mode mode, adj_window_geometry *g) {
  if (mode == ADJ_PAD_ZEROS) return ADJ_SUCCESS;
  int64_t padding[ADJ_DESC_MAX_DIMS][2] = {{0}};
  for (int j = 0; j < g->spatial_dims; j++) {
    padding[j][0] = g->padding_left[j], padding[j][1] = g->padding_right[j];
    g->padding_left[j] = g->padding_right[j] = 0;
  }
  return step_pad(w, i, mode, (const int64_t (*)[2])padding);
}

/* ---- parameters -------------------------------------------------------------------------------- */

/* A layer's weight block, and its bias block when bias > 0, broadcast over
 * the q workers that use them and summed back in the backward: rank 0's
 * parameters, and the layer's copies of them and of their gradients. */
static void step_weights(const step_walk *w, adj_step_stage *s, int q, double weights, double bias) {
  double e = w->esize;
  step_broadcast(w, s, ADJ_STEP_FORWARD, "weight broadcast", q, weights * e);
  step_sum(w, s, ADJ_STEP_BACKWARD, "weight sum", q, weights * e);
  step_parameter(w, s, (int64_t)weights);
  if (bias > 0) {
    step_broadcast(w, s, ADJ_STEP_FORWARD, "bias broadcast", q, bias * e);
    step_sum(w, s, ADJ_STEP_BACKWARD, "bias sum", q, bias * e);
    step_parameter(w, s, (int64_t)bias);
  }
  step_buffer(s, 2 * (weights + bias), e);
}

/* ---- convolution ------------------------------------------------------------------------------- */

/* conv_layer.h's operators: x broadcast over P_co, y summed over P_ci,
 * weights and bias broadcast over the batch and spatial workers. */
static void step_conv_moves(const step_walk *w, adj_step_stage *s, int p_co, double x_held, double y_block,
                            double weights, double bias) {
  int p_ci = w->cur.parts[1], q = w->cur.parts[0];
  for (int j = 2; j < w->cur.ndim; j++) q *= w->cur.parts[j];
  double e = w->esize;
  step_broadcast(w, s, ADJ_STEP_FORWARD, "input broadcast", p_co, x_held * e);
  if (s->input_gradient) step_sum(w, s, ADJ_STEP_BACKWARD, "input sum", p_co, x_held * e);
  step_sum(w, s, ADJ_STEP_FORWARD, "output sum", p_ci, y_block * e);
  step_broadcast(w, s, ADJ_STEP_BACKWARD, "output broadcast", p_ci, y_block * e);
  step_weights(w, s, q, weights, bias);
}

int step_conv(step_walk *w, int i) {
  const adj_desc_layer *l = &w->d->layers[i];
  adj_window_geometry g = l->u.conv.window;
  ADJ_CALL(step_mode_padding(w, i, l->u.conv.padding_mode, &g));
  int sd = g.spatial_dims, p_co = w->layout->layers[i].placement.out_parts > 1 ? w->layout->layers[i].placement.out_parts : 1;
  adj_step_stage *s;
  ADJ_CALL(step_stage_new(w, i, "conv", NULL, &s));
  int64_t groups = l->u.conv.groups, n = step_first_block(&w->cur, 0), ci = step_first_block(&w->cur, 1);
  int64_t co = step_block(l->out_shape[0], p_co);
  step_dim dims[ADJ_MAX_SPATIAL_DIMS];
  step_window(w, &g, &l->out_shape[1], dims);
  adj_desc_layer twin = *l;
  twin.u.conv.window = g;
  twin.u.conv.out_channels = co;
  step_window_twin(&twin, &twin.u.conv.window, sd, dims, ci / groups * groups, co);
  double weights = (double)(co * (ci / groups)), held, input, output;
  bool trims;
  for (int j = 0; j < sd; j++) weights *= (double)g.kernel[j];
  step_window_volumes(sd, dims, &held, &input, &output, &trims);
  twin.parameter_count = (int64_t)weights + (l->u.conv.bias ? co : 0);
  ADJ_CALL(step_compute(w, s, &twin, n, true));
  double x_block = (double)(n * ci), y_block = (double)(n * co);
  step_halo(w, s, &g, &l->out_shape[1], dims, x_block);
  step_conv_moves(w, s, p_co, x_block * held, y_block * output, weights, l->u.conv.bias ? (double)co : 0);
  /* x_pad, x_hat and their gradients; x_k when trimmed; y^ and its gradient. */
  step_buffer(s, 4 * x_block * held + (trims ? 2 * x_block * input : 0) + 2 * y_block * output, w->esize);
  step_conv_workspace(w, s, &twin, n, &twin.u.conv.window);
  int parts[ADJ_DESC_MAX_DIMS + 1];
  memcpy(parts, w->cur.parts, sizeof parts);
  parts[1] = p_co;
  s->workers = (int)step_workers(&w->cur) * p_co;
  step_output(w, s, w->cur.ndim, parts, l->out_shape);
  return ADJ_SUCCESS;
}

/* ---- pooling ------------------------------------------------------------------------------------ */

int step_pool(step_walk *w, int i) {
  const adj_desc_layer *l = &w->d->layers[i];
  adj_window_geometry g = l->u.pool.window;
  ADJ_CALL(step_mode_padding(w, i, l->u.pool.padding_mode, &g));
  int sd = g.spatial_dims;
  adj_step_stage *s;
  ADJ_CALL(step_stage_new(w, i, "pool", NULL, &s));
  int64_t n = step_block(w->batch, w->cur.parts[0]), c = step_block(w->cur.shape[1], w->cur.parts[1]);
  step_dim dims[ADJ_MAX_SPATIAL_DIMS];
  step_window(w, &g, &l->out_shape[1], dims);
  adj_desc_layer twin = *l;
  twin.u.pool.window = g;
  step_window_twin(&twin, &twin.u.pool.window, sd, dims, c, c);
  double held, input, output;
  bool trims;
  step_window_volumes(sd, dims, &held, &input, &output, &trims);
  ADJ_CALL(step_compute(w, s, &twin, n, false));
  step_halo(w, s, &g, &l->out_shape[1], dims, (double)(n * c));
  /* The halo-extended block and its gradient; the trimmed kernel input and its tangent. */
  step_buffer(s, 2 * (double)(n * c) * held + (trims ? 2 * (double)(n * c) * input : 0), w->esize);
  step_output(w, s, w->cur.ndim, w->cur.parts, l->out_shape);
  return ADJ_SUCCESS;
}

/* ---- affine layers ------------------------------------------------------------------------------- */

/* The twin GEMM of a batch block n, f_in -> f_out features. */
static adj_desc_layer step_affine_twin(const adj_desc_layer *l, int64_t f_in, int64_t f_out) {
  adj_desc_layer twin = *l;
  twin.in_rank = twin.out_rank = 1;
  twin.in_shape[0] = f_in, twin.out_shape[0] = f_out;
  twin.u.affine.out_features = f_out;
  twin.parameter_count = f_in * f_out + (l->u.affine.bias ? f_out : 0);
  return twin;
}

/* affine15_layer.h on P_r x P_c: all-gather of the input over P_r (its
 * adjoint a reduce-scatter), weights and bias broadcast over P_c. */
static int step_affine15(step_walk *w, int i, adj_step_stage *s) {
  const adj_desc_layer *l = &w->d->layers[i];
  int p_r = w->layout->layers[i].placement.grid[0], p_c = w->layout->layers[i].placement.grid[1];
  int64_t n = step_block(w->batch, p_c), f_in = l->in_shape[0], fo = step_block(l->out_shape[0], p_r);
  adj_desc_layer twin = step_affine_twin(l, f_in, fo);
  ADJ_CALL(step_compute(w, s, &twin, n, true));
  double e = w->esize, gathered = (double)(n * f_in), weights = (double)(fo * f_in);
  step_charge(w, s, ADJ_STEP_FORWARD, "input gather", ADJ_COMM_ALLGATHER, p_r, gathered * e, 0);
  if (s->input_gradient) step_charge(w, s, ADJ_STEP_BACKWARD, "input reduce-scatter", ADJ_COMM_ALLGATHER, p_r, gathered * e, 0);
  step_weights(w, s, p_c, weights, l->u.affine.bias ? (double)fo : 0);
  step_buffer(s, 2 * gathered, e);
  s->workers = p_r * p_c;
  return ADJ_SUCCESS;
}

/* affine_layer.h on P_b x P_fo x P_fi: x broadcast over P_fo, weights and
 * bias over P_b, partial outputs summed over P_fi. */
static int step_affine_parts(step_walk *w, int i, adj_step_stage *s) {
  const adj_desc_layer *l = &w->d->layers[i];
  int p_b = w->cur.parts[0], p_fi = w->cur.parts[1];
  int p_fo = w->layout->layers[i].placement.out_parts > 0 ? w->layout->layers[i].placement.out_parts : 1;
  int64_t n = step_block(w->batch, p_b), fi = step_block(l->in_shape[0], p_fi), fo = step_block(l->out_shape[0], p_fo);
  adj_desc_layer twin = step_affine_twin(l, fi, fo);
  ADJ_CALL(step_compute(w, s, &twin, n, true));
  double e = w->esize, x = (double)(n * fi), weights = (double)(fo * fi), y = (double)(n * fo);
  step_broadcast(w, s, ADJ_STEP_FORWARD, "input broadcast", p_fo, x * e);
  if (s->input_gradient) step_sum(w, s, ADJ_STEP_BACKWARD, "input sum", p_fo, x * e);
  step_sum(w, s, ADJ_STEP_FORWARD, "output sum", p_fi, y * e);
  step_broadcast(w, s, ADJ_STEP_BACKWARD, "output broadcast", p_fi, y * e);
  step_weights(w, s, p_b, weights, l->u.affine.bias ? (double)fo : 0);
  step_buffer(s, 2 * (x + y), e);
  s->workers = p_b * p_fi * p_fo;
  return ADJ_SUCCESS;
}

int step_affine(step_walk *w, int i) {
  const adj_desc_layer *l = &w->d->layers[i];
  const adj_layer_layout *ll = &w->layout->layers[i];
  adj_step_stage *s;
  ADJ_CALL(step_stage_new(w, i, "fc", NULL, &s));
  ADJ_CALL(ll->placement.kind == ADJ_PLACE_GRID ? step_affine15(w, i, s) : step_affine_parts(w, i, s));
  step_output(w, s, 2, ll->out_parts, l->out_shape);
  return ADJ_SUCCESS;
}

/* ---- layers that keep the layout ------------------------------------------------------------------ */

/* Batch norm: the statistics (5 C doubles forward, 4 C backward) summed over
 * the workers that share the channels. */
static void step_batchnorm(const step_walk *w, adj_step_stage *s, const adj_desc_layer *l, double local) {
  int q = (int)step_workers(&w->cur) / w->cur.parts[1];
  double c = (double)step_block(w->cur.shape[1], w->cur.parts[1]);
  step_charge(w, s, ADJ_STEP_FORWARD, "statistics sum", ADJ_COMM_ALLREDUCE, q, 5 * c * 8, 0);
  step_charge(w, s, ADJ_STEP_BACKWARD, "statistics sum", ADJ_COMM_ALLREDUCE, q, 4 * c * 8, 0);
  if (l->u.batchnorm.affine) step_parameter(w, s, (int64_t)c), step_parameter(w, s, (int64_t)c);
  /* x^, the float64 statistics, sums, running statistics and work. */
  step_buffer(s, local, w->esize);
  step_buffer(s, 16 * c, 8);
}

/* Upsampling reads a neighbour's edge entry for linear interpolation. */
static void step_upsample(const step_walk *w, adj_step_stage *s, const adj_desc_layer *l, double local) {
  int sd = w->cur.ndim - 2;
  double edge = 0, cross = local;
  bool linear = l->u.upsample.mode != ADJ_INTERP_NEAREST;
  for (int j = 0; j < sd && linear; j++)
    if (w->cur.parts[2 + j] > 1) edge += 2 * cross / (double)step_first_block(&w->cur, 2 + j);
  if (edge > 0) {
    step_charge(w, s, ADJ_STEP_FORWARD, "halo", ADJ_COMM_P2P, 2, edge * w->esize, 2);
    if (s->input_gradient) step_charge(w, s, ADJ_STEP_BACKWARD, "halo", ADJ_COMM_P2P, 2, edge * w->esize, 2);
  }
  step_buffer(s, 2 * (local + edge), w->esize);
}

/* The output layout of a layer that keeps its input's split: an activation
 * or batch norm keeps the shape it is given (after the ReLU / max-pool swap
 * the pool's, not the description's), a flatten cuts the features where the
 * channels are cut, an upsampling scales its input's cuts
 * (upsample_layer.c). */
static step_layout step_pointwise_output(const step_walk *w, const adj_desc_layer *l, const adj_layer_layout *ll) {
  if (l->kind == ADJ_DESC_ACTIVATION || l->kind == ADJ_DESC_BATCHNORM) return w->cur;
  step_layout out = {.ndim = ll->out_ndim, .from = {w->cur.from[0]}};
  memcpy(out.parts, ll->out_parts, sizeof out.parts);
  out.shape[0] = w->batch;
  memcpy(&out.shape[1], l->out_shape, sizeof(int64_t) * (size_t)l->out_rank);
  if (l->kind == ADJ_DESC_FLATTEN) out.from[1] = w->cur.shape[1];
  for (int k = 1; l->kind == ADJ_DESC_UPSAMPLE && k < out.ndim; k++)
    out.from[k] = k < 2 ? w->cur.from[k] : w->cur.shape[k];
  return out;
}

int step_pointwise(step_walk *w, int i) {
  const adj_desc_layer *l = &w->d->layers[i];
  const adj_layer_layout *ll = &w->layout->layers[i];
  adj_step_stage *s;
  ADJ_CALL(step_stage_new(w, i, adj_desc_layer_keyword(l), NULL, &s));
  adj_desc_layer twin = *l;
  step_local_block(w, twin.in_shape);
  int64_t n = step_block(w->batch, w->cur.parts[0]);
  double local = (double)n;
  for (int k = 0; k < l->in_rank; k++) local *= (double)twin.in_shape[k];
  for (int k = 0; k < l->out_rank; k++) twin.out_shape[k] = step_block(l->out_shape[k], ll->out_parts[1 + k]);
  if (l->kind == ADJ_DESC_ACTIVATION || l->kind == ADJ_DESC_BATCHNORM)
    memcpy(twin.out_shape, twin.in_shape, sizeof twin.out_shape);
  if (l->kind == ADJ_DESC_FLATTEN) twin.out_shape[0] = (int64_t)(local / (double)n);
  if (l->kind == ADJ_DESC_UPSAMPLE && l->u.upsample.size[0])
    memcpy(twin.u.upsample.size, &twin.out_shape[1], sizeof(int64_t) * (size_t)(l->out_rank - 1));
  if (l->kind == ADJ_DESC_BATCHNORM) step_batchnorm(w, s, l, local);
  if (l->kind == ADJ_DESC_UPSAMPLE) step_upsample(w, s, l, local);
  /* tanh and sigmoid keep their output for backward (pointwise_layer.c). */
  if (l->kind == ADJ_DESC_ACTIVATION && adj_activation_keeps_output(l->u.activation.kind))
    step_buffer(s, local, w->esize);
  twin.parameter_count = s->parameters;
  ADJ_CALL(step_compute(w, s, &twin, n, s->parameters > 0));
  step_layout out = step_pointwise_output(w, l, ll);
  step_output_layout(w, s, &out);
  return ADJ_SUCCESS;
}

/* ---- losses -------------------------------------------------------------------------------------- */

/* xent_layer.h gathers the logits onto rank 0, which computes; the other
 * losses compute on every block and sum a scalar (loss_layers.h). */
int step_loss(step_walk *w, int i) {
  const adj_desc_layer *l = &w->d->layers[i];
  adj_step_stage *s;
  ADJ_CALL(step_stage_new(w, i, adj_desc_kind_name(l->kind), NULL, &s));
  adj_desc_layer twin = *l;
  int64_t workers = step_workers(&w->cur), n = w->batch;
  double whole = (double)w->batch, local = (double)step_block(w->batch, w->cur.parts[0]);
  for (int k = 1; k < w->cur.ndim; k++) {
    whole *= (double)w->cur.shape[k];
    local *= (double)step_first_block(&w->cur, k);
  }
  if (l->kind == ADJ_DESC_XENT) {
    double bytes = (whole - local) * w->esize;
    step_charge(w, s, ADJ_STEP_FORWARD, "logits gather", ADJ_COMM_P2P, 2, bytes, (double)(workers - 1));
    step_charge(w, s, ADJ_STEP_BACKWARD, "logits scatter", ADJ_COMM_P2P, 2, bytes, (double)(workers - 1));
    step_buffer(s, 2 * whole, w->esize);
    step_buffer(s, (double)w->batch, 8);
  } else {
    step_local_block(w, twin.in_shape);
    memcpy(twin.out_shape, twin.in_shape, sizeof twin.out_shape);
    n = step_block(w->batch, w->cur.parts[0]);
    step_charge(w, s, ADJ_STEP_FORWARD, "loss sum", ADJ_COMM_ALLREDUCE, (int)workers, 8, 0);
    step_charge(w, s, ADJ_STEP_BACKWARD, "loss sum", ADJ_COMM_ALLREDUCE, (int)workers, 8, 0);
    step_buffer(s, local, w->esize);
  }
  ADJ_CALL(step_compute(w, s, &twin, n, false));
  s->workers = (int)workers;
  /* The loss: a scalar on rank 0. */
  w->cur = (step_layout){.ndim = 1, .parts = {1}, .shape = {1}};
  return ADJ_SUCCESS;
}

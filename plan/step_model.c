/* The step model (step_model.h): the builder's walk over a resolved
 * placement, the repartitions between layers, the gradient reducer's
 * buckets, the totals and the printed table.  The stages of each layer kind
 * are in step_stages.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/decomposition.h"
#include "adjoin/gradient_reducer.h"
#include "error_impl.h"
#include "plan_impl.h"
#include "step_model_impl.h"

static const char *const adj_step_phase_names[ADJ_STEP_PHASES] = {"forward", "backward", "optimizer"};
static const char *const adj_step_memory_names[ADJ_STEP_MEMORY_KINDS] = {"parameters",  "gradients", "optimizer",
                                                                    "activations", "buffers",   "workspace"};

const char *adj_step_phase_name(adj_step_phase phase) {
  return phase >= 0 && phase < ADJ_STEP_PHASES ? adj_step_phase_names[phase] : "?";
}

const char *adj_step_memory_name(adj_step_memory_kind kind) {
  return kind >= 0 && kind < ADJ_STEP_MEMORY_KINDS ? adj_step_memory_names[kind] : "?";
}

/* ---- the model object -------------------------------------------------------------------------- */

/* ADJ_SUM_REDUCE_ALGORITHM, as the operators read it (0: not forced). */
static int adj_step_forced_algorithm(void) {
  const char *env = getenv("ADJ_SUM_REDUCE_ALGORITHM");
  for (int a = 1; env && a < ADJ_SUM_ALGORITHM_COUNT; a++)
    if (!strcmp(env, adj_sum_algorithm_names[a])) return a;
  return 0;
}

int adj_step_model_create(const adj_step_options *o, adj_step_model **model) {
  ADJ_CHECK(model, ADJ_ERR_ARG, "step model: output is NULL");
  *model = NULL;
  ADJ_CHECK(o && o->machine, ADJ_ERR_ARG, "step model: options and their machine are required");
  ADJ_CHECK(o->batch >= 1 && o->ranks >= 1 && o->replicas >= 0, ADJ_ERR_ARG,
            "step model: batch %lld and ranks %d must be >= 1, replicas %d >= 0", (long long)o->batch, o->ranks,
            o->replicas);
  ADJ_CHECK(adj_dtype_is_float(o->dtype), ADJ_ERR_DTYPE, "step model: dtype %s cannot train",
            adj_dtype_name(o->dtype));
  adj_step_model *m = calloc(1, sizeof *m);
  ADJ_CHECK(m, ADJ_ERR_MEM, "step model: out of memory");
  m->o = *o;
  m->machine = *o->machine;
  m->o.machine = &m->machine;
  char path[1100];
  adj_algorithm_table_path(path, sizeof path);
  if (path[0] && adj_algorithm_table_read(path, &m->algorithms)) {
    m->algorithms.n = 0; /* the operators ignore a malformed table too */
    adj_clear_error();
  }
  m->forced = adj_step_forced_algorithm();
  *model = m;
  return ADJ_SUCCESS;
}

void adj_step_model_destroy(adj_step_model **model) {
  if (!model) return;
  free(*model);
  *model = NULL;
}

/* ---- charging ---------------------------------------------------------------------------------- */

int64_t step_workers(const step_layout *l) {
  int64_t n = 1;
  for (int k = 0; k < l->ndim; k++) n *= l->parts[k];
  return n;
}

/* Records an operator application and adds it to the stage's phase. */
static void step_record(adj_step_stage *s, const adj_step_op *op) {
  s->comm[op->phase] += op->seconds;
  s->bytes[op->phase] += op->bytes;
  s->messages[op->phase] += op->messages;
  if (s->n_ops < ADJ_STEP_MAX_OPS) s->ops[s->n_ops++] = *op;
}

void step_charge(const step_walk *w, adj_step_stage *s, adj_step_phase phase, const char *what, adj_comm_kind kind,
                 int q, double bytes, double messages) {
  if (q <= 1) return;
  double latency = 0;
  while ((1 << (int)latency) < q) latency++;
  adj_step_op op = {.what = what, .phase = phase, .pattern = kind, .group = q, .bytes = bytes,
                    .messages = kind == ADJ_COMM_P2P ? messages : latency,
                    .seconds = adj_machine_comm_time(&w->m->machine, kind, q, bytes, messages)};
  step_record(s, &op);
}

/* The summing algorithm broadcast.c chooses: forced, measured, or the fixed
 * rule (reduce below 64 KB, all-reduce below 1 MB, reduce-scatter above);
 * 1 reduce, 2 all-reduce, 3 reduce-scatter, 4 chain. */
static int step_sum_algorithm(const step_walk *w, int q, double bytes) {
  int a = w->m->forced ? w->m->forced : adj_algorithm_table_choose(&w->m->algorithms, q, (int64_t)bytes);
  return a ? a : bytes >= (1 << 20) ? 3 : bytes >= 65536 ? 2 : 1;
}

/* The operator is made with its summing plan: under an all-reduce or a
 * reduce-scatter its root, rank 0, keeps a scratch copy of the block. */
void step_broadcast(const step_walk *w, adj_step_stage *s, adj_step_phase phase, const char *what, int q,
                    double bytes) {
  if (bytes <= 0 || q <= 1) return;
  step_charge(w, s, phase, what, ADJ_COMM_BROADCAST, q, bytes, 0);
  int a = step_sum_algorithm(w, q, bytes);
  if (a == 2 || a == 3) s->memory[ADJ_STEP_MEMORY_BUFFERS] += (int64_t)bytes;
}

void step_sum(const step_walk *w, adj_step_stage *s, adj_step_phase phase, const char *what, int q, double bytes) {
  if (q <= 1 || bytes <= 0) return;
  int a = step_sum_algorithm(w, q, bytes);
  static const adj_comm_kind pattern[] = {ADJ_COMM_REDUCE, ADJ_COMM_REDUCE, ADJ_COMM_ALLREDUCE,
                                          ADJ_COMM_REDUCE_SCATTER, ADJ_COMM_P2P};
  /* The chain: q - 1 hops of 64 KB segments, pipelined. */
  double segments = ceil(bytes / 65536);
  step_charge(w, s, phase, what, pattern[a], q, bytes, a == 4 ? q - 1 + segments : 0);
}

int step_stage_new(step_walk *w, int layer, const char *kind, const char *name, adj_step_stage **stage) {
  adj_step_prediction *p = w->p;
  ADJ_CALL(adj_plan_grow((void **)&p->stages, p->n, &w->capacity, sizeof *p->stages, 32, "step model: stages"));
  adj_step_stage *s = &p->stages[p->n++];
  *s = (adj_step_stage){.kind = kind, .layer = layer, .input_gradient = w->trainable_seen, .measured = true};
  snprintf(s->name, sizeof s->name, "%s", name ? name : w->d->layers[layer].name);
  *stage = s;
  return ADJ_SUCCESS;
}

int step_compute(const step_walk *w, adj_step_stage *s, const adj_desc_layer *twin, int64_t batch,
                 bool has_parameters) {
  adj_compute_twin t = {.layer = *twin, .batch = batch, .dtype = w->m->o.dtype, .threads = w->threads,
                        .input_gradient = s->input_gradient};
  double forward, backward;
  bool measured;
  ADJ_CALL(adj_layer_times_lookup(w->m->o.times, &w->m->machine, &t, &forward, &backward, &measured));
  s->measured &= measured;
  s->compute[ADJ_STEP_FORWARD] += forward;
  /* Before the first stage with parameters no backward runs (network.h). */
  if (w->trainable_seen || has_parameters) s->compute[ADJ_STEP_BACKWARD] += backward;
  return ADJ_SUCCESS;
}

void step_parameter(const step_walk *w, adj_step_stage *s, int64_t count) {
  const adj_step_options *o = &w->m->o;
  int64_t bytes = count * (int64_t)w->esize;
  int state = o->optimizer == ADJ_OPTIMIZER_ADAM ? 2 : o->momentum ? 1 : 0;
  s->parameters += count;
  if (s->tensors < ADJ_DESC_MAX_PARAMETERS) s->tensor[s->tensors++] = count;
  s->memory[ADJ_STEP_MEMORY_PARAMETERS] += bytes;
  s->memory[ADJ_STEP_MEMORY_GRADIENTS] += 2 * bytes;
  s->memory[ADJ_STEP_MEMORY_OPTIMIZER] += state * bytes;
}

int64_t step_cut(const step_layout *l, int k, int p) {
  int64_t n = l->shape[k], from = l->from[k] > 0 ? l->from[k] : n, a, extent;
  if (p >= l->parts[k]) return n;
  adj_balanced_block(from, l->parts[k], p, &a, &extent);
  return from == n ? a : (a * n + from - 1) / from;
}

int64_t step_first_block(const step_layout *l, int k) { return step_cut(l, k, 1) - step_cut(l, k, 0); }

/* ---- repartitions ------------------------------------------------------------------------------ */

/* The block of worker `index` (row-major over l's parts): start and extent per dimension. */
static void step_box(const step_layout *l, int64_t index, int64_t *start, int64_t *extent) {
  for (int k = l->ndim - 1; k >= 0; k--) {
    int part = (int)(index % l->parts[k]);
    index /= l->parts[k];
    start[k] = step_cut(l, k, part);
    extent[k] = step_cut(l, k, part + 1) - start[k];
  }
}

/* The part of dimension k holding entry x. */
static int64_t step_owner(const step_layout *l, int k, int64_t x) {
  int lo = 0, hi = l->parts[k] - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (step_cut(l, k, mid) <= x) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/* Blocks of `to` that [start, start + extent) of dimension k meets. */
static int64_t step_meets(const step_layout *to, int k, int64_t start, int64_t extent) {
  if (extent <= 0) return 0;
  return step_owner(to, k, start + extent - 1) - step_owner(to, k, start) + 1;
}

/* Worker w's volume that stays (its blocks' intersection), and its peers in
 * `to` for its block of `from`. */
static void step_move_side(const step_layout *from, const step_layout *to, int64_t w, double *volume, double *kept,
                           double *peers) {
  int64_t s0[ADJ_DESC_MAX_DIMS + 1], e0[ADJ_DESC_MAX_DIMS + 1], s1[ADJ_DESC_MAX_DIMS + 1], e1[ADJ_DESC_MAX_DIMS + 1];
  *volume = *kept = *peers = 0;
  if (w >= step_workers(from)) return;
  step_box(from, w, s0, e0);
  bool mine = w < step_workers(to);
  if (mine) step_box(to, w, s1, e1);
  double v = 1, both = mine ? 1 : 0, meets = 1;
  for (int k = 0; k < from->ndim; k++) {
    v *= (double)e0[k];
    meets *= (double)step_meets(to, k, s0[k], e0[k]);
    if (mine) {
      int64_t lo = s0[k] > s1[k] ? s0[k] : s1[k], hi = s0[k] + e0[k] < s1[k] + e1[k] ? s0[k] + e0[k] : s1[k] + e1[k];
      both *= hi > lo ? (double)(hi - lo) : 0;
    }
  }
  *volume = v, *kept = both, *peers = meets - (both > 0 ? 1 : 0);
}

static int step_repartition(step_walk *w, int layer, const step_layout *to) {
  adj_step_stage *s;
  char name[ADJ_DESC_NAME_SIZE];
  snprintf(name, sizeof name, "->%.*s", ADJ_DESC_NAME_SIZE - 3, w->d->layers[layer].name);
  ADJ_CALL(step_stage_new(w, layer, "repartition", name, &s));
  const step_layout *from = &w->cur;
  int64_t workers = step_workers(from) > step_workers(to) ? step_workers(from) : step_workers(to);
  double worst_time = 0, worst_bytes = 0, worst_messages = 0, staged0 = 0;
  for (int64_t k = 0; k < workers; k++) {
    double out, out_kept, out_peers, in, in_kept, in_peers;
    step_move_side(from, to, k, &out, &out_kept, &out_peers);
    step_move_side(to, from, k, &in, &in_kept, &in_peers);
    double bytes = fmax(out - out_kept, in - in_kept) * w->esize, messages = fmax(out_peers, in_peers);
    double t = adj_machine_comm_time(&w->m->machine, ADJ_COMM_P2P, 2, bytes, messages);
    if (t > worst_time) worst_time = t, worst_bytes = bytes, worst_messages = messages;
    if (k == 0) staged0 = ((out - out_kept) + (in - in_kept)) * w->esize;
  }
  s->workers = (int)workers;
  for (int phase = 0; phase < 2; phase++) {
    if (phase == ADJ_STEP_BACKWARD && !s->input_gradient) break;
    adj_step_op op = {.what = "repartition", .phase = (adj_step_phase)phase, .pattern = ADJ_COMM_P2P,
                      .group = (int)workers, .bytes = worst_bytes, .messages = worst_messages, .seconds = worst_time};
    if (worst_bytes > 0) step_record(s, &op);
  }
  s->memory[ADJ_STEP_MEMORY_BUFFERS] = (int64_t)staged0;
  double block = w->esize;
  for (int k = 0; k < to->ndim; k++) block *= (double)step_first_block(to, k);
  s->memory[ADJ_STEP_MEMORY_ACTIVATIONS] = 2 * (int64_t)block;
  return ADJ_SUCCESS;
}

/* ---- the walk ---------------------------------------------------------------------------------- */

static bool step_same_grid(const step_layout *a, const step_layout *b) {
  if (a->ndim != b->ndim) return false;
  for (int k = 0; k < a->ndim; k++) {
    if (a->parts[k] != b->parts[k] || a->shape[k] != b->shape[k]) return false;
    for (int p = 1; p < a->parts[k]; p++)
      if (step_cut(a, k, p) != step_cut(b, k, p)) return false;
  }
  return true;
}

/* The volume past the batch when only the batch is split, else -1. */
static int64_t step_batch_only_inner(const step_layout *l) {
  int64_t inner = 1;
  for (int k = 1; k < l->ndim; k++) {
    if (l->parts[k] != 1) return -1;
    inner *= l->shape[k];
  }
  return inner;
}

/* Whether a repartition from a to b moves anything (network_build.c's rule:
 * the same grid, or the same batch split of equal inner volumes, moves
 * nothing). */
static bool step_moves(const step_layout *a, const step_layout *b) {
  if (step_same_grid(a, b)) return false;
  int64_t ia = step_batch_only_inner(a), ib = step_batch_only_inner(b);
  return !(ia >= 0 && ia == ib && a->parts[0] == b->parts[0] && a->shape[0] == b->shape[0] &&
           a->from[0] == b->from[0]);
}

static int step_layer_stages(step_walk *w, int i) {
  const adj_desc_layer *l = &w->d->layers[i];
  const adj_layer_layout *ll = &w->layout->layers[i];
  bool same_parts = w->cur.ndim == ll->in_ndim;
  for (int k = 0; same_parts && k < ll->in_ndim; k++) same_parts = w->cur.parts[k] == ll->in_parts[k];
  if (ll->explicit_input && !same_parts) {
    step_layout target = w->cur;
    memcpy(target.parts, ll->in_parts, sizeof target.parts);
    memset(target.from, 0, sizeof target.from); /* the builder's targets are balanced */
    if (step_moves(&w->cur, &target)) ADJ_CALL(step_repartition(w, i, &target));
    w->cur = target;
  }
  switch (l->kind) {
  case ADJ_DESC_CONV: return step_conv(w, i);
  case ADJ_DESC_POOL: return step_pool(w, i);
  case ADJ_DESC_AFFINE: return step_affine(w, i);
  case ADJ_DESC_LOSS:
  case ADJ_DESC_XENT: return step_loss(w, i);
  case ADJ_DESC_PAD: return step_pad(w, i, l->u.pad.mode, l->u.pad.padding);
  default: return step_pointwise(w, i);
  }
}

/* Layer i's stages; from the first stage with parameters on, every stage
 * computes its input gradient. */
static int step_layer_stage(step_walk *w, int i) {
  int first = w->p->n;
  ADJ_CALL(step_layer_stages(w, i));
  for (int k = first; k < w->p->n; k++)
    if (w->p->stages[k].parameters > 0) w->trainable_seen = true;
  return ADJ_SUCCESS;
}

/* network_build.c's pass: a ReLU before a max pool that takes its input
 * where it lies runs after the pool. */
static bool step_swapped(const step_walk *w, int i) {
  if (i + 1 >= w->d->n) return false;
  const adj_desc_layer *l = &w->d->layers[i], *next = &w->d->layers[i + 1];
  return l->kind == ADJ_DESC_ACTIVATION && l->u.activation.kind == ADJ_RELU && next->kind == ADJ_DESC_POOL &&
         next->u.pool.kind == ADJ_POOL_MAX && next->u.pool.padding_mode == ADJ_PAD_ZEROS &&
         !w->layout->layers[i + 1].explicit_input;
}

static int step_walk_layers(step_walk *w) {
  const adj_network_layout *layout = w->layout;
  w->cur = (step_layout){.ndim = layout->input_ndim};
  memcpy(w->cur.parts, layout->input_parts, sizeof w->cur.parts);
  w->cur.shape[0] = w->batch;
  memcpy(&w->cur.shape[1], w->d->input_shape, sizeof w->d->input_shape);
  for (int i = 0; i < w->d->n; i++) {
    if (step_swapped(w, i)) {
      ADJ_CALL(step_layer_stage(w, i + 1));
      ADJ_CALL(step_layer_stage(w, i));
      i++;
    } else {
      ADJ_CALL(step_layer_stage(w, i));
    }
  }
  /* The network allocates every stage's output but the last's. */
  if (w->p->n) w->p->stages[w->p->n - 1].memory[ADJ_STEP_MEMORY_ACTIVATIONS] = 0;
  return ADJ_SUCCESS;
}

/* ---- the gradient reducer ---------------------------------------------------------------------- */

/* A bucket closes: it reduces once the backward has made it ready and the
 * bucket before it is done. */
static void step_bucket_close(const adj_step_model *m, adj_step_prediction *p, double *bucket, double ready,
                              double *reduced_until) {
  if (*bucket <= 0) return;
  double t = adj_machine_comm_time(&m->machine, ADJ_COMM_ALLREDUCE, p->replicas, *bucket, 0);
  *reduced_until = fmax(*reduced_until, ready) + t;
  p->reducer += t, p->buckets++, *bucket = 0;
}

/* The reducer's buckets over the parameter blocks in reverse order (the
 * order their gradients become final), cut at the caps as
 * gradient_reducer.h cuts them; a block is final when its stage's backward
 * ends. */
static void step_reducer(const adj_step_model *m, adj_step_prediction *p, double esize) {
  int64_t first_cap = m->o.first_bucket_bytes ? m->o.first_bucket_bytes : ADJ_REDUCER_DEFAULT_FIRST_BUCKET_BYTES;
  int64_t cap = m->o.bucket_bytes ? m->o.bucket_bytes : ADJ_REDUCER_DEFAULT_BUCKET_BYTES;
  double clock = 0, reduced_until = 0, bucket = 0, ready = 0;
  for (int i = p->n - 1; i >= 0; i--) {
    const adj_step_stage *s = &p->stages[i];
    clock += s->compute[ADJ_STEP_BACKWARD] + s->comm[ADJ_STEP_BACKWARD];
    for (int k = s->tensors - 1; k >= 0; k--) {
      double bytes = (double)s->tensor[k] * esize, limit = (double)(p->buckets ? cap : first_cap);
      if (bucket > 0 && bucket + bytes > limit) step_bucket_close(m, p, &bucket, ready, &reduced_until);
      bucket += bytes, ready = clock;
    }
  }
  step_bucket_close(m, p, &bucket, ready, &reduced_until);
  p->reducer_hidden = p->reducer - fmax(0, reduced_until - clock);
}

/* ---- totals ------------------------------------------------------------------------------------ */

static int step_totals(const adj_step_model *m, step_walk *w) {
  adj_step_prediction *p = w->p;
  int64_t parameters = 0;
  for (int i = 0; i < p->n; i++) {
    const adj_step_stage *s = &p->stages[i];
    for (int phase = 0; phase < ADJ_STEP_PHASES; phase++) p->phase[phase] += s->compute[phase] + s->comm[phase];
    for (int k = 0; k < ADJ_STEP_MEMORY_KINDS; k++) p->memory[k] += s->memory[k];
    p->estimated += !s->measured;
    parameters += s->parameters;
  }
  double update;
  bool measured;
  ADJ_CALL(adj_layer_times_optimizer(m->o.times, &m->machine, m->o.optimizer, m->o.dtype, w->threads, parameters,
                                     &update, &measured));
  p->estimated += !measured;
  if (p->replicas > 1) step_reducer(m, p, w->esize);
  p->phase[ADJ_STEP_OPTIMIZER] += update + (p->reducer - p->reducer_hidden);
  int model_ranks = m->o.ranks / p->replicas;
  if (model_ranks > 1) p->agreements = 3 * adj_machine_comm_time(&m->machine, ADJ_COMM_ALLREDUCE, model_ranks, 4, 0);
  p->step = p->agreements;
  for (int phase = 0; phase < ADJ_STEP_PHASES; phase++) p->step += p->phase[phase];
  /* The input batch on its partition. */
  double input = w->esize;
  const adj_network_layout *l = w->layout;
  input *= (double)step_block(w->batch, l->input_parts[0]);
  for (int k = 1; k < l->input_ndim; k++) input *= (double)step_block(w->d->input_shape[k - 1], l->input_parts[k]);
  p->memory[ADJ_STEP_MEMORY_ACTIVATIONS] += (int64_t)input;
  p->baseline = m->machine.baseline;
  p->memory_total = p->baseline;
  for (int k = 0; k < ADJ_STEP_MEMORY_KINDS; k++) p->memory_total += p->memory[k];
  return ADJ_SUCCESS;
}

static int step_check(const adj_step_model *m, const adj_description *d, const adj_network_layout *layout,
                      int replicas) {
  ADJ_CHECK(d && layout && layout->n == d->n, ADJ_ERR_ARG,
            "step model: the layout has %d layers but the description %s has %d", layout ? layout->n : -1,
            d ? d->name : "(NULL)", d ? d->n : -1);
  ADJ_CHECK(replicas >= 1 && m->o.ranks % replicas == 0, ADJ_ERR_ARG,
            "step model: %d replicas do not divide the %d ranks", replicas, m->o.ranks);
  ADJ_CHECK(m->o.batch >= replicas, ADJ_ERR_ARG, "step model: a batch of %lld cannot be shared by %d replicas",
            (long long)m->o.batch, replicas);
  ADJ_CHECK(layout->ranks <= m->o.ranks / replicas, ADJ_ERR_ARG,
            "step model: network %s's placement needs %d ranks per replica but %d ranks hold %d replicas", d->name,
            layout->ranks, m->o.ranks, replicas);
  return ADJ_SUCCESS;
}

int adj_step_model_predict(adj_step_model *m, const adj_description *d, const adj_network_layout *layout,
                           adj_step_prediction *p) {
  ADJ_CHECK(m && p, ADJ_ERR_ARG, "step model: model or prediction is NULL");
  *p = (adj_step_prediction){0};
  int replicas = m->o.replicas ? m->o.replicas : layout ? layout->replicas : 1;
  ADJ_CALL(step_check(m, d, layout, replicas));
  step_walk w = {.m = m, .d = d, .layout = layout, .p = p, .esize = (double)adj_dtype_size(m->o.dtype),
                 .batch = (m->o.batch + replicas - 1) / replicas,
                 .threads = adj_machine_threads(&m->machine, m->o.ranks)};
  p->replicas = replicas, p->replica_batch = w.batch;
  int status = step_walk_layers(&w);
  if (!status) status = step_totals(m, &w);
  if (status) adj_step_prediction_free(p);
  return status;
}

void adj_step_prediction_free(adj_step_prediction *p) {
  if (!p) return;
  free(p->stages);
  *p = (adj_step_prediction){0};
}

/* ---- the table ---------------------------------------------------------------------------------- */

static double step_mib(int64_t bytes) { return (double)bytes / (1 << 20); }

void adj_step_prediction_print(const adj_step_prediction *p, FILE *out) {
  if (!p || !out) return;
  fprintf(out, "%-16s %-11s %7s %10s %10s %10s %10s %10s %9s\n", "stage", "kind", "workers", "fwd comp s",
          "fwd comm s", "bwd comp s", "bwd comm s", "bytes", "mem MiB");
  for (int i = 0; i < p->n; i++) {
    const adj_step_stage *s = &p->stages[i];
    int64_t memory = 0;
    for (int k = 0; k < ADJ_STEP_MEMORY_KINDS; k++) memory += s->memory[k];
    fprintf(out, "%-16s %-11s %7d %10.3e %10.3e %10.3e %10.3e %10.0f %9.3f%s\n", s->name, s->kind, s->workers,
            s->compute[0], s->comm[0], s->compute[1], s->comm[1], s->bytes[0] + s->bytes[1], step_mib(memory),
            s->measured ? "" : "  (estimated)");
  }
  fprintf(out, "step %.4e s: forward %.4e, backward %.4e, optimizer %.4e, agreements %.4e", p->step,
          p->phase[ADJ_STEP_FORWARD], p->phase[ADJ_STEP_BACKWARD], p->phase[ADJ_STEP_OPTIMIZER], p->agreements);
  if (p->replicas > 1)
    fprintf(out, "; %d replicas, %d buckets reduce in %.4e s, %.4e s hidden by the backward", p->replicas, p->buckets,
            p->reducer, p->reducer_hidden);
  fprintf(out, "\nmemory of rank 0 %.2f MiB: baseline %.2f", step_mib(p->memory_total), step_mib(p->baseline));
  for (int k = 0; k < ADJ_STEP_MEMORY_KINDS; k++) fprintf(out, ", %s %.3f", adj_step_memory_names[k], step_mib(p->memory[k]));
  fprintf(out, "\n");
}

/* The communication cost model and grid planner (plan.h).  Equations are
 * those of papers 000 (eq. 4) and 001 (eqs. 8, 9) as transcribed in
 * docs/parallelism.md section 1.2, with its decisions A2 (d_i before pooling
 * for the all-gather, the layer input for dX), A4 (parameterised layers only;
 * no dX for the first), A7 (eq. 9's halo with X^{i+1} := the conv output),
 * A8 (no halo when P_r = 1) and A10 (no redistribution in paper modes). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "adjoin/decomposition.h"
#include "adjoin/description.h"
#include "adjoin/file.h"
#include "adjoin/parse.h"
#include "adjoin/plan.h"
#include "adjoin/wait.h"
#include "error_impl.h"

const char *adj_plan_collective_name(int k) {
  static const char *const names[ADJ_PLAN_COLLECTIVES] = {"fwd-gather", "bwd-dx", "weights", "halo"};
  return k >= 0 && k < ADJ_PLAN_COLLECTIVES ? names[k] : "invalid";
}

/* ---- networks from descriptions --------------------------------------------------------- */

/* The planner's view of a description layer: conv, pool and fc layers with
 * their shapes (the height is the split dimension; a 1-d layer's length is
 * its height); false for the layers the models price nothing for. */
static bool adj_plan_from_layer(const adj_desc_layer *l, adj_plan_layer *out) {
  if (l->kind != ADJ_DESC_CONV && l->kind != ADJ_DESC_POOL && l->kind != ADJ_DESC_AFFINE) return false;
  *out = (adj_plan_layer){.stride = 1, .groups = 1};
  snprintf(out->name, sizeof out->name, "%.*s", (int)sizeof out->name - 1, l->name);
  if (l->kind == ADJ_DESC_AFFINE) {
    out->kind = ADJ_PLAN_FC;
    out->in_c = l->in_shape[0], out->in_h = out->in_w = 1;
    out->out_c = l->out_shape[0], out->out_h = out->out_w = 1;
    out->weights = out->in_c * out->out_c, out->biases = l->u.affine.bias ? out->out_c : 0;
    return true;
  }
  const adj_window_geometry *w = l->kind == ADJ_DESC_CONV ? &l->u.conv.window : &l->u.pool.window;
  out->kind = l->kind == ADJ_DESC_CONV ? ADJ_PLAN_CONV : ADJ_PLAN_POOL;
  out->kernel = (w->dilation[0] > 1 ? w->dilation[0] : 1) * (w->kernel[0] - 1) + 1;
  out->stride = w->stride[0] > 0 ? w->stride[0] : 1;
  out->pad = w->padding_left[0];
  out->padding_mode = l->kind == ADJ_DESC_CONV ? l->u.conv.padding_mode : l->u.pool.padding_mode;
  out->in_c = l->in_shape[0], out->in_h = l->in_shape[1], out->in_w = l->in_rank > 2 ? l->in_shape[2] : 1;
  out->out_c = l->out_shape[0], out->out_h = l->out_shape[1], out->out_w = l->out_rank > 2 ? l->out_shape[2] : 1;
  for (int i = 0; i < l->n_parameters; i++) {
    if (!strcmp(l->parameters[i].name, "weight")) out->weights = l->parameters[i].count;
    else out->biases = l->parameters[i].count;
  }
  if (l->kind == ADJ_DESC_CONV) out->groups = l->u.conv.groups;
  return true;
}

int adj_plan_network_from_description(const adj_description *d, adj_plan_network **network) {
  ADJ_CHECK(network && d, ADJ_ERR_ARG, "plan: description or output pointer is NULL");
  *network = NULL;
  for (int i = 0; i < d->n; i++)
    ADJ_CHECK(d->layers[i].kind == ADJ_DESC_AFFINE || d->layers[i].in_rank <= 3 ||
                  (d->layers[i].kind != ADJ_DESC_CONV && d->layers[i].kind != ADJ_DESC_POOL),
              ADJ_ERR_ARG, "%s:%d: plan: %s %s is 3-d; the cost model prices 1-d and 2-d windows", d->source,
              d->layers[i].line, adj_desc_layer_keyword(&d->layers[i]), d->layers[i].name);
  adj_plan_network *net = calloc(1, sizeof *net);
  adj_plan_layer *layers = calloc((size_t)d->n + 1, sizeof *layers);
  if (!net || !layers) {
    free(net), free(layers);
    return adj_error_set(ADJ_ERR_MEM, "plan: out of memory for %d layers", d->n);
  }
  snprintf(net->name, sizeof net->name, "%s", d->name);
  net->layers = layers;
  for (int i = 0; i < d->n; i++)
    if (adj_plan_from_layer(&d->layers[i], &layers[net->n])) net->n++;
  if (net->n == 0) {
    adj_plan_network_destroy(&net);
    return adj_error_set(ADJ_ERR_ARG, "%s: plan: no conv, pool or fc layer to price", d->source);
  }
  *network = net;
  return ADJ_SUCCESS;
}

int adj_plan_network_parse(const char *text, const char *source, adj_plan_network **network) {
  ADJ_CHECK(network && text, ADJ_ERR_ARG, "plan: network text or output pointer is NULL");
  *network = NULL;
  adj_description *d = NULL;
  ADJ_CALL(adj_description_parse(text, source, &d));
  int status = adj_plan_network_from_description(d, network);
  adj_description_destroy(&d);
  return status;
}

int adj_plan_network_read(const char *path, adj_plan_network **network) {
  ADJ_CHECK(network && path, ADJ_ERR_ARG, "plan: path or output pointer is NULL");
  *network = NULL;
  adj_description *d = NULL;
  ADJ_CALL(adj_description_read(path, &d));
  int status = adj_plan_network_from_description(d, network);
  adj_description_destroy(&d);
  return status;
}

void adj_plan_network_destroy(adj_plan_network **network) {
  if (!network || !*network) return;
  free((*network)->layers);
  free(*network);
  *network = NULL;
}

int64_t adj_plan_network_parameters(const adj_plan_network *net) {
  int64_t total = 0;
  for (int i = 0; i < net->n; i++) total += net->layers[i].weights + net->layers[i].biases;
  return total;
}

/* ---- modes ------------------------------------------------------------------------------- */

static const char *const adj_plan_mode_names[] = {"paper-eq4", "paper", "adjoin"};

const char *adj_plan_mode_name(adj_plan_mode mode) {
  return mode >= ADJ_PLAN_PAPER_EQ4 && mode <= ADJ_PLAN_ADJOIN ? adj_plan_mode_names[mode] : "?";
}

int adj_plan_mode_parse(const char *text, adj_plan_mode *mode) {
  for (int m = 0; m <= ADJ_PLAN_ADJOIN; m++)
    if (text && !strcmp(text, adj_plan_mode_names[m])) return *mode = (adj_plan_mode)m, ADJ_SUCCESS;
  return adj_error_set(ADJ_ERR_ARG, "plan: unknown mode '%s' (paper-eq4, paper, adjoin)", text ? text : "(NULL)");
}

/* ---- costs ------------------------------------------------------------------------------- */

/* ceil(log2 q): the latency count of a collective over q workers (0 for q = 1). */
static double adj_plan_log2(int64_t q) {
  int k = 0;
  while (((int64_t)1 << k) < q) k++;
  return k;
}

typedef struct adj_plan_ctx {
  const adj_plan_config *c;
  double word;   /* bytes per element */
  double alpha, beta;                       /* point to point: the halo exchanges */
  double collective_alpha, collective_beta; /* every other class */
} adj_plan_ctx;

/* Adds `times` collectives of `latency` messages each and `words` per worker. */
static void adj_plan_charge(const adj_plan_ctx *x, adj_plan_layer_cost *cost, int kind, double times, double latency,
                            double words) {
  bool p2p = kind == ADJ_PLAN_HALO;
  double alpha = p2p ? x->alpha : x->collective_alpha, beta = p2p ? x->beta : x->collective_beta;
  cost->messages[kind] += times * latency;
  cost->words[kind] += times * words;
  cost->time[kind] += times * (alpha * latency + beta * x->word * words);
}

/* 001 eq. (8) terms of one layer on p_r x p_c (eq. 4 uses 3 for gather + dX). */
static void adj_plan_paper_model(const adj_plan_ctx *x, const adj_plan_layer *l, bool first, int p_r, int p_c,
                                 adj_plan_layer_cost *cost) {
  double b = (double)x->c->batch, d_out = (double)(l->out_c * l->out_h * l->out_w);
  double d_in = (double)(l->in_c * l->in_h * l->in_w), w = (double)(l->weights + l->biases);
  double fr = (p_r - 1.0) / p_r, fc = (p_c - 1.0) / p_c;
  if (x->c->mode == ADJ_PLAN_PAPER_EQ4) {
    /* 000 eq. (4): 3 (alpha log Pr + B (Pr-1)/Pr beta d_i / Pc): one all-gather
     * and one all-reduce (2) of d_i; every layer, the first included. */
    adj_plan_charge(x, cost, ADJ_PLAN_FWD_GATHER, 1, adj_plan_log2(p_r), b * fr * d_out / p_c);
    adj_plan_charge(x, cost, ADJ_PLAN_BWD_DX, 2, adj_plan_log2(p_r), b * fr * d_out / p_c);
  } else {
    adj_plan_charge(x, cost, ADJ_PLAN_FWD_GATHER, 1, adj_plan_log2(p_r), b / p_c * fr * d_out);
    if (!first) adj_plan_charge(x, cost, ADJ_PLAN_BWD_DX, 2, adj_plan_log2(p_r), b / p_c * fr * d_in);
  }
  adj_plan_charge(x, cost, ADJ_PLAN_WEIGHTS, 2, adj_plan_log2(p_c), fc * w / p_r);
}

/* 001 eq. (9) L_D terms of a conv layer: halo on the input and on the output
 * gradient (one side, floor(k/2) rows each), weights all-reduced over all P. */
static void adj_plan_paper_domain(const adj_plan_ctx *x, const adj_plan_layer *l, int p_r, int p_c,
                                  adj_plan_layer_cost *cost) {
  double b = (double)x->c->batch, half = (double)(l->kernel / 2), p = (double)p_r * p_c;
  if (p_r > 1) {
    adj_plan_charge(x, cost, ADJ_PLAN_HALO, 1, 1, b / p_c * (double)(l->in_w * l->in_c) * half);
    adj_plan_charge(x, cost, ADJ_PLAN_HALO, 1, 1, b / p_c * (double)(l->out_w * l->out_c) * half);
  }
  adj_plan_charge(x, cost, ADJ_PLAN_WEIGHTS, 2, adj_plan_log2(p_r * p_c), (p - 1) / p * (double)(l->weights + l->biases));
}

/* Largest and smallest block of n split over parts (balanced). */
static int64_t adj_plan_max_block(int64_t n, int parts) { return (n + parts - 1) / parts; }
static int64_t adj_plan_min_block(int64_t n, int parts) { return n / parts; }

/* A parameter block of n words broadcast to q > 1 workers and its gradient
 * summed back, as the operators count it on the busiest worker: the forward
 * moves n; the adjoint n by the reduce that the automatic choice takes below
 * 64 KB, or 2 n (sent and received) by the all-reduce it takes from there
 * (docs/primitive-algorithms.md; a measured algorithm table is not modelled). */
static void adj_plan_charge_parameters(const adj_plan_ctx *x, adj_plan_layer_cost *cost, int64_t q, double n) {
  if (n <= 0 || q <= 1) return;
  double adjoint = n * x->word >= 65536 ? 2 : 1;
  adj_plan_charge(x, cost, ADJ_PLAN_WEIGHTS, 1, adj_plan_log2(q), n);
  adj_plan_charge(x, cost, ADJ_PLAN_WEIGHTS, 1, adj_plan_log2(q), adjoint * n);
}

/* The smallest of an fc layer's p_r blocks of input features as the builder
 * lays them out: after a conv or pool of C >= p_r channels the flatten
 * splits the channels (placement_resolve.c), so the blocks are whole
 * channels of C / p_r (balanced) times their spatial volume; else the
 * features are balanced. */
static int64_t adj_plan_fc_min_block(const adj_plan_layer *previous, int64_t f_in, int p_r) {
  if (!previous || previous->kind == ADJ_PLAN_FC || previous->out_c < p_r ||
      previous->out_c * previous->out_h * previous->out_w != f_in)
    return adj_plan_min_block(f_in, p_r);
  return adj_plan_min_block(previous->out_c, p_r) * previous->out_h * previous->out_w;
}

/* adjoin mode, fc layer: the 1.5D layer's counted volumes on the worst
 * worker; `previous` is the layer before it (NULL for the first). */
static void adj_plan_adjoin_fc(const adj_plan_ctx *x, const adj_plan_layer *l, const adj_plan_layer *previous,
                               bool first, int p_r, int p_c, adj_plan_layer_cost *cost) {
  int64_t f_in = l->in_c, f_out = l->out_c;
  double n_c = (double)adj_plan_max_block(x->c->batch, p_c);
  double gathered = (double)(f_in - adj_plan_fc_min_block(previous, f_in, p_r)) * n_c;
  adj_plan_charge(x, cost, ADJ_PLAN_FWD_GATHER, 1, adj_plan_log2(p_r), p_r > 1 ? gathered : 0);
  if (!first) adj_plan_charge(x, cost, ADJ_PLAN_BWD_DX, 1, adj_plan_log2(p_r), p_r > 1 ? gathered : 0);
  if (p_c > 1) {
    double rows = (double)adj_plan_max_block(f_out, p_r);
    /* Weight and bias broadcasts forward, their sum-reduces backward. */
    adj_plan_charge_parameters(x, cost, p_c, rows * (double)f_in);
    if (l->biases) adj_plan_charge_parameters(x, cost, p_c, rows);
  }
}

/* Rows of input block `part` that worker needs from its neighbours for an H
 * split over p_r: the output rows are balanced, the input rows too. */
static int64_t adj_plan_halo_rows(const adj_plan_layer *l, int p_r, int part) {
  int64_t o0, on, i0, in;
  adj_balanced_block(l->out_h, p_r, part, &o0, &on);
  adj_balanced_block(l->in_h, p_r, part, &i0, &in);
  if (on == 0) return 0;
  int64_t need0 = o0 * l->stride - l->pad, need1 = (o0 + on - 1) * l->stride - l->pad + l->kernel;
  if (need0 < 0) need0 = 0;
  if (need1 > l->in_h) need1 = l->in_h;
  int64_t left = i0 > need0 ? i0 - need0 : 0, right = need1 > i0 + in ? need1 - (i0 + in) : 0;
  return left + right;
}

/* Rows of H a boundary worker's padding copies from other workers (pad
 * layer, pad_layer.h), the larger of the two sides: the two boundary workers
 * receive at once. */
static int64_t adj_plan_padding_rows(const adj_plan_layer *l, int p_r) {
  if (l->padding_mode == ADJ_PAD_ZEROS || l->pad == 0 || p_r == 1) return 0;
  int64_t n = l->in_h, rows = 0;
  for (int side = 0; side < 2; side++) {
    int64_t start, extent, a, b; /* the boundary block and the rows [a, b) copied */
    adj_balanced_block(n, p_r, side ? p_r - 1 : 0, &start, &extent);
    switch (l->padding_mode) {
      case ADJ_PAD_REFLECT: a = side ? n - 1 - l->pad : 1, b = a + l->pad; break;
      case ADJ_PAD_REPLICATE: a = side ? n - 1 : 0, b = a + 1; break;
      default: a = side ? 0 : n - l->pad, b = a + l->pad; break;
    }
    int64_t lo = a > start ? a : start, hi = b < start + extent ? b : start + extent;
    int64_t outside = (b - a) - (hi > lo ? hi - lo : 0);
    if (outside > rows) rows = outside;
  }
  return rows;
}

/* adjoin mode, conv or pool layer split over H by p_r and the batch by p_c:
 * halo rows from the exact window geometry (both sides), forward and adjoint,
 * plus a padding mode's rows (W is not split, so its padding is local);
 * conv weights broadcast to and summed from all P. */
static void adj_plan_adjoin_window(const adj_plan_ctx *x, const adj_plan_layer *l, int p_r, int p_c,
                                   adj_plan_layer_cost *cost) {
  double n_c = (double)adj_plan_max_block(x->c->batch, p_c);
  int64_t rows = 0;
  for (int part = 0; part < p_r; part++) {
    int64_t h = adj_plan_halo_rows(l, p_r, part);
    if (h > rows) rows = h;
  }
  /* An exchange with no rows to move posts no message (e.g. a 2x2 pool of
   * stride 2 on even blocks). */
  if (p_r > 1 && rows > 0) adj_plan_charge(x, cost, ADJ_PLAN_HALO, 2, 2, n_c * (double)(rows * l->in_w * l->in_c));
  /* A padding mode's rows from other workers, forward and adjoint. */
  int64_t padding = adj_plan_padding_rows(l, p_r);
  if (padding) adj_plan_charge(x, cost, ADJ_PLAN_HALO, 2, 1, n_c * (double)(padding * l->in_w * l->in_c));
  int64_t p = (int64_t)p_r * p_c;
  if (l->kind == ADJ_PLAN_CONV) {
    adj_plan_charge_parameters(x, cost, p, (double)l->weights);
    adj_plan_charge_parameters(x, cost, p, (double)l->biases);
  }
}

static int adj_plan_check(const adj_plan_network *net, const adj_plan_config *c, int p_r, int p_c) {
  ADJ_CHECK(net && c, ADJ_ERR_ARG, "plan: network or config is NULL");
  ADJ_CHECK(c->p >= 1, ADJ_ERR_ARG, "plan: P = %d must be >= 1", c->p);
  ADJ_CHECK(c->mode >= ADJ_PLAN_PAPER_EQ4 && c->mode <= ADJ_PLAN_ADJOIN, ADJ_ERR_ARG, "plan: unknown mode %d",
            (int)c->mode);
  ADJ_CHECK(c->alpha > 0 && isfinite(c->alpha), ADJ_ERR_ARG, "plan: alpha %g must be > 0 (seconds per message)",
            c->alpha);
  ADJ_CHECK(c->beta > 0 && isfinite(c->beta), ADJ_ERR_ARG, "plan: beta %g must be > 0 (seconds per byte)", c->beta);
  bool none = c->collective_alpha == 0 && c->collective_beta == 0;
  ADJ_CHECK(none || (c->collective_alpha > 0 && c->collective_beta > 0 && isfinite(c->collective_alpha) &&
                     isfinite(c->collective_beta)),
            ADJ_ERR_ARG, "plan: collective alpha %g and beta %g must both be > 0 (or both 0: alpha and beta)",
            c->collective_alpha, c->collective_beta);
  ADJ_CHECK(c->word_bytes >= 0, ADJ_ERR_ARG, "plan: word size %d bytes must be > 0", c->word_bytes);
  ADJ_CHECK(p_r >= 1 && p_c >= 1 && (int64_t)p_r * p_c == c->p, ADJ_ERR_ARG,
            "plan: grid %dx%d has %lld workers but P = %d", p_r, p_c, (long long)p_r * p_c, c->p);
  ADJ_CHECK(c->batch >= p_c, ADJ_ERR_SIZE, "plan: grid %dx%d splits the batch of %lld over P_c = %d (more workers than samples)",
            p_r, p_c, (long long)c->batch, p_c);
  for (int i = 0; i < net->n; i++) {
    const adj_plan_layer *l = &net->layers[i];
    if (l->kind == ADJ_PLAN_FC)
      ADJ_CHECK(l->out_c >= p_r, ADJ_ERR_SIZE,
                "plan: layer %s has %lld output rows but the grid %dx%d puts P_r = %d workers on them (more workers "
                "than rows)",
                l->name, (long long)l->out_c, p_r, p_c, p_r);
    else if (c->mode == ADJ_PLAN_ADJOIN && c->conv != ADJ_PLAN_CONV_BATCH)
      ADJ_CHECK(l->out_h >= p_r, ADJ_ERR_SIZE,
                "plan: layer %s has %lld output rows but the grid %dx%d splits them over P_r = %d (more workers than "
                "rows)",
                l->name, (long long)l->out_h, p_r, p_c, p_r);
  }
  return ADJ_SUCCESS;
}

static double adj_plan_layer_total(adj_plan_layer_cost *cost) {
  cost->total = 0;
  for (int k = 0; k < ADJ_PLAN_COLLECTIVES; k++) cost->total += cost->time[k];
  return cost->total;
}

/* One conv layer in a paper mode on p_r x p_c: eq. 8 (model), or with
 * ADJ_PLAN_CONV_DOMAIN eq. 9's cheaper of model and domain (paper mode only;
 * eq. 4 knows no domain). */
static void adj_plan_paper_conv(const adj_plan_ctx *x, const adj_plan_layer *l, bool first, int p_r, int p_c,
                                adj_plan_layer_cost *cost) {
  adj_plan_layer_cost model = {.p_r = p_r, .p_c = p_c}, domain = {.p_r = p_r, .p_c = p_c, .domain = true};
  adj_plan_paper_model(x, l, first, p_r, p_c, &model);
  if (x->c->mode == ADJ_PLAN_PAPER_EQ4 || x->c->conv != ADJ_PLAN_CONV_DOMAIN || p_r == 1) {
    *cost = model;
    return;
  }
  adj_plan_paper_domain(x, l, p_r, p_c, &domain);
  *cost = adj_plan_layer_total(&domain) < adj_plan_layer_total(&model) ? domain : model;
}

int adj_plan_evaluate(const adj_plan_network *net, const adj_plan_config *c, int p_r, int p_c,
                      adj_plan_result *result) {
  ADJ_CHECK(result, ADJ_ERR_ARG, "plan: result pointer is NULL");
  *result = (adj_plan_result){0};
  ADJ_CALL(adj_plan_check(net, c, p_r, p_c));
  bool collective = c->collective_alpha > 0;
  adj_plan_ctx x = {.c = c, .word = c->word_bytes ? c->word_bytes : 4, .alpha = c->alpha, .beta = c->beta,
                    .collective_alpha = collective ? c->collective_alpha : c->alpha,
                    .collective_beta = collective ? c->collective_beta : c->beta};
  adj_plan_layer_cost *costs = calloc((size_t)net->n, sizeof *costs);
  ADJ_CHECK(costs, ADJ_ERR_MEM, "plan: out of memory for %d layers", net->n);
  *result = (adj_plan_result){.p_r = p_r, .p_c = p_c, .n = net->n, .layers = costs};
  bool first = true;
  for (int i = 0; i < net->n; i++) {
    const adj_plan_layer *l = &net->layers[i];
    bool batch_only = l->kind != ADJ_PLAN_FC && c->conv == ADJ_PLAN_CONV_BATCH;
    int lr = batch_only ? 1 : p_r, lc = batch_only ? c->p : p_c;
    adj_plan_layer_cost *cost = &costs[i];
    *cost = (adj_plan_layer_cost){.p_r = lr, .p_c = lc};
    if (c->mode == ADJ_PLAN_ADJOIN) {
      if (l->kind == ADJ_PLAN_FC) adj_plan_adjoin_fc(&x, l, i ? l - 1 : NULL, first, lr, lc, cost);
      else adj_plan_adjoin_window(&x, l, lr, lc, cost), cost->domain = lr > 1;
    } else if (l->kind == ADJ_PLAN_FC) {
      adj_plan_paper_model(&x, l, first, lr, lc, cost);
    } else if (l->kind == ADJ_PLAN_CONV) {
      adj_plan_paper_conv(&x, l, first, lr, lc, cost);
    }
    /* Pooling has no parameters: the paper models none of its communication. */
    if (l->kind != ADJ_PLAN_POOL) first = false;
    result->total += adj_plan_layer_total(cost);
    for (int k = 0; k < ADJ_PLAN_COLLECTIVES; k++) result->time[k] += cost->time[k];
  }
  return ADJ_SUCCESS;
}

void adj_plan_result_free(adj_plan_result *result) {
  if (!result) return;
  free(result->layers);
  *result = (adj_plan_result){0};
}

int adj_plan_best(const adj_plan_network *net, const adj_plan_config *c, adj_plan_result *best) {
  ADJ_CHECK(best && c, ADJ_ERR_ARG, "plan: result or config pointer is NULL");
  *best = (adj_plan_result){0};
  int status = ADJ_ERR_ARG;
  for (int p_r = 1; p_r <= c->p; p_r++) {
    if (c->p % p_r) continue;
    adj_plan_result r;
    int s = adj_plan_evaluate(net, c, p_r, c->p / p_r, &r);
    if (s == ADJ_ERR_SIZE) continue; /* this grid cannot split some layer */
    ADJ_CALL(s);
    if (status || r.total < best->total) adj_plan_result_free(best), *best = r, status = ADJ_SUCCESS;
    else adj_plan_result_free(&r);
  }
  if (status) return adj_error_set(ADJ_ERR_SIZE, "plan: no grid of P = %d workers can split every layer", c->p);
  return ADJ_SUCCESS;
}

/* ---- exact counters of the 1.5D layer ------------------------------------------------------- */

int adj_plan_affine15_counts(int64_t n, const int64_t *batch_cuts, int64_t f_in, int64_t f_out, bool bias, int p_r,
                             int p_c, int r, int c, int word_bytes, bool input_gradient,
                             adj_affine15_counters *out) {
  ADJ_CHECK(out && p_r >= 1 && p_c >= 1 && r >= 0 && r < p_r && c >= 0 && c < p_c && word_bytes > 0, ADJ_ERR_ARG,
            "plan: worker (%d, %d) is outside the %dx%d grid (or bad word size %d)", r, c, p_r, p_c, word_bytes);
  *out = (adj_affine15_counters){0};
  int64_t c0, nc, r0, fi, o0, fo;
  if (batch_cuts) c0 = batch_cuts[c], nc = batch_cuts[c + 1] - batch_cuts[c];
  else adj_balanced_block(n, p_c, c, &c0, &nc);
  adj_balanced_block(f_in, p_r, r, &r0, &fi);
  adj_balanced_block(f_out, p_r, r, &o0, &fo);
  uint64_t w = (uint64_t)word_bytes, mine = (uint64_t)(nc * fi) * w, rest = (uint64_t)(nc * (f_in - fi)) * w;
  /* All-gather forward: one contribution sent, the others' received (counted
   * as one message each way even in a group of one). */
  out->gather = (adj_op_counters){.forward_applications = 1, .bytes_sent = mine, .bytes_received = rest,
                                  .messages_sent = 1, .messages_received = 1};
  if (input_gradient) {
    /* Reduce-scatter: the others' chunks sent, my chunk from each of them. */
    out->gather.adjoint_applications = 1;
    out->gather.bytes_sent += rest, out->gather.messages_sent++;
    out->gather.bytes_received += mine * (uint64_t)(p_r - 1), out->gather.messages_received++;
  }
  /* Broadcast over P_c from the c = 0 owner, sum-reduce back: nothing counted
   * when the owner is its block's only user. */
  adj_op_counters *params[2] = {&out->weight, bias ? &out->bias : NULL};
  uint64_t blocks[2] = {(uint64_t)(fo * f_in) * w, (uint64_t)fo * w};
  for (int k = 0; k < 2; k++) {
    if (!params[k]) continue;
    *params[k] = (adj_op_counters){.forward_applications = 1, .adjoint_applications = 1};
    if (p_c == 1 || blocks[k] == 0) continue;
    params[k]->bytes_sent = params[k]->bytes_received = blocks[k];
    params[k]->messages_sent = params[k]->messages_received = 1;
  }
  return ADJ_SUCCESS;
}

/* ---- calibration ------------------------------------------------------------------------ */

enum { ADJ_PLAN_SIZES = 20 }; /* 8 B << 0 .. 19: 8 B to 4 MiB */

/* Best one-way time of `repeats` round trips of m bytes between ranks 0 and 1. */
static int adj_plan_pingpong(MPI_Comm comm, int rank, adj_wait_policy policy, char *buffer, int m, int repeats,
                             double *best) {
  *best = INFINITY;
  for (int k = 0; k < repeats; k++) {
    MPI_Request r;
    double t0 = MPI_Wtime();
    if (rank == 0) {
      ADJ_CALL_MPI(MPI_Isend(buffer, m, MPI_BYTE, 1, 7, comm, &r));
      ADJ_CALL(adj_wait_all(1, &r, policy));
      ADJ_CALL_MPI(MPI_Irecv(buffer, m, MPI_BYTE, 1, 7, comm, &r));
      ADJ_CALL(adj_wait_all(1, &r, policy));
    } else if (rank == 1) {
      ADJ_CALL_MPI(MPI_Irecv(buffer, m, MPI_BYTE, 0, 7, comm, &r));
      ADJ_CALL(adj_wait_all(1, &r, policy));
      ADJ_CALL_MPI(MPI_Isend(buffer, m, MPI_BYTE, 0, 7, comm, &r));
      ADJ_CALL(adj_wait_all(1, &r, policy));
    }
    double t = (MPI_Wtime() - t0) / 2;
    if (t < *best) *best = t;
  }
  return ADJ_SUCCESS;
}

/* Least-squares line t = c0 + c1 m through the sweep's sizes 8 << i, over
 * the times' lower envelope from the right: a message cannot be faster than a
 * smaller one, so a time above a larger message's is noise (a rank
 * descheduled on a loaded host), and keeping it could tilt the line down. */
static void adj_plan_fit_line(double *t, double *c0, double *c1) {
  for (int i = ADJ_PLAN_SIZES - 2; i >= 0; i--) t[i] = fmin(t[i], t[i + 1]);
  double sx = 0, sy = 0, sxx = 0, sxy = 0, n = ADJ_PLAN_SIZES;
  for (int i = 0; i < ADJ_PLAN_SIZES; i++) {
    double m = (double)(8 << i);
    sx += m, sy += t[i], sxx += m * m, sxy += m * t[i];
  }
  *c1 = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  *c0 = (sy - *c1 * sx) / n;
}

/* Shared start of both sweeps: >= 2 ranks, repeats, the wait policy. */
static int adj_plan_calibrate_setup(MPI_Comm comm, const char *what, int repeats, const double *alpha,
                                    const double *beta, adj_wait_policy *policy) {
  int size;
  MPI_Comm_size(comm, &size);
  ADJ_CHECK(size >= 2, ADJ_ERR_ARG, "plan calibrate %s: needs at least 2 ranks, the communicator has %d", what, size);
  ADJ_CHECK(repeats >= 1, ADJ_ERR_ARG, "plan calibrate %s: repeats %d must be >= 1", what, repeats);
  ADJ_CHECK(alpha && beta, ADJ_ERR_ARG, "plan calibrate %s: alpha or beta pointer is NULL", what);
  return adj_wait_policy_resolve(comm, ADJ_WAIT_AUTO, policy);
}

int adj_plan_calibrate(MPI_Comm comm, int repeats, double *alpha, double *beta) {
  adj_wait_policy policy;
  ADJ_CALL(adj_plan_calibrate_setup(comm, "ping-pong", repeats, alpha, beta, &policy));
  int rank;
  MPI_Comm_rank(comm, &rank);
  int largest = 8 << (ADJ_PLAN_SIZES - 1);
  char *buffer = calloc((size_t)largest, 1);
  ADJ_CALL(adj_status_agree(comm, buffer ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "plan calibrate: out of memory"),
                            policy));
  double t[ADJ_PLAN_SIZES];
  int status = ADJ_SUCCESS;
  for (int i = 0; i < ADJ_PLAN_SIZES && !status; i++)
    status = adj_plan_pingpong(comm, rank, policy, buffer, 8 << i, repeats, &t[i]);
  free(buffer);
  ADJ_CALL(status);
  /* Rank 0's figures for everyone. */
  MPI_Request r;
  ADJ_CALL_MPI(MPI_Ibcast(t, ADJ_PLAN_SIZES, MPI_DOUBLE, 0, comm, &r));
  ADJ_CALL(adj_wait_all(1, &r, policy));
  adj_plan_fit_line(t, alpha, beta);
  /* A fit dominated by the large messages can put the intercept below zero;
   * the smallest message's time is then the latency. */
  if (!(*alpha > 0)) *alpha = t[0];
  ADJ_CHECK(*beta > 0, ADJ_ERR_NUMERIC, "plan calibrate: fitted beta %g s/B is not positive", *beta);
  return ADJ_SUCCESS;
}

/* This rank's best time of `repeats` all-reduces of `count` doubles. */
static int adj_plan_allreduce_time(MPI_Comm comm, adj_wait_policy policy, const double *send, double *recv, int count,
                                   int repeats, double *best) {
  *best = INFINITY;
  for (int k = 0; k < repeats; k++) {
    MPI_Request r;
    double t0 = MPI_Wtime();
    ADJ_CALL_MPI(MPI_Iallreduce(send, recv, count, MPI_DOUBLE, MPI_SUM, comm, &r));
    ADJ_CALL(adj_wait_all(1, &r, policy));
    *best = fmin(*best, MPI_Wtime() - t0);
  }
  return ADJ_SUCCESS;
}

int adj_plan_calibrate_allreduce(MPI_Comm comm, int repeats, double *alpha, double *beta) {
  adj_wait_policy policy;
  ADJ_CALL(adj_plan_calibrate_setup(comm, "all-reduce", repeats, alpha, beta, &policy));
  int q;
  MPI_Comm_size(comm, &q);
  int largest = 1 << (ADJ_PLAN_SIZES - 1); /* doubles: 8 B << 19 = 4 MiB */
  double *send = calloc((size_t)largest, sizeof *send), *recv = calloc((size_t)largest, sizeof *recv);
  int status = send && recv ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "plan calibrate all-reduce: out of memory");
  status = adj_status_agree(comm, status, policy);
  double mine[ADJ_PLAN_SIZES], t[ADJ_PLAN_SIZES];
  for (int i = 0; i < ADJ_PLAN_SIZES && !status; i++)
    status = adj_plan_allreduce_time(comm, policy, send, recv, 1 << i, repeats, &mine[i]);
  free(send), free(recv);
  ADJ_CALL(status);
  /* A collective ends when its slowest rank does. */
  MPI_Request r;
  ADJ_CALL_MPI(MPI_Iallreduce(mine, t, ADJ_PLAN_SIZES, MPI_DOUBLE, MPI_MAX, comm, &r));
  ADJ_CALL(adj_wait_all(1, &r, policy));
  double c0, c1, latency = 2 * adj_plan_log2(q), volume = 2.0 * (q - 1) / q;
  adj_plan_fit_line(t, &c0, &c1);
  *alpha = (c0 > 0 ? c0 : t[0]) / latency;
  *beta = c1 / volume;
  ADJ_CHECK(*beta > 0, ADJ_ERR_NUMERIC, "plan calibrate all-reduce: fitted beta %g s/B is not positive", *beta);
  return ADJ_SUCCESS;
}

int adj_plan_calibration_save(const char *path, const adj_plan_calibration *cal) {
  ADJ_CHECK(cal, ADJ_ERR_ARG, "plan: no calibration to write to '%s'", path ? path : "(NULL)");
  FILE *f;
  ADJ_CALL(adj_file_open_output(path, "plan: calibration file", &f));
  fprintf(f, "alpha %.9e\nbeta %.9e\n", cal->alpha, cal->beta);
  if (cal->collective_ranks)
    fprintf(f, "allreduce_alpha %.9e\nallreduce_beta %.9e\nallreduce_ranks %d\n", cal->collective_alpha,
            cal->collective_beta, cal->collective_ranks);
  ADJ_CALL(adj_file_close_output(f, path, "plan: calibration file"));
  return ADJ_SUCCESS;
}

int adj_plan_calibration_write(const char *path, double alpha, double beta) {
  return adj_plan_calibration_save(path, &(adj_plan_calibration){.alpha = alpha, .beta = beta});
}

/* One "key value" line of a calibration file into the field the key names;
 * a key given twice is refused, as a second value would silently win. */
static int adj_plan_calibration_line(const char *source, int line, const char *key, const char *text,
                                     adj_plan_calibration *cal, unsigned *seen) {
  static const char *const keys[] = {"alpha", "beta", "allreduce_alpha", "allreduce_beta", "allreduce_ranks"};
  int k = 0;
  while (k < 5 && strcmp(keys[k], key)) k++;
  ADJ_CHECK(k < 5, ADJ_ERR_IO, "plan: calibration file '%s' line %d: unknown key '%s'", source, line, key);
  ADJ_CHECK(!(*seen & 1u << k), ADJ_ERR_IO, "plan: calibration file '%s' line %d: %s is given twice", source, line,
            key);
  char what[512];
  double value;
  snprintf(what, sizeof what, "plan: calibration file '%s' line %d: %s", source, line, key);
  ADJ_CALL(adj_parse_real(text, -DBL_MAX, DBL_MAX, what, &value));
  /* Far from 0 and infinity, so the times they price stay finite. */
  bool positive = value >= 1e-30 && value <= 1e30;
  ADJ_CHECK(positive && (k < 4 || (value >= 2 && value <= 1 << 24 && value == floor(value))), ADJ_ERR_IO,
            "plan: calibration file '%s' line %d: %s %s must be > 0%s", source, line, key, text,
            k == 4 ? " (an integer >= 2)" : " (and at most 1e30)");
  double *fields[] = {&cal->alpha, &cal->beta, &cal->collective_alpha, &cal->collective_beta};
  if (k < 4) *fields[k] = value;
  else cal->collective_ranks = (int)value;
  *seen |= 1u << k;
  return ADJ_SUCCESS;
}

/* One line: blank, a comment ('#' to the end), or "key value". */
static int adj_plan_calibration_text_line(const char *source, int line, char *text, adj_plan_calibration *cal,
                                          unsigned *seen) {
  text[strcspn(text, "#")] = '\0';
  char *save = NULL, *key = strtok_r(text, " \t\r", &save), *value = key ? strtok_r(NULL, " \t\r", &save) : NULL;
  if (!key) return ADJ_SUCCESS;
  ADJ_CHECK(value && !strtok_r(NULL, " \t\r", &save), ADJ_ERR_IO,
            "plan: calibration file '%s' line %d is not 'key value'", source, line);
  ADJ_CALL(adj_plan_calibration_line(source, line, key, value, cal, seen));
  return ADJ_SUCCESS;
}

int adj_plan_calibration_parse(const char *text, const char *source, adj_plan_calibration *cal) {
  ADJ_CHECK(text && cal, ADJ_ERR_ARG, "plan: calibration text or output pointer is NULL");
  source = source ? source : "calibration";
  *cal = (adj_plan_calibration){0};
  char *copy = strdup(text);
  ADJ_CHECK(copy, ADJ_ERR_MEM, "plan: out of memory for calibration file '%s'", source);
  unsigned seen = 0;
  int status = ADJ_SUCCESS, line = 1;
  for (char *p = copy, *next; !status && p; p = next, line++) {
    next = strchr(p, '\n');
    if (next) *next++ = '\0';
    status = adj_plan_calibration_text_line(source, line, p, cal, &seen);
  }
  free(copy);
  ADJ_CALL(status);
  ADJ_CHECK((seen & 3u) == 3u, ADJ_ERR_IO, "plan: calibration file '%s' lacks %s", source,
            seen & 1u ? "beta" : "alpha");
  ADJ_CHECK((seen >> 2) == 0 || (seen >> 2) == 7u, ADJ_ERR_IO,
            "plan: calibration file '%s' needs allreduce_alpha, allreduce_beta and allreduce_ranks together", source);
  return ADJ_SUCCESS;
}

int adj_plan_calibration_load(const char *path, adj_plan_calibration *cal) {
  ADJ_CHECK(path && cal, ADJ_ERR_ARG, "plan: calibration path or output pointer is NULL");
  *cal = (adj_plan_calibration){0};
  enum { MAX_TEXT = 1 << 16 }; /* a calibration is five lines */
  char *text;
  ADJ_CALL(adj_file_read_text(path, "plan: calibration file", MAX_TEXT, &text, NULL));
  adj_plan_calibration read;
  int status = adj_plan_calibration_parse(text, path, &read);
  free(text);
  ADJ_CALL(status);
  *cal = read;
  return ADJ_SUCCESS;
}

int adj_plan_calibration_read(const char *path, double *alpha, double *beta) {
  ADJ_CHECK(alpha && beta, ADJ_ERR_ARG, "plan: alpha or beta pointer is NULL");
  adj_plan_calibration cal;
  ADJ_CALL(adj_plan_calibration_load(path, &cal));
  *alpha = cal.alpha, *beta = cal.beta;
  return ADJ_SUCCESS;
}

void adj_plan_calibration_apply(const adj_plan_calibration *cal, adj_plan_config *config) {
  if (!cal || !config) return;
  config->alpha = cal->alpha, config->beta = cal->beta;
  config->collective_alpha = cal->collective_ranks ? cal->collective_alpha : 0;
  config->collective_beta = cal->collective_ranks ? cal->collective_beta : 0;
}

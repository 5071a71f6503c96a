/* Each layer kind's options, shape inference and parameters for the
 * description parser (description.c, docs/network-format.md). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "adjoin/decomposition.h"
#include "adjoin/parse.h"
#include "description_impl.h"
#include "error_impl.h"

#define DESC_MAX_EXTENT ((int64_t)1 << 31)
#define DESC_MAX_WINDOW ((int64_t)1 << 20)

static const char *const desc_padding_modes[] = {"zeros", "reflect", "replicate", "circular"};

const char *desc_known_keys(adj_desc_kind kind) {
  switch (kind) {
  case ADJ_DESC_CONV: return "out, k, s, d, p, g, mode, bias, parts, out_parts";
  case ADJ_DESC_POOL: return "k, s, d, p, type, count_pad, mode, parts";
  case ADJ_DESC_AFFINE: return "out, bias, parts, out_parts, grid";
  case ADJ_DESC_ACTIVATION: return "slope, parts";
  case ADJ_DESC_BATCHNORM: return "eps, momentum, affine, running_stats, parts";
  case ADJ_DESC_UPSAMPLE: return "scale, size, mode, align_corners, parts";
  case ADJ_DESC_PAD: return "p, mode, parts";
  case ADJ_DESC_PHANTOM: return "out, k, large_k, bias, parts";
  case ADJ_DESC_FLATTEN: return "parts";
  default: return "type, reduction, log_target, log_input, full, eps, parts";
  }
}

/* The layer's shape word for messages: "(6, 14, 14)". */
static const char *desc_in(const adj_desc_layer *l, char *buf, size_t size) {
  return adj_desc_shape_format(l->in_rank, l->in_shape, buf, size);
}

/* A parameter of the layer; its count, and the layer's, checked in int64. */
static int desc_parameter(desc_parser *p, adj_desc_layer *l, const char *name, int rank, const int64_t *shape) {
  adj_desc_parameter *q = &l->parameters[l->n_parameters++];
  char what[160];
  snprintf(what, sizeof what, "%s:%d: %s %s", p->source, p->line, p->what, name);
  snprintf(q->name, sizeof q->name, "%s", name);
  q->rank = rank;
  q->count = 1;
  for (int i = 0; i < rank; i++) q->shape[i] = shape[i];
  for (int i = 0; i < rank; i++) ADJ_CALL(adj_int64_mul(q->count, shape[i], what, &q->count));
  return adj_int64_add(l->parameter_count, q->count, what, &l->parameter_count);
}

/* Needs an input (C, spatial...) with 1..3 spatial dimensions. */
static int desc_spatial_input(desc_parser *p, const adj_desc_layer *l) {
  char in[64];
  ADJ_CHECK(l->in_rank >= 2 && l->in_rank <= 4, ADJ_ERR_ARG,
            "%s:%d: %s needs an input (C, spatial...) with 1 to 3 spatial dimensions, but its input is %s", p->source,
            p->line, p->what, desc_in(l, in, sizeof in));
  return ADJ_SUCCESS;
}

/* PyTorch's limits on what a padding mode can copy from. */
static int desc_mode_padding(desc_parser *p, adj_padding_mode mode, int64_t pad, int64_t extent) {
  ADJ_CHECK(mode != ADJ_PAD_REFLECT || pad < extent, ADJ_ERR_ARG,
            "%s:%d: %s: reflect padding %lld must be < the input extent %lld", p->source, p->line, p->what,
            (long long)pad, (long long)extent);
  ADJ_CHECK(mode != ADJ_PAD_CIRCULAR || pad <= extent, ADJ_ERR_ARG,
            "%s:%d: %s: circular padding %lld must be <= the input extent %lld", p->source, p->line, p->what,
            (long long)pad, (long long)extent);
  return ADJ_SUCCESS;
}

/* k, s, d, p and mode of a conv or pool over the input's spatial
 * dimensions; the output's spatial extents go to l->out_shape[1..]. */
static int desc_window(desc_parser *p, adj_desc_layer *l, adj_window_geometry *w, adj_padding_mode *mode) {
  ADJ_CALL(desc_spatial_input(p, l));
  int sd = l->in_rank - 1;
  int64_t k[3] = {0}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pad[3][2] = {{0}};
  ADJ_CALL(desc_ints(p, "k", sd, 1, DESC_MAX_WINDOW, k));
  ADJ_CHECK(k[0] > 0, ADJ_ERR_ARG, "%s:%d: %s needs a kernel size k=", p->source, p->line, p->what);
  ADJ_CALL(desc_ints(p, "s", sd, 1, DESC_MAX_WINDOW, s));
  ADJ_CALL(desc_ints(p, "d", sd, 1, DESC_MAX_WINDOW, d));
  ADJ_CALL(desc_padding(p, "p", sd, pad));
  int m = ADJ_PAD_ZEROS;
  ADJ_CALL(desc_choice(p, "mode", desc_padding_modes, 4, &m));
  *mode = (adj_padding_mode)m;
  *w = (adj_window_geometry){.spatial_dims = sd};
  for (int i = 0; i < sd; i++) {
    int64_t n = l->in_shape[1 + i], padded = n + pad[i][0] + pad[i][1], span = d[i] * (k[i] - 1) + 1;
    ADJ_CHECK(padded >= span, ADJ_ERR_ARG,
              "%s:%d: %s: kernel %lld (dilation %lld) exceeds the padded input %lld in spatial dimension %d", p->source,
              p->line, p->what, (long long)k[i], (long long)d[i], (long long)padded, i);
    ADJ_CALL(desc_mode_padding(p, *mode, pad[i][0] > pad[i][1] ? pad[i][0] : pad[i][1], n));
    w->kernel[i] = k[i], w->stride[i] = s[i], w->dilation[i] = d[i];
    w->padding_left[i] = pad[i][0], w->padding_right[i] = pad[i][1];
    l->out_shape[1 + i] = (padded - span) / s[i] + 1;
  }
  l->out_rank = l->in_rank;
  return ADJ_SUCCESS;
}

static int desc_conv(desc_parser *p, adj_desc_layer *l) {
  adj_desc_conv *c = &l->u.conv;
  *c = (adj_desc_conv){.groups = 1, .bias = true};
  ADJ_CALL(desc_window(p, l, &c->window, &c->padding_mode));
  ADJ_CALL(desc_int(p, "out", 1, DESC_MAX_EXTENT, &c->out_channels));
  ADJ_CHECK(c->out_channels > 0, ADJ_ERR_ARG, "%s:%d: %s needs its output channels out=", p->source, p->line, p->what);
  ADJ_CALL(desc_int(p, "g", 1, DESC_MAX_EXTENT, &c->groups));
  ADJ_CALL(desc_bool(p, "bias", &c->bias));
  int64_t in_c = l->in_shape[0];
  ADJ_CHECK(in_c % c->groups == 0 && c->out_channels % c->groups == 0, ADJ_ERR_ARG,
            "%s:%d: %s: g=%lld must divide the %lld input channels and out=%lld", p->source, p->line, p->what,
            (long long)c->groups, (long long)in_c, (long long)c->out_channels);
  l->out_shape[0] = c->out_channels;
  int64_t weight[ADJ_DESC_MAX_DIMS + 1] = {c->out_channels, in_c / c->groups};
  for (int i = 0; i < c->window.spatial_dims; i++) weight[2 + i] = c->window.kernel[i];
  ADJ_CALL(desc_parameter(p, l, "weight", 2 + c->window.spatial_dims, weight));
  if (c->bias) ADJ_CALL(desc_parameter(p, l, "bias", 1, &c->out_channels));
  return desc_placement_options(p, l->in_rank + 1, true, false, &l->placement);
}

static int desc_pool(desc_parser *p, adj_desc_layer *l) {
  adj_desc_pool *q = &l->u.pool;
  ADJ_CALL(desc_window(p, l, &q->window, &q->padding_mode));
  int type = 0;
  bool count_pad = true;
  ADJ_CALL(desc_choice(p, "type", (const char *const[]){"max", "avg"}, 2, &type));
  bool given = desc_given(p, "count_pad");
  ADJ_CALL(desc_bool(p, "count_pad", &count_pad));
  ADJ_CHECK(!given || type == 1, ADJ_ERR_ARG, "%s:%d: %s: count_pad= is for type=avg only", p->source, p->line,
            p->what);
  q->kind = type == 0 ? ADJ_POOL_MAX : count_pad ? ADJ_POOL_AVG : ADJ_POOL_AVG_EXCLUDE_PAD;
  l->out_shape[0] = l->in_shape[0];
  return desc_placement_options(p, l->in_rank + 1, false, false, &l->placement);
}

static int desc_affine(desc_parser *p, adj_desc_layer *l) {
  adj_desc_affine *a = &l->u.affine;
  *a = (adj_desc_affine){.bias = true};
  ADJ_CALL(desc_int(p, "out", 1, DESC_MAX_EXTENT, &a->out_features));
  ADJ_CHECK(a->out_features > 0, ADJ_ERR_ARG, "%s:%d: %s needs its output features out=", p->source, p->line, p->what);
  ADJ_CALL(desc_bool(p, "bias", &a->bias));
  l->out_rank = 1;
  l->out_shape[0] = a->out_features;
  int64_t weight[2] = {a->out_features, l->in_shape[0]}, count;
  ADJ_CALL(adj_int64_mul(weight[0], weight[1], p->what, &count));
  ADJ_CALL(desc_parameter(p, l, "weight", 2, weight));
  if (a->bias) ADJ_CALL(desc_parameter(p, l, "bias", 1, &a->out_features));
  return desc_placement_options(p, 2, true, true, &l->placement);
}

static int desc_activation(desc_parser *p, const char *keyword, adj_desc_layer *l) {
  static const char *const names[] = {"relu", "leaky_relu", "tanh", "sigmoid"};
  int k = 0;
  while (strcmp(names[k], keyword)) k++;
  l->u.activation = (adj_activation){.kind = (adj_activation_kind)k};
  if (k == ADJ_LEAKY_RELU) {
    l->u.activation.negative_slope = 0.01;
    ADJ_CALL(desc_real(p, "slope", -1e6, 1e6, &l->u.activation.negative_slope));
  }
  l->out_rank = l->in_rank;
  memcpy(l->out_shape, l->in_shape, sizeof l->out_shape);
  return desc_placement_options(p, l->in_rank + 1, false, false, &l->placement);
}

static int desc_batchnorm(desc_parser *p, adj_desc_layer *l) {
  adj_desc_batchnorm *b = &l->u.batchnorm;
  *b = (adj_desc_batchnorm){.eps = 1e-5, .momentum = 0.1, .affine = true, .running_stats = true};
  ADJ_CALL(desc_real(p, "eps", 1e-300, 1e6, &b->eps));
  ADJ_CALL(desc_real(p, "momentum", 0, 1, &b->momentum));
  ADJ_CALL(desc_bool(p, "affine", &b->affine));
  ADJ_CALL(desc_bool(p, "running_stats", &b->running_stats));
  l->out_rank = l->in_rank;
  memcpy(l->out_shape, l->in_shape, sizeof l->out_shape);
  if (b->affine) {
    ADJ_CALL(desc_parameter(p, l, "weight", 1, l->in_shape));
    ADJ_CALL(desc_parameter(p, l, "bias", 1, l->in_shape));
  }
  return desc_placement_options(p, l->in_rank + 1, false, false, &l->placement);
}

static int desc_upsample(desc_parser *p, adj_desc_layer *l) {
  ADJ_CALL(desc_spatial_input(p, l));
  adj_desc_upsample *u = &l->u.upsample;
  int sd = l->in_rank - 1, mode = 0;
  *u = (adj_desc_upsample){0};
  ADJ_CALL(desc_choice(p, "mode", (const char *const[]){"nearest", "linear"}, 2, &mode));
  u->mode = (adj_interp_mode)mode;
  ADJ_CALL(desc_bool(p, "align_corners", &u->align_corners));
  ADJ_CHECK(!u->align_corners || mode == ADJ_INTERP_LINEAR, ADJ_ERR_ARG,
            "%s:%d: %s: align_corners=yes needs mode=linear (PyTorch refuses it for nearest)", p->source, p->line,
            p->what);
  ADJ_CALL(desc_reals(p, "scale", sd, 1e-6, 1e6, u->scale_factor));
  ADJ_CALL(desc_ints(p, "size", sd, 1, DESC_MAX_EXTENT, u->size));
  bool scale = u->scale_factor[0] > 0, size = u->size[0] > 0;
  ADJ_CHECK(scale != size, ADJ_ERR_ARG, "%s:%d: %s needs scale= or size=, not %s", p->source, p->line, p->what,
            scale ? "both" : "neither");
  l->out_rank = l->in_rank;
  l->out_shape[0] = l->in_shape[0];
  for (int i = 0; i < sd; i++) {
    double m = size ? (double)u->size[i] : floor((double)l->in_shape[1 + i] * u->scale_factor[i]);
    ADJ_CHECK(m >= 1 && m <= (double)DESC_MAX_EXTENT, ADJ_ERR_ARG,
              "%s:%d: %s: spatial dimension %d of extent %lld scaled by %g gives %.0f (1..%lld)", p->source, p->line,
              p->what, i, (long long)l->in_shape[1 + i], u->scale_factor[i], m, (long long)DESC_MAX_EXTENT);
    l->out_shape[1 + i] = (int64_t)m;
  }
  return desc_placement_options(p, l->in_rank + 1, false, false, &l->placement);
}

static int desc_pad(desc_parser *p, adj_desc_layer *l) {
  ADJ_CALL(desc_spatial_input(p, l));
  adj_desc_pad *q = &l->u.pad;
  int sd = l->in_rank - 1, mode = ADJ_PAD_ZEROS;
  *q = (adj_desc_pad){0};
  ADJ_CHECK(desc_given(p, "p"), ADJ_ERR_ARG, "%s:%d: %s needs its padding p=", p->source, p->line, p->what);
  ADJ_CALL(desc_padding(p, "p", sd, q->padding));
  ADJ_CALL(desc_choice(p, "mode", desc_padding_modes, 4, &mode));
  q->mode = (adj_padding_mode)mode;
  l->out_rank = l->in_rank;
  l->out_shape[0] = l->in_shape[0];
  for (int i = 0; i < sd; i++) {
    int64_t n = l->in_shape[1 + i];
    ADJ_CALL(desc_mode_padding(p, q->mode, q->padding[i][0] > q->padding[i][1] ? q->padding[i][0] : q->padding[i][1], n));
    l->out_shape[1 + i] = n + q->padding[i][0] + q->padding[i][1];
  }
  return desc_placement_options(p, l->in_rank + 1, false, false, &l->placement);
}

/* phantom_layer.h's parameters for p workers (balanced blocks). */
static int desc_phantom_parameters(desc_parser *p, adj_desc_layer *l, int workers) {
  const adj_desc_phantom *ph = &l->u.phantom;
  int64_t n_in = l->in_shape[0], n_out = ph->out_features, local = 0;
  for (int j = 0; j < workers; j++) {
    int64_t s, in_j, out_j;
    adj_balanced_block(n_in, workers, j, &s, &in_j);
    adj_balanced_block(n_out, workers, j, &s, &out_j);
    local += in_j * out_j;
  }
  ADJ_CALL(desc_parameter(p, l, "local", 1, &local));
  ADJ_CALL(desc_parameter(p, l, "compressor", 2, (const int64_t[2]){ph->ghosts, n_in}));
  ADJ_CALL(desc_parameter(p, l, "decompressor", 2, (const int64_t[2]){n_out, (int64_t)(workers - 1) * ph->ghosts}));
  if (ph->bias) ADJ_CALL(desc_parameter(p, l, "bias", 1, &n_out));
  return ADJ_SUCCESS;
}

static int desc_phantom(desc_parser *p, adj_desc_layer *l) {
  adj_desc_phantom *ph = &l->u.phantom;
  *ph = (adj_desc_phantom){.out_features = l->in_shape[0], .bias = true};
  ADJ_CALL(desc_int(p, "out", 1, DESC_MAX_EXTENT, &ph->out_features));
  ADJ_CALL(desc_int(p, "k", 1, DESC_MAX_EXTENT, &ph->ghosts));
  ADJ_CHECK(ph->ghosts > 0, ADJ_ERR_ARG, "%s:%d: %s needs its phantom width k=", p->source, p->line, p->what);
  ADJ_CALL(desc_bool(p, "large_k", &ph->allow_large_k));
  ADJ_CALL(desc_bool(p, "bias", &ph->bias));
  ADJ_CALL(desc_placement_options(p, 2, false, false, &l->placement));
  const adj_layer_placement *pl = &l->placement;
  int workers = pl->kind == ADJ_PLACE_PARTS ? pl->parts[1] : 1;
  ADJ_CHECK(pl->kind != ADJ_PLACE_PARTS || pl->parts[0] == 1, ADJ_ERR_ARG,
            "%s:%d: %s: parts=%dx%d splits the batch; a phantom layer runs on 1 x p", p->source, p->line, p->what,
            pl->parts[0], pl->parts[1]);
  l->out_rank = 1;
  l->out_shape[0] = ph->out_features;
  return desc_phantom_parameters(p, l, workers);
}

int desc_infer_flatten(desc_parser *p, adj_desc_layer *l) {
  int64_t features = 1;
  for (int i = 0; i < l->in_rank; i++) ADJ_CALL(adj_int64_mul(features, l->in_shape[i], p->what, &features));
  ADJ_CHECK(features <= DESC_MAX_EXTENT, ADJ_ERR_ARG, "%s:%d: %s: %lld features after flattening (at most %lld)",
            p->source, p->line, p->what, (long long)features, (long long)DESC_MAX_EXTENT);
  l->out_rank = 1;
  l->out_shape[0] = features;
  return ADJ_SUCCESS;
}

static const char *const desc_loss_names[] = {"l1", "mse", "bce", "bce_with_logits", "kl_div", "poisson_nll", "nll",
                                              "xent"};

/* The options only some losses take. */
static int desc_loss_options(desc_parser *p, adj_desc_loss *q) {
  int reduction = ADJ_LOSS_MEAN;
  ADJ_CALL(desc_choice(p, "reduction", (const char *const[]){"mean", "sum", "none", "batchmean"}, 4, &reduction));
  q->reduction = (adj_loss_reduction)reduction;
  ADJ_CHECK(q->reduction != ADJ_LOSS_BATCHMEAN || q->kind == ADJ_LOSS_KL_DIV, ADJ_ERR_ARG,
            "%s:%d: %s: reduction=batchmean is for type=kl_div only", p->source, p->line, p->what);
  bool kl = q->kind == ADJ_LOSS_KL_DIV, poisson = q->kind == ADJ_LOSS_POISSON_NLL, log_input = true;
  const char *keys[] = {"log_target", "log_input", "full", "eps"};
  bool allowed[] = {kl, poisson, poisson, poisson};
  for (int i = 0; i < 4; i++)
    ADJ_CHECK(allowed[i] || !desc_given(p, keys[i]), ADJ_ERR_ARG, "%s:%d: %s: %s= is for type=%s only", p->source,
              p->line, p->what, keys[i], i == 0 ? "kl_div" : "poisson_nll");
  ADJ_CALL(desc_bool(p, "log_target", &q->log_target));
  ADJ_CALL(desc_bool(p, "log_input", &log_input));
  q->poisson_linear_input = !log_input;
  ADJ_CALL(desc_bool(p, "full", &q->poisson_full));
  return desc_real(p, "eps", 1e-300, 1, &q->poisson_eps);
}

static int desc_loss(desc_parser *p, adj_desc_layer *l) {
  int type = -1;
  ADJ_CALL(desc_choice(p, "type", desc_loss_names, 8, &type));
  ADJ_CHECK(type >= 0, ADJ_ERR_ARG,
            "%s:%d: %s needs type= (xent, l1, mse, bce, bce_with_logits, kl_div, poisson_nll, nll)", p->source,
            p->line, p->what);
  char in[64];
  bool classes = type == 7 || type == ADJ_LOSS_NLL;
  ADJ_CHECK(!classes || l->in_rank == 1, ADJ_ERR_ARG,
            "%s:%d: %s: type=%s takes (N, C) scores, but its input is %s per sample (flatten it first)", p->source,
            p->line, p->what, desc_loss_names[type], desc_in(l, in, sizeof in));
  l->u.loss = (adj_desc_loss){.kind = type == 7 ? ADJ_LOSS_NLL : (adj_loss_kind)type};
  if (type == 7) l->kind = ADJ_DESC_XENT;
  else ADJ_CALL(desc_loss_options(p, &l->u.loss));
  l->out_rank = 0;
  return desc_placement_options(p, l->in_rank + 1, false, false, &l->placement);
}

int desc_infer(desc_parser *p, const char *keyword, adj_desc_layer *l) {
  switch (l->kind) {
  case ADJ_DESC_CONV: return desc_conv(p, l);
  case ADJ_DESC_POOL: return desc_pool(p, l);
  case ADJ_DESC_AFFINE: return desc_affine(p, l);
  case ADJ_DESC_ACTIVATION: return desc_activation(p, keyword, l);
  case ADJ_DESC_BATCHNORM: return desc_batchnorm(p, l);
  case ADJ_DESC_UPSAMPLE: return desc_upsample(p, l);
  case ADJ_DESC_PAD: return desc_pad(p, l);
  case ADJ_DESC_PHANTOM: return desc_phantom(p, l);
  case ADJ_DESC_FLATTEN:
    ADJ_CALL(desc_infer_flatten(p, l));
    return desc_placement_options(p, l->in_rank + 1, false, false, &l->placement);
  default: return desc_loss(p, l);
  }
}

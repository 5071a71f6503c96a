/* Distributed losses with PyTorch's semantics (see include/adjoin/loss_layers.h).
 *
 * Reduced losses make one float64 all-sum-reduce over a one-dimensional
 * partition of every base rank per call: forward and jvp add the workers'
 * partial sums, backward carries dy from the root (which adds it; the others
 * add zeros).  Reduction NONE moves no data: the Jacobian is diagonal (NLL:
 * one entry per row). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "adjoin/all_sum_reduce.h"
#include "adjoin/loss_layers.h"
#include "dist_layer_impl.h"
#include "fault_impl.h"
#include "loss_pointwise_impl.h"
#include "op_after_impl.h"

typedef struct adj_loss_layer {
  adj_loss_point point;
  adj_loss_reduction reduction;
  double scale;           /* 1, 1 / global elements or 1 / global batch */
  int root;               /* base rank of the reduced output */
  adj_op *reduce;         /* float64 [1] over every base rank (reduced losses) */
  adj_tensor partial;     /* its buffer */
  adj_tensor target;      /* this worker's target block (elementwise losses) */
  int64_t *labels;        /* NLL: this worker's batch rows */
  int64_t rows, cols, col_start; /* NLL: the input block (rows, cols) from class col_start */
  int64_t classes;        /* NLL: C */
  double value;           /* the global loss of the last forward */
  /* Padding (adj_loss_layer_set_count): only the first `count` of the batch's
   * `batch` samples count.  This worker's block holds batch rows
   * row_start .. row_start + block_rows - 1, each row_elements long; the
   * mean divides by count x sample_elements (MEAN), or by count
   * (BATCHMEAN, NLL's MEAN). */
  int64_t batch, count, row_start, block_rows, row_elements;
  double sample_elements;
} adj_loss_layer;

/* The sum over every rank of `local`, this rank's part from a local step
 * whose failure-injection site is `site` (fault_impl.h; NULL: none).  Every
 * rank makes the reduction even when that step failed on some, so none is
 * left waiting in it; *status is the failure, for the layer's agreement. */
static double adj_loss_reduce(const adj_layer *l, adj_loss_layer *s, double local, const char *site, int *status) {
  *(double *)s->partial.data = local;
  int prior = site ? adj_fault_at(l->name, site, ADJ_SUCCESS) : ADJ_SUCCESS;
  *status = adj_op_apply_after(prior, s->reduce, ADJ_FORWARD, &s->partial, &s->partial);
  return *(double *)s->partial.data;
}

/* ---- NLL -------------------------------------------------------------------------------- */

/* The rows of this worker's block that count (the rest are padding). */
static int64_t adj_loss_counted_rows(const adj_loss_layer *s) {
  int64_t rows = s->count - s->row_start;
  return rows < 0 ? 0 : rows < s->block_rows ? rows : s->block_rows;
}

/* The flat index in the block of sample i's label entry, or -1 when another
 * worker holds that class. */
static int64_t adj_nll_entry(const adj_loss_layer *s, int64_t i) {
  int64_t c = s->labels[i] - s->col_start;
  return c >= 0 && c < s->cols ? i * s->cols + c : -1;
}

/* sum over counted rows of v[label entry] (v = x: minus the loss), or, with
 * out, the per-row values (NONE); rows without their label entry, and
 * padding rows, give 0. */
static double adj_nll_pick(const adj_loss_layer *s, const adj_tensor *v, adj_tensor *out) {
  double sum = 0;
  int64_t counted = adj_loss_counted_rows(s);
  for (int64_t i = 0; i < s->rows; i++) {
    int64_t e = i < counted ? adj_nll_entry(s, i) : -1;
    double pick = e >= 0 ? adj_tensor_get(v, e) : 0;
    sum += pick;
    if (out) adj_tensor_set(out, i, -pick);
  }
  return sum;
}

/* dx = 0 but -scale w_i at each row's label entry (w from dy, or 1). */
static void adj_nll_spread(const adj_loss_layer *s, const adj_tensor *w, double scale, adj_tensor *dx) {
  adj_tensor_zero(dx);
  for (int64_t i = 0; i < adj_loss_counted_rows(s); i++) {
    int64_t e = adj_nll_entry(s, i);
    if (e >= 0) adj_tensor_set(dx, e, -scale * (w ? adj_tensor_get(w, i) : 1));
  }
}

/* ---- application ------------------------------------------------------------------------ */

/* Elements of the block that count: its counted rows.  With out, the
 * padding's entries are zeroed (the typed loops write only the rest). */
static int64_t adj_loss_counted_elements(const adj_loss_layer *s, adj_tensor *out) {
  int64_t n = adj_loss_counted_rows(s) * s->row_elements;
  if (out) memset((char *)out->data + (size_t)n * adj_dtype_size(out->dtype), 0,
                  adj_tensor_bytes(out) - (size_t)n * adj_dtype_size(out->dtype));
  return n;
}

static double adj_loss_local_values(const adj_layer *l, const adj_loss_layer *s, const adj_tensor *x,
                                    adj_tensor *out) {
  if (s->point.kind == ADJ_LOSS_NLL) return -adj_nll_pick(s, x, out);
  int64_t n = adj_loss_counted_elements(s, out);
  void *o = out ? out->data : NULL;
  return adj_loss_point_values(&s->point, l->dtype, x->data, s->target.data, n, o);
}

static double adj_loss_local_slopes(const adj_layer *l, const adj_loss_layer *s, const adj_tensor *v, double scale,
                                    adj_tensor *out) {
  const adj_tensor *x = l->input;
  int64_t n = adj_loss_counted_elements(s, out);
  const void *vd = v ? v->data : NULL;
  void *o = out ? out->data : NULL;
  return adj_loss_point_slopes(&s->point, l->dtype, x->data, s->target.data, n, vd, scale, o);
}

/* BCE takes probabilities: an input outside [0, 1] fails on every rank. */
static int adj_loss_check_input(const adj_layer *l, const adj_loss_layer *s, const adj_tensor *x) {
  if (s->point.kind != ADJ_LOSS_BCE) return ADJ_SUCCESS;
  int status = ADJ_SUCCESS;
  int64_t i = adj_loss_first_outside_unit(x->dtype, x->data, adj_tensor_volume(x));
  if (i >= 0)
    status = adj_error_set(ADJ_ERR_ARG, "%s: input %g (local element %lld) is outside [0, 1]; BCE takes "
                           "probabilities (use BCE with logits for scores)", l->name, adj_tensor_get(x, i),
                           (long long)i);
  return adj_status_agree(l->comm, status, l->wait);
}

static int adj_loss_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  adj_loss_layer *s = l->impl;
  ADJ_CALL(adj_loss_check_input(l, s, x));
  if (s->reduction == ADJ_LOSS_NONE) {
    adj_loss_local_values(l, s, x, y);
    s->value = 0;
    return ADJ_SUCCESS;
  }
  int status;
  s->value = s->scale * adj_loss_reduce(l, s, adj_loss_local_values(l, s, x, NULL), "forward local", &status);
  if (adj_tensor_volume(y)) adj_tensor_set(y, 0, s->value);
  return status;
}

static int adj_loss_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  adj_loss_layer *s = l->impl;
  bool nll = s->point.kind == ADJ_LOSS_NLL;
  if (s->reduction == ADJ_LOSS_NONE) {
    if (!dx) adj_tensor_zero(dy);
    else if (nll) adj_nll_pick(s, dx, dy);
    else adj_loss_local_slopes(l, s, dx, 1, dy);
    return ADJ_SUCCESS;
  }
  double local = !dx ? 0 : nll ? -adj_nll_pick(s, dx, NULL) : adj_loss_local_slopes(l, s, dx, 1, NULL);
  int status;
  double total = s->scale * adj_loss_reduce(l, s, local, "jvp local", &status);
  if (adj_tensor_volume(dy)) adj_tensor_set(dy, 0, total);
  return status;
}

static int adj_loss_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  adj_loss_layer *s = l->impl;
  bool nll = s->point.kind == ADJ_LOSS_NLL;
  if (s->reduction == ADJ_LOSS_NONE) {
    if (dx && nll) adj_nll_spread(s, dy, 1, dx);
    else if (dx) adj_loss_local_slopes(l, s, dy, 1, dx);
    return ADJ_SUCCESS;
  }
  /* NULL dx is a collective choice, so every rank skips the reduction alike. */
  if (!dx) return ADJ_SUCCESS;
  int status;
  /* dy from the root first: the local step comes after the reduction. */
  double w = adj_loss_reduce(l, s, adj_tensor_volume(dy) ? adj_tensor_get(dy, 0) : 0, NULL, &status);
  if (nll) adj_nll_spread(s, NULL, s->scale * w, dx);
  else adj_loss_local_slopes(l, s, NULL, s->scale * w, dx);
  return status;
}

static void adj_loss_free(adj_loss_layer *s) {
  if (!s) return;
  adj_op_destroy(&s->reduce);
  adj_tensor_destroy(&s->partial), adj_tensor_destroy(&s->target);
  free(s->labels);
  free(s);
}

static void adj_loss_destroy(adj_layer *l) { adj_loss_free(l->impl); }

static const adj_layer_methods adj_loss_methods = {adj_loss_forward, adj_loss_jvp, adj_loss_backward,
                                                   adj_loss_destroy};

/* ---- validation ------------------------------------------------------------------------- */

const char *adj_loss_kind_name(adj_loss_kind kind) {
  static const char *const names[] = {"l1", "mse", "bce", "bce_with_logits", "kl_div", "poisson_nll", "nll"};
  return kind >= ADJ_LOSS_L1 && kind <= ADJ_LOSS_NLL ? names[kind] : "unknown";
}

static int adj_loss_validate(const char *who, const adj_loss_layer_config *c) {
  ADJ_CALL(adj_layer_config_check(who, c, c ? c->dtype : ADJ_FLOAT64, c ? c->input : NULL));
  ADJ_CHECK(c->kind >= ADJ_LOSS_L1 && c->kind <= ADJ_LOSS_NLL, ADJ_ERR_ARG, "%s: unknown loss kind %d", who,
            (int)c->kind);
  ADJ_CHECK(c->reduction >= ADJ_LOSS_MEAN && c->reduction <= ADJ_LOSS_BATCHMEAN, ADJ_ERR_ARG,
            "%s: unknown reduction %d", who, (int)c->reduction);
  ADJ_CHECK(c->reduction != ADJ_LOSS_BATCHMEAN || c->kind == ADJ_LOSS_KL_DIV, ADJ_ERR_ARG,
            "%s: reduction batchmean is for KL divergence only, not %s", who, adj_loss_kind_name(c->kind));
  ADJ_CHECK(!(c->poisson_eps < 0), ADJ_ERR_ARG, "%s: poisson_eps is %g; it must be >= 0", who, c->poisson_eps);
  int size;
  MPI_Comm_size(adj_partition_base_comm(adj_decomposition_partition(c->input)), &size);
  ADJ_CHECK(c->root >= 0 && c->root < size, ADJ_ERR_ARG, "%s: root %d is outside the communicator of %d ranks", who,
            c->root, size);
  int rank = adj_decomposition_rank(c->input);
  if (c->kind == ADJ_LOSS_NLL) {
    ADJ_CHECK(rank == 2, ADJ_ERR_SIZE, "%s: the input has rank %d; NLL takes log-probabilities (N, C)", who, rank);
    int pc = adj_partition_shape(adj_decomposition_partition(c->input))[1];
    ADJ_CHECK(c->reduction != ADJ_LOSS_NONE || pc == 1, ADJ_ERR_INCOMPATIBLE,
              "%s: NLL with reduction none gives one loss per sample, so the classes must not be split (they are "
              "over %d workers): repartition first",
              who, pc);
  }
  return ADJ_SUCCESS;
}

/* ---- planning --------------------------------------------------------------------------- */

/* The reduced output: [1] on the root alone.  Reduction NONE: the input's
 * layout, or for NLL (N) on the batch partition with the input's batch cuts. */
static int adj_loss_output_layout(const adj_loss_layer_config *c, adj_decomposition **out) {
  const adj_partition *p = adj_decomposition_partition(c->input);
  if (c->reduction == ADJ_LOSS_NONE && c->kind != ADJ_LOSS_NLL) {
    *out = adj_decomposition_reference((adj_decomposition *)c->input);
    return ADJ_SUCCESS;
  }
  adj_partition *q;
  int64_t n = 1;
  const int64_t *cuts[1] = {NULL};
  if (c->reduction == ADJ_LOSS_NONE) {
    ADJ_CALL(adj_partition_reshape(p, 1, adj_partition_shape(p), &q));
    n = adj_decomposition_global_shape(c->input)[0];
    cuts[0] = adj_decomposition_cuts(c->input, 0);
  } else {
    ADJ_CALL(adj_partition_create(adj_partition_base_comm(p), 1, (const int[1]){1}, 1, &c->root, &q));
  }
  int status = adj_decomposition_create_explicit(q, 1, &n, cuts, out);
  adj_partition_destroy(&q);
  return status;
}

/* The factor of the summed loss: 1, or 1 over what the mean divides by
 * (0 when no sample counts: the loss of nothing is 0). */
static double adj_loss_scale(const adj_loss_layer *s) {
  if (s->reduction == ADJ_LOSS_SUM || s->reduction == ADJ_LOSS_NONE) return 1;
  if (s->count == 0) return 0;
  if (s->reduction == ADJ_LOSS_BATCHMEAN || s->point.kind == ADJ_LOSS_NLL) return 1 / (double)s->count;
  return 1 / ((double)s->count * s->sample_elements);
}

/* The batch (dimension 0; a rank-0 input is one sample) and this worker's rows of it. */
static void adj_loss_rows(const adj_loss_layer_config *c, adj_loss_layer *s) {
  int rank = adj_decomposition_rank(c->input);
  const int64_t *shape = adj_decomposition_global_shape(c->input);
  adj_box block = adj_decomposition_local_block(c->input);
  int64_t elements = 1, local = 1;
  for (int d = 0; d < rank; d++) elements *= shape[d], local *= block.extent[d];
  s->batch = s->count = rank ? shape[0] : 1;
  s->row_start = rank ? block.start[0] : 0;
  s->block_rows = rank ? block.extent[0] : 1;
  s->row_elements = s->block_rows ? local / s->block_rows : 0;
  s->sample_elements = s->batch ? (double)(elements / s->batch) : 0;
}

/* Buffers on this rank (the caller agrees). */
static int adj_loss_buffers(const adj_loss_layer_config *c, adj_loss_layer *s) {
  adj_box block = adj_decomposition_local_block(c->input);
  adj_loss_rows(c, s);
  ADJ_CALL(adj_tensor_create(&s->partial, ADJ_FLOAT64, 1, (const int64_t[1]){1}));
  if (c->kind != ADJ_LOSS_NLL) return adj_tensor_create(&s->target, c->dtype, block.rank, block.extent);
  s->rows = block.extent[0];
  s->cols = block.extent[1];
  s->col_start = block.start[1];
  s->classes = adj_decomposition_global_shape(c->input)[1];
  s->labels = calloc((size_t)s->rows + 1, sizeof *s->labels);
  ADJ_CHECK(s->labels, ADJ_ERR_MEM, "loss layer: out of memory for %lld labels", (long long)s->rows);
  return ADJ_SUCCESS;
}

static int adj_loss_plan(const adj_loss_layer_config *c, adj_loss_layer **out) {
  *out = NULL;
  adj_loss_layer *s = calloc(1, sizeof *s);
  int status = s ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "loss layer: out of memory");
  if (s) {
    s->point = (adj_loss_point){.kind = c->kind, .log_target = c->log_target, .linear_input = c->poisson_linear_input,
                                .full = c->poisson_full, .eps = c->poisson_eps > 0 ? c->poisson_eps : 1e-8};
    s->reduction = c->reduction;
    s->root = c->root;
    status = adj_loss_buffers(c, s);
    s->scale = adj_loss_scale(s);
  }
  status = adj_layer_agree(c->input, status);
  if (!status && c->reduction != ADJ_LOSS_NONE) {
    MPI_Comm base = adj_partition_base_comm(adj_decomposition_partition(c->input));
    int size;
    MPI_Comm_size(base, &size);
    adj_partition *all;
    status = adj_partition_create(base, 1, &size, size, NULL, &all);
    if (!status) status = adj_all_sum_reduce_create(ADJ_FLOAT64, all, 1, s->partial.shape, 1, (const int[1]){0},
                                                    &s->reduce);
    if (!status) adj_op_set_checks(s->reduce, false);
    adj_partition_destroy(&all);
  }
  if (status) adj_loss_free(s);
  else *out = s;
  return status;
}

int adj_loss_layer_create(const adj_loss_layer_config *c, adj_layer **layer) {
  static const char who[] = "loss layer";
  *layer = NULL;
  ADJ_CALL(adj_loss_validate(who, c));
  adj_decomposition *output = NULL;
  adj_loss_layer *s = NULL;
  int status = adj_loss_output_layout(c, &output);
  if (!status) status = adj_loss_plan(c, &s);
  char name[64];
  snprintf(name, sizeof name, "%s_loss", adj_loss_kind_name(c->kind));
  if (!status) status = adj_layer_alloc_between(name, c->dtype, c->input, output, &adj_loss_methods, s, layer);
  if (status) adj_loss_free(s);
  adj_decomposition_destroy(&output);
  return status;
}

/* ---- targets ---------------------------------------------------------------------------- */

static adj_loss_layer *adj_loss_impl(const adj_layer *l) {
  return l && l->methods.forward == adj_loss_forward ? l->impl : NULL;
}

/* The target domain of each loss; NULL when every value is allowed. */
static const char *adj_loss_target_domain(const adj_loss_point *p, double t) {
  if ((p->kind == ADJ_LOSS_BCE || p->kind == ADJ_LOSS_BCE_WITH_LOGITS) && !(t >= 0 && t <= 1)) return "[0, 1]";
  if (p->kind == ADJ_LOSS_KL_DIV && !p->log_target && !(t >= 0)) return "[0, inf) (probabilities)";
  if (p->kind == ADJ_LOSS_POISSON_NLL && !(t >= 0)) return "[0, inf) (counts)";
  if (!isfinite(t) && !(p->kind == ADJ_LOSS_KL_DIV && p->log_target && t == -INFINITY)) return "finite values";
  return NULL;
}

static int adj_loss_check_target(const adj_layer *l, const adj_loss_layer *s, const adj_tensor *target) {
  ADJ_CHECK(s && s->point.kind != ADJ_LOSS_NLL, ADJ_ERR_ARG,
            "loss layer: %s takes no target tensor (NLL takes labels; other layers no loss target)",
            l ? l->name : "NULL");
  ADJ_CALL(adj_tensor_check(target, l->dtype, l->input_rank, l->input_shape, l->name, "target", "layer"));
  for (int64_t i = 0; i < adj_tensor_volume(target); i++) {
    double t = adj_tensor_get(target, i);
    const char *domain = adj_loss_target_domain(&s->point, t);
    ADJ_CHECK(!domain, ADJ_ERR_ARG, "%s: target %g (local element %lld) is outside %s", l->name, t, (long long)i,
              domain);
  }
  return ADJ_SUCCESS;
}

int adj_loss_layer_set_target(adj_layer *l, const adj_tensor *target) {
  adj_loss_layer *s = adj_loss_impl(l);
  ADJ_CHECK(s, ADJ_ERR_ARG, "loss layer: %s is not a loss layer", l ? l->name : "NULL");
  int status = adj_loss_check_target(l, s, target);
  if (!status) status = adj_tensor_copy(&s->target, target);
  return adj_status_agree(l->comm, status, l->wait);
}

int adj_loss_layer_set_labels(adj_layer *l, const int64_t *labels, int64_t count) {
  adj_loss_layer *s = adj_loss_impl(l);
  ADJ_CHECK(s, ADJ_ERR_ARG, "loss layer: %s is not a loss layer", l ? l->name : "NULL");
  int status = s->point.kind == ADJ_LOSS_NLL
                   ? ADJ_SUCCESS
                   : adj_error_set(ADJ_ERR_ARG, "%s: labels are for NLL; set a target tensor instead", l->name);
  if (!status && count != s->rows)
    status = adj_error_set(ADJ_ERR_ARG, "%s: %lld labels for a block of %lld samples", l->name, (long long)count,
                           (long long)s->rows);
  if (!status && count && !labels) status = adj_error_set(ADJ_ERR_ARG, "%s: labels is NULL", l->name);
  for (int64_t i = 0; i < count && !status; i++)
    if (labels[i] < 0 || labels[i] >= s->classes)
      status = adj_error_set(ADJ_ERR_ARG, "%s: label %lld of local sample %lld is outside [0, %lld)", l->name,
                             (long long)labels[i], (long long)i, (long long)s->classes);
  if (!status && count) memcpy(s->labels, labels, sizeof *labels * (size_t)count);
  return adj_status_agree(l->comm, status, l->wait);
}

double adj_loss_layer_value(const adj_layer *l) {
  const adj_loss_layer *s = adj_loss_impl(l);
  return s ? s->value : 0;
}

int adj_loss_layer_set_count(adj_layer *l, int64_t count) {
  adj_loss_layer *s = adj_loss_impl(l);
  ADJ_CHECK(s, ADJ_ERR_ARG, "loss layer: %s is not a loss layer", l ? l->name : "NULL");
  ADJ_CHECK(count >= 0 && count <= s->batch, ADJ_ERR_ARG, "%s: %lld samples count, outside [0, %lld] (the batch)",
            l->name, (long long)count, (long long)s->batch);
  s->count = count;
  s->scale = adj_loss_scale(s);
  return ADJ_SUCCESS;
}

int adj_loss_layer_describe(const adj_layer *l, adj_loss_kind *kind, adj_loss_reduction *reduction) {
  const adj_loss_layer *s = adj_loss_impl(l);
  ADJ_CHECK(s, ADJ_ERR_ARG, "%s is not a loss layer of loss_layers.h", l ? l->name : "NULL");
  if (kind) *kind = s->point.kind;
  if (reduction) *reduction = s->reduction;
  return ADJ_SUCCESS;
}

/* Losses: softmax cross-entropy (integer labels) and mean-squared error, each with
 * mean or sum reduction.  The loss is a scalar, so its jvp returns a number and
 * its backward takes the scalar seed dloss. */
#include <math.h>
#include <string.h>

#include "adjoin/loss.h"
#include "kernels_impl.h"
#include "lane_sums_impl.h"
#include "vector_math_impl.h"

/* Cross-entropy's rows go through the vector math a chunk at a time, their
 * sums in lanes (lane_sums_impl.h), their maxima in ADJ_XENT_MAXIMA vectors
 * of ADJ_XENT_BYTES (a register at v3, half one at v4, two at the baseline). */
enum { ADJ_XENT_CHUNK = 256, ADJ_XENT_BYTES = 32, ADJ_XENT_MAXIMA = 2 };

/* The most threads a cross-entropy call splits its rows over. */
enum { ADJ_XENT_TEAM = 64 };

#define ADJ_TYPED_FILE "loss_typed.inc"
#include "instantiate.h"

static int adj_check_reduction(const char *who, adj_reduction reduction) {
  ADJ_CHECK(reduction == ADJ_REDUCE_MEAN || reduction == ADJ_REDUCE_SUM, ADJ_ERR_ARG,
            "%s: unknown reduction %d", who, (int)reduction);
  return ADJ_SUCCESS;
}

/* 1 / count for the mean (0 when empty, so an empty batch has loss 0), 1 for the sum. */
static double adj_reduction_scale(adj_reduction reduction, int64_t count) {
  if (reduction == ADJ_REDUCE_SUM) return 1.0;
  return count > 0 ? 1.0 / (double)count : 0.0;
}

/* ---- softmax cross-entropy ----------------------------------------------------------- */

static int adj_xent_check(const char *who, const adj_tensor *logits, const int64_t *labels, adj_reduction reduction) {
  ADJ_CALL(adj_check_reduction(who, reduction));
  ADJ_CALL(adj_check_input(who, "logits (N, C)", logits, 2));
  int64_t n = logits->shape[0], c = logits->shape[1];
  ADJ_CHECK(labels || n == 0, ADJ_ERR_ARG, "%s: labels is NULL", who);
  for (int64_t i = 0; i < n; i++)
    ADJ_CHECK(labels[i] >= 0 && labels[i] < c, ADJ_ERR_ARG, "%s: label %lld of sample %lld is outside [0, %lld)", who,
              (long long)labels[i], (long long)i, (long long)c);
  return ADJ_SUCCESS;
}

/* Cross-entropy's rows split over a team: each member's share of the rows
 * (the loss's partial sums, one per member, added in member order), or of the
 * gradient's rows (independent). */
typedef struct adj_xent_work {
  const adj_tensor *logits;
  const int64_t *labels;
  double scale;
  void *dlogits;          /* backward: the gradient; forward: NULL */
  double partial[ADJ_XENT_TEAM];
} adj_xent_work;

static void adj_xent_share(void *arg, int64_t first, int64_t count, int member) {
  adj_xent_work *w = arg;
  adj_dtype dtype = w->logits->dtype;
  int64_t c = w->logits->shape[1];
  const void *z = adj_at_const(w->logits->data, dtype, first * c);
  if (w->dlogits)
    ADJ_DISPATCH(dtype, xent_backward, z, w->labels + first, count, c, w->scale, adj_at(w->dlogits, dtype, first * c));
  else w->partial[member] = ADJ_DISPATCH(dtype, xent_forward, z, w->labels + first, count, c);
}

/* The forward's sum over the rows, or the backward's gradient, over a team. */
static double adj_xent_run(const adj_tensor *logits, const int64_t *labels, double scale, void *dlogits) {
  int64_t n = logits->shape[0];
  adj_xent_work w = {logits, labels, scale, dlogits, {0}};
  int team = adj_team_size(n, n * logits->shape[1]);
  team = team < ADJ_XENT_TEAM ? team : ADJ_XENT_TEAM;
  adj_team_run(team, n, adj_xent_share, &w);
  double sum = 0;
  for (int m = 0; m < team; m++) sum += w.partial[m];
  return sum;
}

int adj_softmax_xent_forward(const adj_tensor *logits, const int64_t *labels, adj_reduction reduction,
                             double *loss) {
  ADJ_CALL(adj_xent_check("softmax cross-entropy forward", logits, labels, reduction));
  ADJ_CHECK(loss, ADJ_ERR_ARG, "softmax cross-entropy forward: loss is NULL");
  *loss = adj_reduction_scale(reduction, logits->shape[0]) * adj_xent_run(logits, labels, 0, NULL);
  return ADJ_SUCCESS;
}

int adj_softmax_xent_jvp(const adj_tensor *logits, const int64_t *labels, adj_reduction reduction,
                         const adj_tensor *dlogits, double *dloss) {
  static const char who[] = "softmax cross-entropy jvp";
  ADJ_CALL(adj_xent_check(who, logits, labels, reduction));
  ADJ_CALL(adj_check_tensor(who, "perturbation dlogits", dlogits, logits->dtype, 2, logits->shape));
  ADJ_CHECK(dloss, ADJ_ERR_ARG, "%s: dloss is NULL", who);
  int64_t n = logits->shape[0], c = logits->shape[1];
  *dloss = adj_reduction_scale(reduction, n) *
           ADJ_DISPATCH(logits->dtype, xent_jvp, logits->data, labels, n, c, dlogits->data);
  return ADJ_SUCCESS;
}

int adj_softmax_xent_backward(const adj_tensor *logits, const int64_t *labels, adj_reduction reduction, double dloss,
                              adj_tensor *dlogits) {
  static const char who[] = "softmax cross-entropy backward";
  ADJ_CALL(adj_xent_check(who, logits, labels, reduction));
  ADJ_CALL(adj_check_tensor(who, "gradient dlogits", dlogits, logits->dtype, 2, logits->shape));
  adj_xent_run(logits, labels, dloss * adj_reduction_scale(reduction, logits->shape[0]), dlogits->data);
  return ADJ_SUCCESS;
}

int adj_softmax_xent_correct(const adj_tensor *logits, const int64_t *labels, int64_t *correct) {
  ADJ_CALL(adj_xent_check("softmax cross-entropy accuracy", logits, labels, ADJ_REDUCE_SUM));
  ADJ_CHECK(correct, ADJ_ERR_ARG, "softmax cross-entropy accuracy: correct is NULL");
  *correct = ADJ_DISPATCH(logits->dtype, xent_correct, logits->data, labels, logits->shape[0], logits->shape[1]);
  return ADJ_SUCCESS;
}

/* ---- mean-squared error ------------------------------------------------------------ */

static int adj_mse_check(const char *who, const adj_tensor *y, const adj_tensor *target, adj_reduction reduction,
                         const char *name, const adj_tensor *t) {
  ADJ_CALL(adj_check_reduction(who, reduction));
  ADJ_CHECK(y, ADJ_ERR_ARG, "%s: prediction y is NULL", who);
  ADJ_CALL(adj_check_input(who, "prediction y", y, y->rank));
  ADJ_CALL(adj_check_tensor(who, "target", target, y->dtype, y->rank, y->shape));
  return t ? adj_check_tensor(who, name, t, y->dtype, y->rank, y->shape) : ADJ_SUCCESS;
}

int adj_mse_forward(const adj_tensor *y, const adj_tensor *target, adj_reduction reduction, double *loss) {
  ADJ_CALL(adj_mse_check("mse forward", y, target, reduction, NULL, NULL));
  ADJ_CHECK(loss, ADJ_ERR_ARG, "mse forward: loss is NULL");
  int64_t n = adj_tensor_volume(y);
  *loss = adj_reduction_scale(reduction, n) * ADJ_DISPATCH(y->dtype, residual_dot, y->data, target->data, NULL, n);
  return ADJ_SUCCESS;
}

int adj_mse_jvp(const adj_tensor *y, const adj_tensor *target, adj_reduction reduction, const adj_tensor *dy,
                double *dloss) {
  ADJ_CHECK(dy, ADJ_ERR_ARG, "mse jvp: perturbation dy is NULL");
  ADJ_CALL(adj_mse_check("mse jvp", y, target, reduction, "perturbation dy", dy));
  ADJ_CHECK(dloss, ADJ_ERR_ARG, "mse jvp: dloss is NULL");
  int64_t n = adj_tensor_volume(y);
  *dloss = 2.0 * adj_reduction_scale(reduction, n) *
           ADJ_DISPATCH(y->dtype, residual_dot, y->data, target->data, dy->data, n);
  return ADJ_SUCCESS;
}

int adj_mse_backward(const adj_tensor *y, const adj_tensor *target, adj_reduction reduction, double dloss,
                     adj_tensor *dy) {
  ADJ_CHECK(dy, ADJ_ERR_ARG, "mse backward: gradient dy is NULL");
  ADJ_CALL(adj_mse_check("mse backward", y, target, reduction, "gradient dy", dy));
  int64_t n = adj_tensor_volume(y);
  double scale = 2.0 * dloss * adj_reduction_scale(reduction, n);
  ADJ_DISPATCH(y->dtype, residual_scale, y->data, target->data, n, scale, dy->data);
  return ADJ_SUCCESS;
}

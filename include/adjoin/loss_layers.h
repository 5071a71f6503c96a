/* Losses with PyTorch's semantics over any partition of the input.
 *
 * Elementwise losses of an input x and a target t of the same shape (t is
 * data: no gradient flows into it), per element:
 *   L1                 |x - t|
 *   MSE                (x - t)^2
 *   BCE                -(t log x + (1 - t) log(1 - x)), logs clamped at -100;
 *                      x must lie in [0, 1] (checked at every forward) and t in
 *                      [0, 1] (checked when set)
 *   BCE with logits    max(x, 0) - x t + log(1 + exp(-|x|))   (the stable form)
 *   KL divergence      t (log t - x) (0 where t = 0), x a log-probability;
 *                      with log_target: exp(t) (t - x).  t >= 0 unless log_target
 *   Poisson NLL        exp(x) - t x (log_input, the default) or
 *                      x - t log(x + eps); full adds Stirling's t log t - t +
 *                      log(2 pi t) / 2 where t > 1.  t >= 0
 * and the negative log-likelihood of class indices:
 *   NLL                -x[n, label_n] for x (N, C) of log-probabilities.
 * (Softmax cross-entropy on a gathered batch is xent_layer.h's adj_xent_layer.)
 *
 * Reductions: NONE keeps the elementwise loss (the input's layout; NLL gives
 * (N) on the batch partition and needs the classes unsplit); SUM adds
 * everything; MEAN divides by the GLOBAL element count (NLL: by the batch N);
 * BATCHMEAN (KL divergence only) divides by the global batch N.  The global
 * value does not depend on how the input is cut: each worker sums its block in
 * float64 and one all-sum-reduce over every rank of the base communicator adds
 * the partial sums, so adj_loss_layer_value gives the same global loss on every
 * rank, whatever its block (unequal and empty blocks included).  The layer's
 * output, for networks and the Jacobian tests, is that scalar with shape [1]
 * on base rank `root` and [0] elsewhere.
 *
 * Jacobian (reduced):  jvp dy = s sum f'(x) dx (the same all-sum-reduce);
 * backward dx = s dy f'(x), dy sent from the root inside the same kind of
 * reduction (the root adds it, the others zeros), so each call makes one.
 *
 * Targets are set per worker (its block, adj_loss_layer_set_target or
 * adj_loss_layer_set_labels) and checked against the loss's domain; those
 * calls are collective and a bad value on any rank fails every rank with a
 * message naming the value. */
#ifndef ADJOIN_LOSS_LAYERS_H
#define ADJOIN_LOSS_LAYERS_H

#include <stdbool.h>
#include <stdint.h>

#include "adjoin/decomposition.h"
#include "adjoin/layer.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef enum adj_loss_kind {
  ADJ_LOSS_L1 = 0,
  ADJ_LOSS_MSE = 1,
  ADJ_LOSS_BCE = 2,
  ADJ_LOSS_BCE_WITH_LOGITS = 3,
  ADJ_LOSS_KL_DIV = 4,
  ADJ_LOSS_POISSON_NLL = 5,
  ADJ_LOSS_NLL = 6,
} adj_loss_kind;

typedef enum adj_loss_reduction {
  ADJ_LOSS_MEAN = 0, /* PyTorch's default */
  ADJ_LOSS_SUM = 1,
  ADJ_LOSS_NONE = 2,
  ADJ_LOSS_BATCHMEAN = 3,
} adj_loss_reduction;

typedef struct adj_loss_layer_config {
  adj_dtype dtype;
  adj_loss_kind kind;
  adj_loss_reduction reduction;
  const adj_decomposition *input; /* any layout; NLL: (N, C) */
  int root;                       /* base rank holding the reduced output */
  bool log_target;                /* KL divergence: the target is a log-probability */
  bool poisson_linear_input;      /* Poisson NLL: x is the rate, not its log (log_input=False) */
  bool poisson_full;              /* Poisson NLL: add the Stirling term */
  double poisson_eps;             /* Poisson NLL with a linear input; 0 means PyTorch's 1e-8 */
} adj_loss_layer_config;

/* Collective on the input decomposition's base communicator.  Errors on every
 * rank: an unknown kind or reduction, BATCHMEAN for a loss other than KL
 * divergence, NLL on an input not of rank 2 or NONE with the classes split,
 * root outside the communicator. */
int adj_loss_layer_create(const adj_loss_layer_config *config, adj_layer **layer);

/* This worker's block of the target (shaped like its input block, the layer's
 * dtype), copied.  Collective: a value outside the loss's domain on any rank
 * fails on every rank. */
int adj_loss_layer_set_target(adj_layer *layer, const adj_tensor *target);
/* NLL: the class index of each sample of this worker's batch rows (count =
 * its input block's batch extent), copied; each in [0, C).  Collective. */
int adj_loss_layer_set_labels(adj_layer *layer, const int64_t *labels, int64_t count);

/* Only the first `count` samples of the batch count from the next forward
 * on, 0 <= count <= N (N until set): the rest are padding, add nothing to
 * the loss (reduction NONE: their entries are 0) and get a zero gradient,
 * and the means divide by what counts (MEAN: count x the elements of one
 * sample; BATCHMEAN and NLL's MEAN: count).  So a short last batch trains
 * exactly like a batch of `count` while every layer keeps its batch size,
 * as xent_layer.h's labels do.  Not collective: every rank passes the same
 * count.  ADJ_ERR_ARG for a count outside [0, N] or a layer that is not a
 * loss layer. */
int adj_loss_layer_set_count(adj_layer *layer, int64_t count);

/* The kind and reduction (either pointer may be NULL) of a loss layer;
 * ADJ_ERR_ARG when layer is not one.  Not collective. */
int adj_loss_layer_describe(const adj_layer *layer, adj_loss_kind *kind, adj_loss_reduction *reduction);

/* The global loss of the last forward (reduced losses), the same on every rank
 * of the base communicator; 0 for reduction NONE. */
double adj_loss_layer_value(const adj_layer *layer);

/* "l1", "mse", "bce", "bce_with_logits", "kl_div", "poisson_nll", "nll". */
const char *adj_loss_kind_name(adj_loss_kind kind);

ADJ_END_DECLS

#endif

/* t543: the trainer with every loss, classification and regression, with
 * targets wherever the loss layer needs them and the loss wherever it is.
 *
 * The network: an affine layer 5 -> 4 on a batch x feature grid of the ranks
 * (1x1, 2x1, 3x1, 2x2), a sigmoid before BCE, then the loss: softmax
 * cross-entropy with its root on the LAST rank, NLL (labels of each worker's
 * batch rows), and the elementwise losses with a (N, 4) target array read
 * block by block (L1, MSE with reduction sum, BCE, BCE with logits, KL
 * divergence with batchmean, Poisson NLL).  10 samples in batches of 6: the
 * second batch is padded.
 *
 * For each loss, float64:
 *  - distributed equals sequential: two epochs of SGD from the same start on
 *    every rank count and its sequential twin (on MPI_COMM_SELF); the epoch
 *    losses, correct counts and final parameters agree to 1e-12;
 *  - padding counts for nothing: the loss of the data set evaluated in
 *    batches of 6 (one padded) equals it evaluated in one batch of 10;
 *  - NLL counts the same correct samples as cross-entropy on the same
 *    scores (their affine layers start alike);
 *  - data that do not fit are refused by name: arrays for a classification
 *    loss, labels for an elementwise one, more classes than scores, inputs
 *    or targets of another shape, reduction none, no loss layer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/affine_layer.h"
#include "adjoin/loss_layers.h"
#include "adjoin/pointwise_layer.h"
#include "adjoin/xent_layer.h"
#include "harness.h"

enum { N = 10, B = 6, F = 5, G = 4, EPOCHS = 2 };

typedef struct loss_case {
  const char *name;
  bool xent;
  adj_loss_kind kind;
  adj_loss_reduction reduction;
  bool sigmoid; /* BCE takes probabilities */
} loss_case;

static const loss_case cases[] = {
    {"cross-entropy (root: last rank)", true, 0, 0, false},
    {"nll mean", false, ADJ_LOSS_NLL, ADJ_LOSS_MEAN, false},
    {"l1 mean", false, ADJ_LOSS_L1, ADJ_LOSS_MEAN, false},
    {"mse sum", false, ADJ_LOSS_MSE, ADJ_LOSS_SUM, false},
    {"bce mean (after a sigmoid)", false, ADJ_LOSS_BCE, ADJ_LOSS_MEAN, true},
    {"bce_with_logits mean", false, ADJ_LOSS_BCE_WITH_LOGITS, ADJ_LOSS_MEAN, false},
    {"kl_div batchmean", false, ADJ_LOSS_KL_DIV, ADJ_LOSS_BATCHMEAN, false},
    {"poisson_nll mean", false, ADJ_LOSS_POISSON_NLL, ADJ_LOSS_MEAN, false},
};

static bool classifies(const loss_case *c) { return c->xent || c->kind == ADJ_LOSS_NLL; }

/* The batch x feature grid of the input for `size` ranks. */
static void grid(int size, int *pb, int *pf) {
  *pb = size == 4 ? 2 : size;
  *pf = size == 4 ? 2 : 1;
}

/* affine [sigmoid] loss on comm, the input on a pb x pf grid. */
static int build(MPI_Comm comm, const loss_case *c, int64_t batch, adj_layer **net) {
  int size, pb, pf;
  MPI_Comm_size(comm, &size);
  grid(size, &pb, &pf);
  adj_decomposition *in = NULL;
  adj_layer *layers[3] = {NULL, NULL, NULL};
  int n = 0;
  int status = adj_decomposition_create_on_first_ranks(comm, 2, (const int[]){pb, pf}, (const int64_t[]){batch, F}, &in);
  adj_affine_layer_config ac = {.dtype = ADJ_FLOAT64, .input = in, .in_features = F, .out_features = G};
  if (!status) status = adj_affine_layer_create(&ac, &layers[n++]);
  const adj_decomposition *scores = status ? NULL : adj_layer_output_layout(layers[0]);
  if (!status && c->sigmoid) {
    adj_activation_layer_config sc = {.dtype = ADJ_FLOAT64, .input = scores, .activation = {.kind = ADJ_SIGMOID}};
    status = adj_activation_layer_create(&sc, &layers[n++]);
    if (!status) scores = adj_layer_output_layout(layers[1]);
  }
  if (!status && c->xent)
    status = adj_xent_layer_create(&(adj_xent_layer_config){.dtype = ADJ_FLOAT64, .input = scores, .root = size - 1},
                                   &layers[n++]);
  else if (!status)
    status = adj_loss_layer_create(&(adj_loss_layer_config){.dtype = ADJ_FLOAT64, .kind = c->kind,
                                                            .reduction = c->reduction, .input = scores, .root = 0},
                                   &layers[n++]);
  if (!status) status = adj_network_create("t543", n, layers, net);
  if (!status) status = adj_network_init_uniform(*net, 543);
  for (int i = 0; i < 3; i++) adj_layer_destroy(&layers[i]);
  adj_decomposition_destroy(&in);
  return status;
}

/* Inputs (N, features) and either labels in [0, classes) or, with classes
 * 0, targets (N, width) in (0, 1). */
static adj_dataset *data_shaped(adj_test *t, int64_t features, int classes, int64_t width) {
  adj_tensor x, y;
  ADJ_TEST_OK(t, adj_tensor_create(&x, ADJ_FLOAT64, 2, (const int64_t[]){N, features}));
  if (classes) ADJ_TEST_OK(t, adj_tensor_create(&y, ADJ_INT64, 1, (const int64_t[]){N}));
  else ADJ_TEST_OK(t, adj_tensor_create(&y, ADJ_FLOAT64, 2, (const int64_t[]){N, width}));
  for (int64_t i = 0; i < adj_tensor_volume(&x); i++) adj_tensor_set(&x, i, sin(0.7 * (double)i + 0.3));
  for (int64_t i = 0; i < adj_tensor_volume(&y); i++)
    if (classes) adj_tensor_set_int(&y, i, (i * 7 + 1) % classes);
    else adj_tensor_set(&y, i, 0.5 + 0.4 * cos(1.3 * (double)i));
  adj_dataset *ds = NULL;
  ADJ_TEST_OK(t, adj_dataset_from_arrays(&x, &y, classes, &ds));
  adj_tensor_destroy(&x), adj_tensor_destroy(&y);
  return ds;
}

static adj_dataset *data_for(adj_test *t, const loss_case *c) { return data_shaped(t, F, classifies(c) ? G : 0, G); }

typedef struct trained {
  adj_layer *net;
  adj_optimizer *opt;
  adj_trainer *trainer;
  adj_train_stats epochs[EPOCHS];
} trained;

static int train(MPI_Comm comm, const loss_case *c, adj_dataset *data, trained *r) {
  *r = (trained){0};
  int status = build(comm, c, B, &r->net);
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_SGD, .learning_rate = 0.1};
  if (!status) status = adj_optimizer_create(r->net, &oc, &r->opt);
  adj_trainer_config tc = {.network = r->net, .optimizer = r->opt, .train = data, .seed = 5};
  if (!status) status = adj_trainer_create(&tc, &r->trainer);
  for (int e = 0; !status && e < EPOCHS; e++) status = adj_trainer_run(r->trainer, -1, NULL, NULL, &r->epochs[e]);
  return status;
}

static void trained_destroy(trained *r) {
  adj_trainer_destroy(&r->trainer);
  adj_optimizer_destroy(&r->opt);
  adj_layer_destroy(&r->net);
}

static double rel(double a, double b) { return fabs(a - b) / fmax(fmax(fabs(a), fabs(b)), 1e-300); }

/* Largest relative difference of the gathered parameters (rank 0; 0
 * elsewhere), adj_test_max_rel_diff's measure. */
static double parameter_diff(adj_test *t, adj_layer *dist, adj_layer *seq) {
  double worst = 0;
  for (int i = 0; i < adj_layer_parameter_count(dist); i++) {
    const adj_parameter *p = adj_layer_parameter(dist, i);
    int64_t zeros[ADJ_MAX_RANK] = {0};
    adj_tensor global;
    ADJ_TEST_OK(t, adj_tensor_create(&global, ADJ_FLOAT64, adj_decomposition_rank(p->layout),
                                     t->rank == 0 ? adj_decomposition_global_shape(p->layout) : zeros));
    ADJ_TEST_OK(t, adj_layer_get_parameter(dist, i, 0, &global));
    if (t->rank == 0) worst = fmax(worst, adj_test_max_rel_diff(&global, &adj_layer_parameter(seq, i)->value));
    adj_tensor_destroy(&global);
  }
  return worst;
}

static void distributed_equals_sequential(adj_test *t, const loss_case *c, adj_dataset *data) {
  trained dist, seq;
  ADJ_TEST_OK(t, train(t->comm, c, data, &dist));
  ADJ_TEST_OK(t, train(MPI_COMM_SELF, c, data, &seq));
  double worst = 0;
  int64_t correct_diff = 0;
  for (int e = 0; e < EPOCHS; e++) {
    worst = fmax(worst, rel(dist.epochs[e].loss, seq.epochs[e].loss));
    correct_diff += llabs(dist.epochs[e].correct - seq.epochs[e].correct);
  }
  double params = dist.trainer && seq.trainer ? parameter_diff(t, dist.net, seq.net) : 1;
  bool ok = t->rank != 0 || (worst <= 1e-12 && params <= 1e-12 && correct_diff == 0 &&
                             dist.epochs[0].classification == classifies(c));
  ADJ_TEST_CHECK(t, ok, "%s: epoch losses differ by %.3g, parameters by %.3g, correct counts by %lld", c->name, worst,
                 params, (long long)correct_diff);
  adj_test_report(t, "%-32s %d ranks vs sequential: loss %.12f -> %.12f (rel diff %.2g), parameters rel diff %.2g%s",
                  c->name, t->size, dist.epochs[0].loss, dist.epochs[EPOCHS - 1].loss, worst, params,
                  classifies(c) ? ", correct counts equal" : "");
  trained_destroy(&dist), trained_destroy(&seq);
}

/* The data set's loss in batches of `batch` from the same start. */
static int evaluate(MPI_Comm comm, const loss_case *c, adj_dataset *data, int64_t batch, adj_train_stats *stats) {
  adj_layer *net = NULL;
  adj_optimizer *opt = NULL;
  adj_trainer *trainer = NULL;
  int status = build(comm, c, batch, &net);
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_SGD, .learning_rate = 0.1};
  if (!status) status = adj_optimizer_create(net, &oc, &opt);
  adj_trainer_config tc = {.network = net, .optimizer = opt, .train = data, .seed = 5};
  if (!status) status = adj_trainer_create(&tc, &trainer);
  if (!status) status = adj_trainer_evaluate(trainer, data, stats);
  adj_trainer_destroy(&trainer), adj_optimizer_destroy(&opt), adj_layer_destroy(&net);
  return status;
}

static void padding_counts_for_nothing(adj_test *t, const loss_case *c, adj_dataset *data) {
  adj_train_stats padded, whole;
  ADJ_TEST_OK(t, evaluate(t->comm, c, data, B, &padded));
  ADJ_TEST_OK(t, evaluate(t->comm, c, data, N, &whole));
  double diff = rel(padded.loss, whole.loss);
  ADJ_TEST_CHECK(t, t->rank != 0 || (diff <= 1e-12 && padded.correct == whole.correct && padded.samples == N),
                 "%s: loss %.17g in batches of %d, %.17g in one batch of %d", c->name, padded.loss, B, whole.loss, N);
  adj_test_report(t, "%-32s batches of %d (one padded) vs one of %d: loss %.12f vs %.12f (rel diff %.2g)", c->name, B,
                  N, padded.loss, whole.loss, diff);
}

/* A trainer over data that do not fit its network, refused on every rank
 * with both sides named. */
static void expect_refusal(adj_test *t, const char *what, adj_layer *net, adj_dataset *data, const char *phrase) {
  adj_optimizer *opt = NULL;
  adj_trainer *trainer = NULL;
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_SGD, .learning_rate = 0.1};
  ADJ_TEST_OK(t, adj_optimizer_create(net, &oc, &opt));
  adj_trainer_config tc = {.network = net, .optimizer = opt, .train = data, .seed = 5};
  int status = adj_trainer_create(&tc, &trainer);
  adj_test_expect_error(t, what, status, ADJ_TEST_ANY_ERROR, phrase);
  ADJ_TEST_CHECK(t, trainer == NULL, "%s: a refused trainer was left behind", what);
  adj_trainer_destroy(&trainer);
  adj_optimizer_destroy(&opt);
}

static void refusals(adj_test *t) {
  static const loss_case none = {"mse none", false, ADJ_LOSS_MSE, ADJ_LOSS_NONE, false};
  adj_layer *xent = NULL, *nll = NULL, *mse = NULL, *unreduced = NULL;
  ADJ_TEST_OK(t, build(t->comm, &cases[0], B, &xent));
  ADJ_TEST_OK(t, build(t->comm, &cases[1], B, &nll));
  ADJ_TEST_OK(t, build(t->comm, &cases[3], B, &mse));
  ADJ_TEST_OK(t, build(t->comm, &none, B, &unreduced));
  adj_dataset *labels = data_shaped(t, F, G, 0), *many = data_shaped(t, F, 7, 0), *arrays = data_shaped(t, F, 0, G);
  adj_dataset *wide = data_shaped(t, F + 1, G, 0), *narrow = data_shaped(t, F, 0, G - 1);
  if (xent && nll && mse && unreduced && labels && many && arrays && wide && narrow) {
    expect_refusal(t, "arrays for cross-entropy", xent, arrays, "takes class labels but the targets (memory)");
    expect_refusal(t, "arrays for NLL", nll, arrays, "takes class labels but the targets (memory)");
    expect_refusal(t, "7 classes for 4 scores", xent, many, "the data set has 7 classes but the loss");
    expect_refusal(t, "labels for MSE", mse, labels, "compares with target arrays but the targets (memory)");
    expect_refusal(t, "6 features for 5", mse, wide, "the network takes samples of shape [5] but the inputs (memory)");
    expect_refusal(t, "3 targets for 4 outputs", mse, narrow, "compares samples of shape [4] but the targets (memory)");
    expect_refusal(t, "reduction none", unreduced, arrays, "keeps one loss per element (reduction none)");
    adj_layer *affine = adj_network_layer(mse, 0), *bare = NULL;
    ADJ_TEST_OK(t, adj_network_create("no loss", 1, &affine, &bare));
    if (bare) expect_refusal(t, "no loss layer", bare, arrays, "is not a loss layer");
    adj_layer_destroy(&bare);
  }
  adj_dataset_destroy(&labels), adj_dataset_destroy(&many), adj_dataset_destroy(&arrays);
  adj_dataset_destroy(&wide), adj_dataset_destroy(&narrow);
  adj_layer_destroy(&xent), adj_layer_destroy(&nll), adj_layer_destroy(&mse), adj_layer_destroy(&unreduced);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t543-train-losses");
  adj_train_stats xent = {0}, nll = {0};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    adj_dataset *data = data_for(&t, &cases[k]);
    if (!data) continue;
    distributed_equals_sequential(&t, &cases[k], data);
    padding_counts_for_nothing(&t, &cases[k], data);
    if (classifies(&cases[k])) ADJ_TEST_OK(&t, evaluate(t.comm, &cases[k], data, B, k == 0 ? &xent : &nll));
    adj_dataset_destroy(&data);
  }
  ADJ_TEST_CHECK(&t, t.rank != 0 || (xent.correct == nll.correct && xent.classification && nll.classification),
                 "NLL counts %lld correct, cross-entropy %lld on the same scores", (long long)nll.correct,
                 (long long)xent.correct);
  adj_test_report(&t, "NLL and cross-entropy count the same %lld of %d samples correct on the same scores",
                  (long long)nll.correct, N);
  refusals(&t);
  return adj_test_finish(&t);
}

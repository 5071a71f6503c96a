/* Distributed equals sequential for the batch norm encoder-decoder
 * (networks/encdec.net), in each spatial layout that needs more than half the ranks
 * (2x1 and 1x2 on 2, 3x1 and 2x2 on 4, 2x2 and 3x2 on 6):
 *  - one forward and backward on the same padded batch from the same global
 *    parameters: loss and every gathered gradient within
 *    adj_test_random_sum_tolerance of the network's longest sum, float64 and
 *    float32 (batch statistics reduced over the grid);
 *  - 5 Adam steps in float64 through the trainer on the same shuffled
 *    batches, then an evaluation (running statistics): parameters and running
 *    statistics within adj_test_training_tolerance of the 5 steps, the same
 *    training and test losses and counts,
 *    and the evaluation left the running statistics as they were. */
#include <math.h>

#include "net_check.h"

enum { BATCH = 6, STEPS = 5, SAMPLES = STEPS * BATCH - 2 };

/* Forward and backward of one padded batch, the same on every layout. */
static int one_pass(adj_layer *net, double *loss) {
  adj_tensor x = {0}, y = {0}, dy = {0}, dx = {0};
  adj_rng *rng = NULL;
  int status = adj_decomposition_create_local(adj_layer_input_layout(net), adj_layer_dtype(net), &x);
  if (!status) status = adj_decomposition_create_local(adj_layer_output_layout(net), adj_layer_dtype(net), &y);
  if (!status) status = adj_decomposition_create_local(adj_layer_output_layout(net), adj_layer_dtype(net), &dy);
  if (!status) status = adj_decomposition_create_local(adj_layer_input_layout(net), adj_layer_dtype(net), &dx);
  if (!status) status = adj_rng_create(421, &rng);
  if (!status) adj_rng_fill_uniform(rng, &x, 0, 1);
  const int64_t labels[BATCH] = {3, 1, 4, 1, 5, 9};
  if (!status) status = adj_xent_layer_set_labels(adj_network_build_loss(net), labels, BATCH - 1);
  adj_layer_zero_grad(net);
  if (!status) status = adj_layer_forward(net, &x, &y);
  for (int64_t e = 0; e < adj_tensor_volume(&dy); e++) adj_tensor_set(&dy, e, 1);
  if (!status) status = adj_layer_backward(net, &dy, &dx);
  *loss = adj_tensor_volume(&y) ? adj_tensor_get(&y, 0) : 0;
  adj_rng_destroy(&rng);
  adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&dy), adj_tensor_destroy(&dx);
  return status;
}

static void compare_gradients(adj_test *t, const char *layout, adj_dtype dtype) {
  adj_layer *seq = NULL, *dist = NULL;
  adj_network_build_options o = {.dtype = dtype, .batch = BATCH};
  ADJ_TEST_OK(t, nc_build_network("encdec", "sequential", &o, &seq));
  ADJ_TEST_OK(t, nc_build_network("encdec", layout, &o, &dist));
  if (seq && dist) {
    double ls = 0, ld = 0;
    ADJ_TEST_OK(t, adj_network_init_uniform(seq, 4210));
    ADJ_TEST_OK(t, adj_network_init_uniform(dist, 4210));
    ADJ_TEST_OK(t, one_pass(seq, &ls));
    ADJ_TEST_OK(t, one_pass(dist, &ld));
    double diff = nc_gradient_diff(dist, seq), loss_diff = fabs(ld - ls) / fmax(1, fabs(ls));
    double tolerance = adj_test_random_sum_tolerance(dtype, nc_reduction_length(BATCH));
    adj_test_report(t, "%-4s vs sequential, %s, %d ranks, one pass (batch %d, last padded): loss %.10f vs %.10f "
                    "(rel diff %.3e), gradients max rel diff %.3e", layout, adj_dtype_name(dtype), t->size, BATCH, ld,
                    ls, loss_diff, diff);
    ADJ_TEST_CHECK(t, diff < tolerance && loss_diff < tolerance && (t->rank != 0 || ls > 0),
                   "%s %s: gradients differ by %.3e, loss by %.3e (tolerance %.0e)", layout, adj_dtype_name(dtype),
                   diff, loss_diff, tolerance);
  }
  adj_layer_destroy(&dist), adj_layer_destroy(&seq);
}

/* Sum of every running statistic this worker holds (0 where it holds none). */
static double running_stats_sum(adj_layer *net) {
  double sum = 0;
  for (int i = 0; i < adj_network_depth(net); i++) {
    adj_tensor mean, var;
    if (!adj_layer_is_batchnorm(adj_network_layer(net, i))) continue;
    adj_batchnorm_layer_running_stats(adj_network_layer(net, i), &mean, &var);
    for (int64_t e = 0; e < adj_tensor_volume(&mean); e++) sum += adj_tensor_get(&mean, e) + adj_tensor_get(&var, e);
  }
  return sum;
}

static void compare_training(adj_test *t, const char *layout, adj_dataset *data) {
  nc_run seq, dist;
  ADJ_TEST_OK(t, nc_run_create_model("encdec", "sequential", ADJ_FLOAT64, BATCH, data, 421, &seq));
  ADJ_TEST_OK(t, nc_run_create_model("encdec", layout, ADJ_FLOAT64, BATCH, data, 421, &dist));
  if (seq.trainer && dist.trainer) {
    adj_train_stats s = {0}, d = {0}, se = {0}, de = {0};
    ADJ_TEST_OK(t, adj_trainer_run(seq.trainer, STEPS, NULL, NULL, &s));
    ADJ_TEST_OK(t, adj_trainer_run(dist.trainer, STEPS, NULL, NULL, &d));
    double before = running_stats_sum(dist.net);
    ADJ_TEST_OK(t, adj_trainer_evaluate(seq.trainer, data, &se));
    ADJ_TEST_OK(t, adj_trainer_evaluate(dist.trainer, data, &de));
    /* Evaluation reads the running statistics and must not update them. */
    ADJ_TEST_CHECK(t, running_stats_sum(dist.net) == before, "%s: evaluation changed the running statistics", layout);
    bool bitwise;
    double diff = nc_parameter_diff(dist.net, seq.net, &bitwise);
    double loss_diff = fabs(d.loss - s.loss) / fmax(1, fabs(s.loss));
    double eval_diff = fabs(de.loss - se.loss) / fmax(1, fabs(se.loss));
    adj_test_report(t, "%-4s vs sequential, float64, %d ranks, %d Adam steps then evaluation: parameters and running "
                    "statistics max rel diff %.3e%s, train loss %.12f vs %.12f, eval loss %.12f vs %.12f", layout,
                    t->size, STEPS, diff, bitwise ? " (bitwise equal)" : "", d.loss, s.loss, de.loss, se.loss);
    double tol = adj_test_training_tolerance(ADJ_FLOAT64, nc_reduction_length(BATCH), STEPS);
    ADJ_TEST_CHECK(t, diff < tol, "%s: parameters or running statistics differ by %.3e (tolerance %.1e)", layout,
                   diff, tol);
    ADJ_TEST_CHECK(t, t->rank != 0 || (loss_diff < tol && eval_diff < tol && d.correct == s.correct &&
                                       de.correct == se.correct && d.samples == SAMPLES),
                   "%s: train loss %.15g vs %.15g, eval loss %.15g vs %.15g, correct %lld vs %lld", layout, d.loss,
                   s.loss, de.loss, se.loss, (long long)d.correct, (long long)s.correct);
  }
  nc_run_destroy(&dist), nc_run_destroy(&seq);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t421-encdec-dist-vs-seq");
  if (t.size < 2) return adj_test_skip(&t, "no distributed layout fits a single rank");
  adj_dataset *data = nc_synthetic(SAMPLES, 4211);
  ADJ_TEST_CHECK(&t, data, "cannot build the synthetic data set");
  static const char *const layouts[] = {"2x1", "1x2", "3x1", "2x2", "3x2"};
  for (size_t i = 0; data && i < sizeof layouts / sizeof layouts[0]; i++) {
    /* The grids that need more than half the ranks: each rank count of the
     * test adds its own, and together they cover them all. */
    int ranks = nc_layout_ranks("encdec", layouts[i]);
    if (ranks > t.size || 2 * ranks <= t.size) continue;
    compare_gradients(&t, layouts[i], ADJ_FLOAT64);
    compare_gradients(&t, layouts[i], ADJ_FLOAT32);
    compare_training(&t, layouts[i], data);
  }
  adj_dataset_destroy(&data);
  return adj_test_finish(&t);
}

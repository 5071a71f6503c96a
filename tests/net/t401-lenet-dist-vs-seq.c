/* Distributed equals sequential: LeNet-5 in each distributed layout that fits
 * the ranks and the sequential network start from the same global parameters
 * (adj_network_init_uniform, one seed), see the same shuffled batches
 * (synthetic data, the last batch padded) and take 5 Adam steps in float64;
 * the gathered parameters must then agree within adj_test_training_tolerance
 * (LeNet's longest sum over 5 steps, relative), and so must
 * the training losses and correct counts of the steps. */
#include <math.h>

#include "net_check.h"

enum { BATCH = 8, STEPS = 5, SAMPLES = STEPS * BATCH - 3 };

static void compare(adj_test *t, const char *layout, adj_dataset *data) {
  nc_run seq, dist;
  ADJ_TEST_OK(t, nc_run_create("sequential", ADJ_FLOAT64, BATCH, data, 401, &seq));
  ADJ_TEST_OK(t, nc_run_create(layout, ADJ_FLOAT64, BATCH, data, 401, &dist));
  if (seq.trainer && dist.trainer) {
    bool same_start;
    double start = nc_parameter_diff(dist.net, seq.net, &same_start);
    ADJ_TEST_CHECK(t, same_start, "%s: initial parameters differ from the sequential ones by %.3e", layout, start);
    adj_train_stats s = {0}, d = {0};
    ADJ_TEST_OK(t, adj_trainer_run(seq.trainer, STEPS, NULL, NULL, &s));
    ADJ_TEST_OK(t, adj_trainer_run(dist.trainer, STEPS, NULL, NULL, &d));
    bool bitwise;
    double diff = nc_parameter_diff(dist.net, seq.net, &bitwise);
    double loss_diff = fabs(d.loss - s.loss) / fmax(1, fabs(s.loss));
    adj_test_report(t, "%-6s vs sequential, float64, %d ranks, %d Adam steps (batch %d, last padded): "
                    "parameters max rel diff %.3e%s, mean loss %.12f vs %.12f",
                    layout, t->size, STEPS, BATCH, diff, bitwise ? " (bitwise equal)" : "", d.loss, s.loss);
    double tol = adj_test_training_tolerance(ADJ_FLOAT64, nc_reduction_length(BATCH), STEPS);
    ADJ_TEST_CHECK(t, diff < tol, "%s: parameters differ by %.3e after %d steps (tolerance %.1e)", layout, diff, STEPS,
                   tol);
    ADJ_TEST_CHECK(t, t->rank != 0 || (loss_diff < tol && d.correct == s.correct && d.samples == SAMPLES),
                   "%s: loss %.15g vs %.15g, correct %lld vs %lld, samples %lld", layout, d.loss, s.loss,
                   (long long)d.correct, (long long)s.correct, (long long)d.samples);
  }
  nc_run_destroy(&dist);
  nc_run_destroy(&seq);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t401-lenet-dist-vs-seq");
  adj_dataset *data = nc_synthetic(SAMPLES, 4010);
  ADJ_TEST_CHECK(&t, data, "cannot build the synthetic data set");
  const char *layouts[NC_MAX_LAYOUTS];
  if (data && nc_layouts_fitting(t.size, layouts) < 2) {
    adj_dataset_destroy(&data);
    return adj_test_skip(&t, "no distributed layout fits a single rank");
  }
  for (int i = 1; data && layouts[i]; i++) compare(&t, layouts[i], data);
  adj_dataset_destroy(&data);
  return adj_test_finish(&t);
}

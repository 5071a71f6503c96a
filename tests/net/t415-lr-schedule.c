/* t415: the optimizer's learning-rate schedules (adj_lr_schedule in network.h).
 *  - the rate at chosen steps against the closed form written here: constant
 *    at lr; cosine at lr (1 + cos(pi k / T)) / 2, lr / 2 half-way, 0 at T
 *    and after it;
 *  - whole trajectories: SGD and Adam with every gradient held at 1 move each
 *    parameter by the sum of the scheduled rates (Adam's bias-corrected step
 *    of a constant gradient is 1 / (1 + eps)); the worst relative error is
 *    printed;
 *  - a second optimizer set to step k (as a resumed run is) uses the rate
 *    the first used at step k;
 *  - a cosine schedule over 0 or -3 steps and an unknown schedule are refused
 *    on every rank with the value named, and so is an Adam epsilon that is
 *    negative, NaN or infinite (Adam divides by sqrt(v) + epsilon); a step of
 *    a NULL optimizer fails with ADJ_ERR_ARG.
 * The network is a small 1.5D MLP spread over every rank, so each rank
 * updates its own shard. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "net_check.h"

enum { T = 12 };
static const double LR = 0.01;

/* A 4-5-3 MLP on 2x2 images, the batch over every rank (1.5D, P_r = 1). */
static adj_layer *small_mlp(adj_test *t) {
  adj_layer *net = NULL;
  char grid[32];
  snprintf(grid, sizeof grid, "1x%d", t->size);
  adj_network_build_options o = {.dtype = ADJ_FLOAT64, .batch = 2 * t->size};
  ADJ_TEST_OK(t, nc_build_text("input 1 2 2\nfc out=5\nrelu\nfc out=3\nloss type=xent\n", grid, &o, &net));
  if (net) ADJ_TEST_OK(t, adj_network_init_uniform(net, 415));
  return net;
}

/* The rate of 0-based step k, written independently of the library. */
static double expected_rate(adj_lr_schedule schedule, int64_t k) {
  if (schedule == ADJ_LR_CONSTANT) return LR;
  return k >= T ? 0.0 : LR * 0.5 * (1.0 + cos(3.14159265358979323846 * (double)k / T));
}

static void check_rates(adj_test *t, adj_optimizer *o, adj_lr_schedule schedule) {
  const int64_t at[] = {0, 1, T / 2, T - 1, T, T + 5};
  double worst = 0;
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    adj_optimizer_set_steps(o, at[i]);
    double got = adj_optimizer_learning_rate(o), want = expected_rate(schedule, at[i]);
    worst = fmax(worst, fabs(got - want) / LR);
  }
  adj_optimizer_set_steps(o, T / 2);
  double half = adj_optimizer_learning_rate(o);
  adj_optimizer_set_steps(o, 0);
  adj_test_report(t, "  %s: rates at steps 0, 1, T/2, T-1, T, T+5 off by %.1e of lr; at T/2 %.6g",
                  schedule == ADJ_LR_COSINE ? "cosine" : "constant", worst, half);
  ADJ_TEST_CHECK(t, worst <= 4 * DBL_EPSILON, "rates off by %.3e of lr", worst);
  ADJ_TEST_CHECK(t, schedule != ADJ_LR_COSINE || fabs(half - LR / 2) <= 4 * DBL_EPSILON * LR,
                 "cosine rate half-way %.17g, not lr / 2", half);
}

/* T + 3 steps with every gradient 1; each parameter must move by the sum of the rates. */
static void check_trajectory(adj_test *t, adj_layer *net, adj_optimizer_kind kind, adj_lr_schedule schedule) {
  adj_tensor values, grads;
  ADJ_TEST_OK(t, adj_network_flat_parameters(net, &values, &grads));
  int64_t n = adj_tensor_volume(&values);
  double *w = values.data, *g = grads.data, start[64];
  ADJ_TEST_CHECK(t, n <= 64, "%lld parameters on rank %d: enlarge the test's buffer", (long long)n, t->rank);
  if (n > 64) return;
  memcpy(start, w, (size_t)n * sizeof *w);
  adj_optimizer *o = NULL;
  adj_optimizer_config oc = {.kind = kind, .learning_rate = LR, .lr_schedule = schedule, .lr_total_steps = T};
  ADJ_TEST_OK(t, adj_optimizer_create(net, &oc, &o));
  if (!o) return;
  check_rates(t, o, schedule);
  double moved = 0, per_step = kind == ADJ_OPTIMIZER_ADAM ? 1.0 / (1.0 + 1e-8) : 1.0;
  for (int64_t k = 0; k < T + 3; k++) {
    for (int64_t i = 0; i < n; i++) g[i] = 1.0;
    ADJ_TEST_OK(t, adj_optimizer_step(o));
    moved += expected_rate(schedule, k) * per_step;
  }
  double worst = 0;
  for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((start[i] - w[i]) - moved) / moved);
  adj_test_report(t, "  %s %s: %d steps moved every parameter by %.6g, worst relative error %.1e",
                  kind == ADJ_OPTIMIZER_ADAM ? "Adam" : "SGD", schedule == ADJ_LR_COSINE ? "cosine" : "constant",
                  T + 3, moved, worst);
  ADJ_TEST_CHECK(t, worst <= 1e3 * DBL_EPSILON, "trajectory off by %.3e", worst);
  adj_optimizer_destroy(&o);
  memcpy(w, start, (size_t)n * sizeof *w);
}

/* A run resumed at step k continues the schedule: the rate follows the step count. */
static void check_resume(adj_test *t, adj_layer *net) {
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_SGD, .learning_rate = LR, .lr_schedule = ADJ_LR_COSINE,
                             .lr_total_steps = T};
  adj_optimizer *a = NULL, *b = NULL;
  ADJ_TEST_OK(t, adj_optimizer_create(net, &oc, &a));
  ADJ_TEST_OK(t, adj_optimizer_create(net, &oc, &b));
  if (a && b) {
    for (int k = 0; k < 5; k++) ADJ_TEST_OK(t, adj_optimizer_step(a));
    adj_optimizer_set_steps(b, 5);
    double ra = adj_optimizer_learning_rate(a), rb = adj_optimizer_learning_rate(b);
    adj_test_report(t, "  resumed at step 5: rate %.17g, the uninterrupted run's %.17g", rb, ra);
    ADJ_TEST_CHECK(t, ra == rb && ra == expected_rate(ADJ_LR_COSINE, 5), "resumed rate %.17g, run's %.17g", rb, ra);
  }
  adj_optimizer_destroy(&a), adj_optimizer_destroy(&b);
}

static void check_refusals(adj_test *t, adj_layer *net) {
  adj_optimizer *o = NULL;
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = LR, .lr_schedule = ADJ_LR_COSINE};
  adj_test_expect_error(t, "cosine over 0 steps", adj_optimizer_create(net, &oc, &o), ADJ_ERR_ARG,
                        "cosine schedule over 0 steps");
  oc.lr_total_steps = -3;
  adj_test_expect_error(t, "cosine over -3 steps", adj_optimizer_create(net, &oc, &o), ADJ_ERR_ARG,
                        "cosine schedule over -3 steps");
  oc.lr_schedule = (adj_lr_schedule)7;
  adj_test_expect_error(t, "schedule 7", adj_optimizer_create(net, &oc, &o), ADJ_ERR_ARG,
                        "unknown learning-rate schedule 7");
  ADJ_TEST_CHECK(t, o == NULL, "a refused optimizer was returned");
  /* A zero epsilon means the default 1e-8; a tiny positive one is accepted. */
  const double bad_epsilon[] = {-1e-8, -1.0, NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < sizeof bad_epsilon / sizeof bad_epsilon[0]; i++) {
    adj_optimizer_config adam = {.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = LR, .epsilon = bad_epsilon[i]};
    char label[64], phrase[96];
    snprintf(label, sizeof label, "Adam epsilon %g", bad_epsilon[i]);
    snprintf(phrase, sizeof phrase, "Adam epsilon %g must be finite and not negative", bad_epsilon[i]);
    adj_test_expect_error(t, label, adj_optimizer_create(net, &adam, &o), ADJ_ERR_ARG, phrase);
    ADJ_TEST_CHECK(t, o == NULL, "an optimizer with epsilon %g was returned", bad_epsilon[i]);
    adj_optimizer_destroy(&o);
  }
  ADJ_TEST_OK(t, adj_optimizer_create(net, &(adj_optimizer_config){.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = LR,
                                                                   .epsilon = 1e-300},
                                      &o));
  adj_optimizer_destroy(&o);
  adj_test_expect_error(t, "adj_optimizer_step(NULL)", adj_optimizer_step(NULL), ADJ_ERR_ARG,
                        "adj_optimizer_step: optimizer is NULL");
  ADJ_TEST_OK(t, adj_optimizer_create(net, &(adj_optimizer_config){.kind = ADJ_OPTIMIZER_SGD, .learning_rate = LR}, &o));
  if (o) adj_test_expect_error(t, "adj_optimizer_set_steps(-5)", adj_optimizer_set_steps(o, -5), ADJ_ERR_ARG,
                               "step count -5 is negative");
  adj_optimizer_destroy(&o);
  adj_tensor state[2];
  adj_clear_error();
  int n_state = adj_optimizer_state_buffers(NULL, state);
  adj_test_expect_error(t, "adj_optimizer_state_buffers(NULL)", n_state == -1 ? ADJ_ERR_ARG : ADJ_SUCCESS,
                        ADJ_ERR_ARG, "adj_optimizer_state_buffers: optimizer is NULL");
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t415-lr-schedule");
  adj_layer *net = small_mlp(&t);
  if (net) {
    for (int kind = ADJ_OPTIMIZER_SGD; kind <= ADJ_OPTIMIZER_ADAM; kind++)
      for (int schedule = ADJ_LR_CONSTANT; schedule <= ADJ_LR_COSINE; schedule++)
        check_trajectory(&t, net, (adj_optimizer_kind)kind, (adj_lr_schedule)schedule);
    check_resume(&t, net);
    check_refusals(&t, net);
  }
  adj_layer_destroy(&net);
  return adj_test_finish(&t);
}

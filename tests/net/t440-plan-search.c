/* t440: the per-layer planner (plan_search.h) against brute force, on a
 * machine described by its rates (so every figure is arithmetic, the same
 * on any host):
 *   - without replicas, the dynamic programme's best plans equal the best of
 *     every combination of candidates predicted whole (LeNet-5, the MLP, the
 *     encoder-decoder on 2, 3 and 4 ranks where the combinations are few
 *     enough), so the segments' costs add up exactly to the whole step's;
 *   - with replicas, the list is ordered and each plan's prediction is that
 *     of its placement written as a file and read back;
 *   - a memory budget: no listed plan above it, the best within it equal to
 *     brute force's, none below every plan, and for the MLP a budget below
 *     what data parallelism needs picks a plan that splits more than the
 *     batch;
 *   - refusals: bad ranks, batch, memory; machine files with a missing, bad
 *     or unknown value named by line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *networks_dir;

static const adj_machine rates = {
    .name = "t440",
    .comm = {[ADJ_COMM_P2P] = {2e-6, 1e-9, 2},
             [ADJ_COMM_BROADCAST] = {3e-6, 1.2e-9, 2},
             [ADJ_COMM_REDUCE] = {3e-6, 1.5e-9, 2},
             [ADJ_COMM_ALLREDUCE] = {4e-6, 1e-9, 2},
             [ADJ_COMM_REDUCE_SCATTER] = {6e-6, 0.8e-9, 2},
             [ADJ_COMM_ALLGATHER] = {3e-6, 1e-9, 2}},
    .cores = 4, .baseline = 20 << 20, .flops = 2e10, .bandwidth = 5e9};

static adj_description *read_net(adj_test *t, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.net", networks_dir, name);
  adj_description *d = NULL;
  ADJ_TEST_OK(t, adj_description_read(path, &d));
  return d;
}

static adj_plan_search_options options(int ranks, int64_t batch, bool replicas) {
  return (adj_plan_search_options){.step = {.dtype = ADJ_FLOAT32, .batch = batch, .ranks = ranks, .machine = &rates,
                                            .optimizer = ADJ_OPTIMIZER_ADAM},
                                   .keep = 4, .replicas = replicas, .family = ADJ_PLAN_FAMILY_ALL};
}

static bool close_enough(double a, double b) { return fabs(a - b) <= 1e-12 * fmax(fabs(a), fabs(b)); }

/* The dynamic programme's list against every combination's. */
static void check_against_brute_force(adj_test *t, const adj_description *d, adj_plan_search_options o,
                                      const char *what) {
  adj_plan_list dp = {0}, all = {0};
  ADJ_TEST_OK(t, adj_plan_search(d, &o, &dp));
  o.exhaustive = true;
  ADJ_TEST_OK(t, adj_plan_search(d, &o, &all));
  ADJ_TEST_CHECK(t, dp.n == all.n, "%s: %d plans by the search, %d by brute force", what, dp.n, all.n);
  for (int i = 0; i < dp.n && i < all.n; i++)
    ADJ_TEST_CHECK(t, close_enough(dp.plans[i].prediction.step, all.plans[i].prediction.step),
                   "%s: plan %d: %.17g s by the search, %.17g s by brute force (%s | %s)", what, i + 1,
                   dp.plans[i].prediction.step, all.plans[i].prediction.step, dp.plans[i].summary,
                   all.plans[i].summary);
  if (dp.n && all.n)
    adj_test_report(t, "  %-34s best %.6e s of %lld combinations (%lld predictions by the search): %s", what,
                    dp.plans[0].prediction.step, (long long)all.evaluated, (long long)dp.evaluated,
                    dp.plans[0].summary);
  adj_plan_list_free(&dp);
  adj_plan_list_free(&all);
}

static void test_brute_force(adj_test *t) {
  static const struct { const char *net; int ranks; } cases[] = {
      {"lenet5", 2}, {"lenet5", 3}, {"mlp", 2}, {"mlp", 3}, {"mlp", 4}, {"encdec", 2}, {"encdec", 3}, {"encdec", 4}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    adj_description *d = read_net(t, cases[c].net);
    if (!d) continue;
    char what[64];
    snprintf(what, sizeof what, "%s, %d ranks, batch 16", cases[c].net, cases[c].ranks);
    check_against_brute_force(t, d, options(cases[c].ranks, 16, false), what);
    adj_description_destroy(&d);
  }
}

/* A plan's placement as a file, read back, resolved and predicted afresh. */
static double predict_written(adj_test *t, const adj_description *d, const adj_plan *plan, adj_step_options step) {
  char path[] = "/tmp/t440-XXXXXX";
  int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  ADJ_TEST_CHECK(t, f, "cannot make a temporary file");
  if (!f) return -1;
  ADJ_TEST_OK(t, adj_plan_write_placement(d, plan, f));
  fclose(f);
  adj_placement *p = NULL;
  adj_network_layout layout = {0};
  adj_step_prediction again = {0};
  adj_step_model *model = NULL;
  ADJ_TEST_OK(t, adj_placement_read(path, &p));
  remove(path);
  if (!p) return -1;
  step.replicas = p->replicas ? p->replicas : 1;
  ADJ_TEST_OK(t, adj_placement_resolve(d, p, (step.batch + step.replicas - 1) / step.replicas, &layout));
  ADJ_TEST_OK(t, adj_step_model_create(&step, &model));
  if (model && layout.layers) ADJ_TEST_OK(t, adj_step_model_predict(model, d, &layout, &again));
  double step_time = again.step;
  adj_step_prediction_free(&again);
  adj_step_model_destroy(&model);
  adj_network_layout_free(&layout);
  adj_placement_destroy(&p);
  return step_time;
}

static void test_replicas_and_files(adj_test *t) {
  adj_description *d = read_net(t, "lenet5");
  if (!d) return;
  adj_plan_search_options o = options(4, 32, true);
  adj_plan_list list = {0};
  ADJ_TEST_OK(t, adj_plan_search(d, &o, &list));
  ADJ_TEST_CHECK(t, list.n == 4, "lenet5 on 4 ranks lists %d plans, not 4", list.n);
  for (int i = 0; i < list.n; i++) {
    const adj_plan *p = &list.plans[i];
    ADJ_TEST_CHECK(t, i == 0 || p->prediction.step >= list.plans[i - 1].prediction.step,
                   "plan %d (%.9e s) is listed after a slower one", i + 1, p->prediction.step);
    double again = predict_written(t, d, p, o.step);
    ADJ_TEST_CHECK(t, close_enough(again, p->prediction.step), "plan %d: %.17g s listed, %.17g s read back (%s)",
                   i + 1, p->prediction.step, again, p->summary);
    adj_test_report(t, "  lenet5 4 ranks plan %d %.6e s, read back %.6e s: %s", i + 1, p->prediction.step, again,
                    p->summary);
  }
  adj_plan_list_free(&list);
  adj_description_destroy(&d);
}

/* The memory of a uniform placement, as the model predicts it. */
static double uniform_memory(adj_test *t, const adj_description *d, const adj_uniform_placement *u,
                             adj_step_options step) {
  adj_placement *p = NULL;
  adj_network_layout layout = {0};
  adj_step_model *model = NULL;
  adj_step_prediction pred = {0};
  step.replicas = u->replicas ? u->replicas : 1;
  ADJ_TEST_OK(t, adj_placement_uniform(d, u, &p));
  ADJ_TEST_OK(t, adj_placement_resolve(d, p, (step.batch + step.replicas - 1) / step.replicas, &layout));
  ADJ_TEST_OK(t, adj_step_model_create(&step, &model));
  if (model && layout.layers) ADJ_TEST_OK(t, adj_step_model_predict(model, d, &layout, &pred));
  double memory = (double)pred.memory_total;
  adj_step_prediction_free(&pred);
  adj_step_model_destroy(&model);
  adj_network_layout_free(&layout);
  adj_placement_destroy(&p);
  return memory;
}

/* True when some segment splits more than the batch. */
static bool splits_model_or_domain(const adj_placement *p) {
  for (int k = 0; k < p->n; k++) {
    const adj_layer_placement *pl = &p->entries[k].placement;
    if (pl->kind == ADJ_PLACE_GRID && pl->grid[0] > 1) return true;
    if (pl->kind == ADJ_PLACE_PARTS && pl->out_parts > 1) return true;
    for (int j = 1; pl->kind == ADJ_PLACE_PARTS && j < pl->ndim; j++)
      if (pl->parts[j] > 1) return true;
  }
  return false;
}

static void test_budget(adj_test *t) {
  adj_description *d = read_net(t, "mlp");
  if (!d) return;
  adj_plan_search_options o = options(4, 64, true);
  /* Data parallelism: one replica per rank. */
  double dp = uniform_memory(t, d, &(adj_uniform_placement){.replicas = 4}, o.step);
  o.memory = (int64_t)dp - 1;
  adj_plan_list list = {0};
  ADJ_TEST_OK(t, adj_plan_search(d, &o, &list));
  ADJ_TEST_CHECK(t, list.n > 0, "mlp: no plan within %lld bytes, below data parallelism's %.0f", (long long)o.memory,
                 dp);
  for (int i = 0; i < list.n; i++)
    ADJ_TEST_CHECK(t, list.plans[i].prediction.memory_total <= o.memory, "plan %d needs %lld bytes over the budget %lld",
                   i + 1, (long long)list.plans[i].prediction.memory_total, (long long)o.memory);
  if (list.n) {
    ADJ_TEST_CHECK(t, splits_model_or_domain(list.plans[0].placement), "mlp: the plan within the budget splits only "
                   "the batch: %s", list.plans[0].summary);
    adj_test_report(t, "  mlp 4 ranks: data parallelism needs %.2f MiB; within %.2f MiB: %s (%.2f MiB, %.6e s)",
                    dp / (1 << 20), (double)o.memory / (1 << 20), list.plans[0].summary,
                    (double)list.plans[0].prediction.memory_total / (1 << 20), list.plans[0].prediction.step);
  }
  adj_plan_list_free(&list);
  /* The same budget without replicas: the search equals brute force. */
  o.replicas = false;
  check_against_brute_force(t, d, o, "mlp, 4 ranks, within the budget");
  /* Below every plan: an empty list, not an error. */
  o.memory = 1 << 20;
  ADJ_TEST_OK(t, adj_plan_search(d, &o, &list));
  ADJ_TEST_CHECK(t, list.n == 0, "mlp: %d plans within 1 MiB, below the baseline", list.n);
  adj_test_report(t, "  mlp within 1 MiB: %d plans, %lld dropped by the budget", list.n, (long long)list.over_budget);
  adj_plan_list_free(&list);
  adj_description_destroy(&d);
}

static void expect_machine_refused(adj_test *t, const char *text, const char *phrase) {
  adj_machine m;
  adj_test_expect_error(t, text, adj_machine_parse(text, "m.machine", &m), ADJ_ERR_ARG, phrase);
}

static void test_refusals(adj_test *t) {
  adj_description *d = read_net(t, "mlp");
  if (!d) return;
  adj_plan_list list;
  adj_plan_search_options o = options(0, 64, true);
  adj_test_expect_error(t, "0 ranks", adj_plan_search(d, &o, &list), ADJ_ERR_ARG, "0 ranks");
  o = options(2, 0, true);
  adj_test_expect_error(t, "batch 0", adj_plan_search(d, &o, &list), ADJ_ERR_ARG, "batch 0");
  o = options(2, 8, true);
  o.memory = -5;
  adj_test_expect_error(t, "memory -5", adj_plan_search(d, &o, &list), ADJ_ERR_ARG, "memory -5");
  adj_description_destroy(&d);
  expect_machine_refused(t, "p2p 1e-6 1e-9\n", "m.machine:1: p2p: needs alpha");
  expect_machine_refused(t, "p2p 1e-6 1e-9 2\nmemory -3GiB\n", "m.machine:2: memory");
  expect_machine_refused(t, "p2p 1e-6 1e-9 2\ncores 0\n", "m.machine:2: cores '0'");
  expect_machine_refused(t, "p2p 1e-6 1e-9 2\n\nflops fast\n", "m.machine:3: flops 'fast'");
  expect_machine_refused(t, "p2p 1e-6 1e-9 2\nwarp 9\n", "m.machine:2: warp: unknown key");
  expect_machine_refused(t, "flops 1e9\n", "no p2p line");
  adj_machine m;
  ADJ_TEST_OK(t, adj_machine_parse("# a machine\nmachine x\np2p 1e-6 2e-10 2\nallreduce 3e-6 1e-9 4\nmemory 2GiB\n"
                                   "flops 1e12\nbandwidth 1e11\n",
                                   "good.machine", &m));
  ADJ_TEST_CHECK(t, m.memory == (int64_t)2 << 30 && m.comm[ADJ_COMM_ALLREDUCE].ranks == 4 && m.flops == 1e12,
                 "the good machine file read as memory %lld, all-reduce ranks %d, flops %g", (long long)m.memory,
                 m.comm[ADJ_COMM_ALLREDUCE].ranks, m.flops);
  /* A pattern without a line of its own costs what p2p does; a group of one nothing. */
  ADJ_TEST_CHECK(t, adj_machine_comm_time(&m, ADJ_COMM_BROADCAST, 2, 1000, 0) == 1e-6 + 2e-10 * 1000,
                 "broadcast on p2p's line: %.17g", adj_machine_comm_time(&m, ADJ_COMM_BROADCAST, 2, 1000, 0));
  ADJ_TEST_CHECK(t, adj_machine_comm_time(&m, ADJ_COMM_ALLREDUCE, 1, 1e6, 0) == 0, "a group of one costs time");
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t440-plan-search");
  networks_dir = argc > 1 ? argv[1] : "networks";
  test_brute_force(&t);
  test_replicas_and_files(&t);
  test_budget(&t);
  test_refusals(&t);
  return adj_test_finish(&t);
}

/* t412: the calibration of plan.h.  The calibration file round trip (both
 * fits, and the ping-pong-only files older tools wrote), the planner pricing
 * collectives with the all-reduce fit and halo exchanges with the ping-pong
 * fit (every class's time recomputed from its counted words and messages),
 * the all-reduce sweep on every rank of the run (positive figures, the same
 * on every rank), and bad input: non-positive or missing values, an unknown
 * key, an incomplete all-reduce fit, one rank, zero repeats. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "adjoin/plan.h"
#include "harness.h"

/* Rank 0 writes, everyone reads the same file, so messages agree. */
static void write_text(adj_test *t, const char *path, const char *text) {
  FILE *f = t->rank == 0 ? fopen(path, "w") : NULL;
  if (f) fputs(text, f), fclose(f);
  MPI_Barrier(t->comm);
}

static void save(adj_test *t, const char *path, const adj_plan_calibration *cal) {
  if (t->rank == 0) ADJ_TEST_OK(t, adj_plan_calibration_save(path, cal));
  MPI_Barrier(t->comm);
}

static void test_round_trip(adj_test *t, const char *path) {
  adj_plan_calibration in = {.alpha = 2.5e-6, .beta = 1.25e-10, .collective_alpha = 7.5e-6,
                             .collective_beta = 3.125e-10, .collective_ranks = 4},
                       out;
  save(t, path, &in);
  ADJ_TEST_OK(t, adj_plan_calibration_load(path, &out));
  adj_test_report(t, "  round trip: alpha %g beta %g, all-reduce alpha %g beta %g on %d ranks", out.alpha, out.beta,
                  out.collective_alpha, out.collective_beta, out.collective_ranks);
  ADJ_TEST_CHECK(t,
                 out.alpha == in.alpha && out.beta == in.beta && out.collective_alpha == in.collective_alpha &&
                     out.collective_beta == in.collective_beta && out.collective_ranks == in.collective_ranks,
                 "round trip changed the calibration");
  double alpha = 0, beta = 0;
  ADJ_TEST_OK(t, adj_plan_calibration_read(path, &alpha, &beta));
  ADJ_TEST_CHECK(t, alpha == in.alpha && beta == in.beta, "read of a new file gave %g, %g", alpha, beta);
  /* A file of the ping-pong alone, as adjoin-plan wrote before the sweep. */
  MPI_Barrier(t->comm);
  if (t->rank == 0) ADJ_TEST_OK(t, adj_plan_calibration_write(path, 4e-6, 5e-10));
  MPI_Barrier(t->comm);
  ADJ_TEST_OK(t, adj_plan_calibration_load(path, &out));
  ADJ_TEST_CHECK(t, out.alpha == 4e-6 && out.beta == 5e-10 && out.collective_ranks == 0 && out.collective_alpha == 0,
                 "ping-pong-only file gave alpha %g beta %g, all-reduce on %d ranks", out.alpha, out.beta,
                 out.collective_ranks);
  adj_plan_config c = {.collective_alpha = 9, .collective_beta = 9};
  adj_plan_calibration_apply(&out, &c);
  ADJ_TEST_CHECK(t, c.alpha == 4e-6 && c.collective_alpha == 0 && c.collective_beta == 0,
                 "a ping-pong-only calibration left collective constants %g, %g", c.collective_alpha,
                 c.collective_beta);
}

/* Every class's time is messages x alpha + words x word x beta with the
 * class's constants: the halo's the ping-pong's, the others the all-reduce's. */
static void test_planner_uses_fit(adj_test *t) {
  adj_plan_network *net = NULL;
  ADJ_TEST_OK(t, adj_plan_network_parse("input 1 8 8\nconv c out=2 k=3 p=1\nfc a out=12\nfc b out=4\n", "t412", &net));
  if (!net) return;
  adj_plan_calibration cal = {.alpha = 1, .beta = 1, .collective_alpha = 10, .collective_beta = 100,
                              .collective_ranks = 4};
  adj_plan_config c = {.mode = ADJ_PLAN_ADJOIN, .p = 4, .batch = 4, .word_bytes = 1};
  adj_plan_calibration_apply(&cal, &c);
  adj_plan_result r = {0}, plain = {0};
  ADJ_TEST_OK(t, adj_plan_evaluate(net, &c, 2, 2, &r));
  c.collective_alpha = c.collective_beta = 0;
  ADJ_TEST_OK(t, adj_plan_evaluate(net, &c, 2, 2, &plain));
  for (int i = 0; r.layers && plain.layers && i < r.n; i++)
    for (int k = 0; k < ADJ_PLAN_COLLECTIVES; k++) {
      const adj_plan_layer_cost *l = &r.layers[i];
      bool halo = k == ADJ_PLAN_HALO;
      double want = l->messages[k] * (halo ? 1 : 10) + l->words[k] * (halo ? 1 : 100);
      if (l->words[k] == 0) continue;
      adj_test_report(t, "  %s %-10s: %4g messages, %5g words: %9g s (alpha-beta only: %6g s)",
                      net->layers[i].name, adj_plan_collective_name(k), l->messages[k], l->words[k], l->time[k],
                      plain.layers[i].time[k]);
      ADJ_TEST_CHECK(t, l->time[k] == want, "%s %s: %g s, by the fit %g", net->layers[i].name,
                     adj_plan_collective_name(k), l->time[k], want);
      ADJ_TEST_CHECK(t, halo == (l->time[k] == plain.layers[i].time[k]), "%s %s: all-reduce fit %s the time",
                     net->layers[i].name, adj_plan_collective_name(k), halo ? "changed" : "did not change");
    }
  ADJ_TEST_CHECK(t, r.time[ADJ_PLAN_HALO] > 0 && r.time[ADJ_PLAN_WEIGHTS] > 0 && r.time[ADJ_PLAN_FWD_GATHER] > 0,
                 "the case must have halo, weight and gather terms");
  adj_plan_result_free(&r), adj_plan_result_free(&plain);
  c.collective_alpha = -1, c.collective_beta = 1;
  adj_test_expect_error(t, "collective alpha -1", adj_plan_evaluate(net, &c, 2, 2, &r), ADJ_ERR_ARG,
                        "collective alpha -1 and beta 1 must both be > 0");
  c.collective_alpha = 1, c.collective_beta = 0;
  adj_test_expect_error(t, "collective beta 0 with alpha 1", adj_plan_evaluate(net, &c, 2, 2, &r), ADJ_ERR_ARG,
                        "collective alpha 1 and beta 0 must both be > 0");
  adj_plan_network_destroy(&net);
}

static void test_bad_files(adj_test *t, const char *path) {
  static const struct {
    const char *text, *phrase;
  } cases[] = {
      {"alpha 1e-6\nbeta 1e-9\nallreduce_alpha -2\nallreduce_beta 1e-9\nallreduce_ranks 4\n",
       "line 3: allreduce_alpha -2 must be > 0"},
      {"alpha 1e-6\nbeta 1e-9\nallreduce_alpha 2e-6\nallreduce_beta 1e-9\nallreduce_ranks 1\n",
       "line 5: allreduce_ranks 1 must be > 0 (an integer >= 2)"},
      {"alpha 1e-6\nbeta 1e-9\nallreduce_alpha 2e-6\n",
       "needs allreduce_alpha, allreduce_beta and allreduce_ranks together"},
      {"alpha 1e-6\nbeta 1e-9\ngamma 3\n", "line 3: unknown key 'gamma'"},
      {"alpha 1e-6\n", "lacks beta"},
      {"alpha 1e-6 s\nbeta 1e-9\n", "line 1 is not 'key value'"},
      {"beta 0\nalpha 1e-6\n", "line 1: beta 0 must be > 0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_text(t, path, cases[i].text);
    adj_plan_calibration cal;
    char label[64];
    snprintf(label, sizeof label, "calibration file case %zu", i);
    adj_test_expect_error(t, label, adj_plan_calibration_load(path, &cal), ADJ_ERR_IO, cases[i].phrase);
  }
  adj_plan_calibration cal;
  adj_test_expect_error(t, "missing calibration file", adj_plan_calibration_load("t412-no-such-file", &cal),
                        ADJ_ERR_IO, "calibration file t412-no-such-file: cannot open it");
}

/* The sweep itself: figures only this machine knows, so the checks are that
 * they are positive, finite and agreed on by every rank. */
static void test_sweep(adj_test *t) {
  double alpha = 0, beta = 0;
  adj_test_expect_error(t, "repeats 0", adj_plan_calibrate_allreduce(t->comm, 0, &alpha, &beta), ADJ_ERR_ARG,
                        t->size < 2 ? "needs at least 2 ranks, the communicator has 1" : "repeats 0 must be >= 1");
  if (t->size < 2) return;
  ADJ_TEST_OK(t, adj_plan_calibrate_allreduce(t->comm, 3, &alpha, &beta));
  double mine[2] = {alpha, -alpha}, most[2];
  MPI_Allreduce(mine, most, 2, MPI_DOUBLE, MPI_MAX, t->comm);
  adj_test_report(t, "  all-reduce sweep on %d ranks: alpha %.3e s, beta %.3e s/B (under load: not a figure to keep)",
                  t->size, alpha, beta);
  ADJ_TEST_CHECK(t, alpha > 0 && beta > 0 && isfinite(alpha) && isfinite(beta), "fit alpha %g beta %g", alpha, beta);
  ADJ_TEST_CHECK(t, most[0] == -most[1], "ranks disagree on alpha: %g ... %g", -most[1], most[0]);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t412-plan-calibration");
  adj_test_report(&t, "t412 on %d ranks: calibration files, the planner's collective constants, the sweep", t.size);
  char path[64];
  snprintf(path, sizeof path, "t412-calibration-np%d.txt", t.size); /* rank counts run side by side */
  test_round_trip(&t, path);
  test_planner_uses_fit(&t);
  test_bad_files(&t, path);
  test_sweep(&t);
  MPI_Barrier(t.comm);
  if (t.rank == 0) remove(path);
  return adj_test_finish(&t);
}

/* t410: the cost model of plan.h on cases computed by hand: paper-mode
 * formulas (001 eq. 8, eq. 9's domain terms, 000 eq. 4) and adjoin mode on a
 * 2 x 3 grid with fc 8 -> 12 -> 4 and batch 6, and a conv layer on 2 x 2;
 * with alpha = beta = 1 and one-byte words the times are plain word and
 * message counts.  Then the shipped networks (AlexNet's 60,965,224
 * parameters), the best-grid search, and bad input: a grid that does not
 * multiply to P, more workers than rows, an unknown layer type, a malformed
 * line, non-positive alpha and beta (also from a calibration file); padding
 * modes (mode=) parsed, charged by hand, and refused where PyTorch refuses. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "adjoin/plan.h"
#include "harness.h"

/* The longest sum of the model's figures checked here: a network's total over
 * its layers' phases (a few layers, a handful of phases each). */
enum { PLAN_TERMS = 16 };

static void expect_near(adj_test *t, const char *what, double got, double want) {
  adj_test_report(t, "  %-48s %.6f (by hand %.6f)", what, got, want);
  ADJ_TEST_CHECK(t, fabs(got - want) <= adj_test_sum_tolerance(ADJ_FLOAT64, PLAN_TERMS) * fmax(1.0, fabs(want)),
                 "%s: %.17g, by hand %.17g", what, got, want);
}

static adj_plan_network *parse(adj_test *t, const char *text) {
  adj_plan_network *net = NULL;
  ADJ_TEST_OK(t, adj_plan_network_parse(text, "t410", &net));
  return net;
}

static const adj_plan_config unit = {.p = 6, .batch = 6, .alpha = 1, .beta = 1, .word_bytes = 1};

static void test_fc_by_hand(adj_test *t) {
  adj_plan_network *net = parse(t, "input 8\nfc a out=12\nfc b out=4\n");
  if (!net) return;
  adj_plan_result r;
  adj_plan_config c = unit;
  /* 001 eq. 8 on 2 x 3, B = 6, so B/Pc = 2, (Pr-1)/Pr = 1/2, (Pc-1)/Pc = 2/3,
   * ceil(log2 2) = 1, ceil(log2 3) = 2.  |W_a| = 96 + 12, |W_b| = 48 + 4. */
  c.mode = ADJ_PLAN_PAPER;
  ADJ_TEST_OK(t, adj_plan_evaluate(net, &c, 2, 3, &r));
  if (r.layers) {
    expect_near(t, "paper a: gather 1 + 2*(1/2)*12", r.layers[0].time[ADJ_PLAN_FWD_GATHER], 1 + 2 * 0.5 * 12);
    expect_near(t, "paper a: no dX (first layer)", r.layers[0].time[ADJ_PLAN_BWD_DX], 0);
    expect_near(t, "paper a: weights 2*(2 + (2/3)*108/2)", r.layers[0].time[ADJ_PLAN_WEIGHTS], 2 * (2 + 2.0 / 3 * 54));
    expect_near(t, "paper b: gather 1 + 2*(1/2)*4", r.layers[1].time[ADJ_PLAN_FWD_GATHER], 1 + 2 * 0.5 * 4);
    expect_near(t, "paper b: dX 2*(1 + 2*(1/2)*12)", r.layers[1].time[ADJ_PLAN_BWD_DX], 2 * (1 + 2 * 0.5 * 12));
    expect_near(t, "paper b: weights 2*(2 + (2/3)*52/2)", r.layers[1].time[ADJ_PLAN_WEIGHTS], 2 * (2 + 2.0 / 3 * 26));
    expect_near(t, "paper total", r.total, 13 + 76 + 5 + 26 + 2 * (2 + 2.0 / 3 * 26));
  }
  adj_plan_result_free(&r);
  /* 000 eq. 4: 3 (alpha log Pr + B (Pr-1)/Pr d_i / Pc) + 2 (alpha log Pc +
   * (Pc-1)/Pc |W_i| / Pr) for every layer, the first included. */
  c.mode = ADJ_PLAN_PAPER_EQ4;
  ADJ_TEST_OK(t, adj_plan_evaluate(net, &c, 2, 3, &r));
  if (r.layers) {
    expect_near(t, "eq4 a: 3*(1 + 6*(1/2)*12/3) + 2*(2 + (2/3)*54)", r.layers[0].total,
                3 * (1 + 6 * 0.5 * 12 / 3) + 2 * (2 + 2.0 / 3 * 54));
    expect_near(t, "eq4 b: 3*(1 + 6*(1/2)*4/3) + 2*(2 + (2/3)*26)", r.layers[1].total,
                3 * (1 + 6 * 0.5 * 4 / 3) + 2 * (2 + 2.0 / 3 * 26));
  }
  adj_plan_result_free(&r);
  /* adjoin: gather of the input, (8 - 4) features x 2 samples received; the
   * reduce-scatter of b's input (12 - 6) x 2; weights and bias broadcast and
   * summed over P_c = 3 (2 log2 3 latency each way): rows 6 (a), 2 (b). */
  c.mode = ADJ_PLAN_ADJOIN;
  ADJ_TEST_OK(t, adj_plan_evaluate(net, &c, 2, 3, &r));
  if (r.layers) {
    expect_near(t, "adjoin a: gather 1 + 4*2", r.layers[0].time[ADJ_PLAN_FWD_GATHER], 1 + 4 * 2);
    expect_near(t, "adjoin a: no reduce-scatter (first layer)", r.layers[0].time[ADJ_PLAN_BWD_DX], 0);
    expect_near(t, "adjoin a: weights 2*(2 + 6*8) + 2*(2 + 6)", r.layers[0].time[ADJ_PLAN_WEIGHTS],
                2 * (2 + 6 * 8) + 2 * (2 + 6));
    expect_near(t, "adjoin b: gather 1 + 6*2", r.layers[1].time[ADJ_PLAN_FWD_GATHER], 1 + 6 * 2);
    expect_near(t, "adjoin b: reduce-scatter 1 + 6*2", r.layers[1].time[ADJ_PLAN_BWD_DX], 1 + 6 * 2);
    expect_near(t, "adjoin b: weights 2*(2 + 2*12) + 2*(2 + 2)", r.layers[1].time[ADJ_PLAN_WEIGHTS],
                2 * (2 + 2 * 12) + 2 * (2 + 2));
  }
  adj_plan_result_free(&r);
  /* 1 x 6 and 6 x 1 are the pure cases: no P_r terms, or no P_c terms. */
  c.mode = ADJ_PLAN_PAPER;
  ADJ_TEST_OK(t, adj_plan_evaluate(net, &c, 1, 6, &r));
  if (r.layers)
    expect_near(t, "paper 1x6 = eq. 4 of 001 (batch)", r.total, 2 * (3 + 5.0 / 6 * 108) + 2 * (3 + 5.0 / 6 * 52));
  adj_plan_result_free(&r);
  ADJ_TEST_CHECK(t, adj_plan_evaluate(net, &c, 6, 1, &r) == ADJ_ERR_SIZE, "6x1 splits b's 4 rows over 6 workers");
  adj_test_report(t, "  6x1 on fc b (4 rows): %s", adj_last_error());
  ADJ_TEST_CHECK(t, strstr(adj_last_error(), "layer b has 4 output rows") != NULL, "message: %s", adj_last_error());
  adj_plan_network_destroy(&net);
}

static void test_conv_by_hand(adj_test *t) {
  adj_plan_network *net = parse(t, "input 2 6 6\nconv c out=4 k=3 p=1\n");
  if (!net) return;
  adj_plan_config c = {
      .mode = ADJ_PLAN_PAPER, .conv = ADJ_PLAN_CONV_DOMAIN, .p = 4, .batch = 16, .alpha = 1, .beta = 1, .word_bytes = 1};
  adj_plan_result r;
  ADJ_TEST_OK(t, adj_plan_evaluate(net, &c, 2, 2, &r));
  /* Model: gather 1 + 8*(1/2)*144, weights 2*(1 + (1/2)*76/2) = 617.
   * Domain (eq. 9): halos 1 + 8*6*2*1 and 1 + 8*6*4*1, weights over P = 4:
   * 2*(2 + (3/4)*76) = 408, so eq. 9 picks the domain. */
  if (r.layers) {
    ADJ_TEST_CHECK(t, r.layers[0].domain, "eq. 9 should pick the domain split (408 < 617)");
    expect_near(t, "paper conv: halo (1 + 96) + (1 + 192)", r.layers[0].time[ADJ_PLAN_HALO], 97 + 193);
    expect_near(t, "paper conv: weights over P 2*(2 + 57)", r.layers[0].time[ADJ_PLAN_WEIGHTS], 118);
  }
  adj_plan_result_free(&r);
  c.batch = 4; /* now the model split is cheaper: 145 + 40 = 185 < 25 + 49 + 118 */
  ADJ_TEST_OK(t, adj_plan_evaluate(net, &c, 2, 2, &r));
  if (r.layers) {
    ADJ_TEST_CHECK(t, !r.layers[0].domain, "eq. 9 should pick the model split (185 < 192)");
    expect_near(t, "paper conv B=4: model 145 + 40", r.total, 185);
  }
  adj_plan_result_free(&r);
  /* adjoin: rows 0-2 | 3-5, a 3x3 kernel needs one row from the neighbour;
   * forward and adjoint halo, 2 messages each; weights and biases (76 words
   * in all) broadcast and summed over all 4 by two operators (log2 4 = 2
   * latency terms each, each way). */
  c.mode = ADJ_PLAN_ADJOIN;
  ADJ_TEST_OK(t, adj_plan_evaluate(net, &c, 2, 2, &r));
  if (r.layers) {
    expect_near(t, "adjoin conv: halo 2*(2 + 2*1*6*2)", r.layers[0].time[ADJ_PLAN_HALO], 2 * (2 + 2 * 1 * 6 * 2));
    expect_near(t, "adjoin conv: weights 2*(2 + 2 + 76)", r.layers[0].time[ADJ_PLAN_WEIGHTS], 2 * (2 + 2 + 76));
  }
  adj_plan_result_free(&r);
  adj_plan_network_destroy(&net);
  /* A 2x2 pool of stride 2 on 8 rows over 2 workers (4 | 4) needs no row of
   * a neighbour: the halo operator posts nothing, so no latency either. */
  net = parse(t, "input 2 8 8\npool p k=2 s=2\n");
  if (!net) return;
  ADJ_TEST_OK(t, adj_plan_evaluate(net, &c, 2, 2, &r));
  if (r.layers) expect_near(t, "adjoin pool, no halo rows: no halo time", r.layers[0].time[ADJ_PLAN_HALO], 0);
  adj_plan_result_free(&r);
  adj_plan_network_destroy(&net);
}

static void test_networks(adj_test *t, const char *dir) {
  static const struct {
    const char *file;
    int64_t parameters;
  } shipped[] = {{"alexnet.net", 60965224}, {"lenet5.net", 61706}, {"mlp.net", 535818}};
  for (size_t i = 0; i < sizeof shipped / sizeof shipped[0]; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, shipped[i].file);
    adj_plan_network *net = NULL;
    ADJ_TEST_OK(t, adj_plan_network_read(path, &net));
    if (!net) continue;
    int64_t n = adj_plan_network_parameters(net);
    adj_test_report(t, "  %-12s %2d layers, %lld parameters", net->name, net->n, (long long)n);
    ADJ_TEST_CHECK(t, n == shipped[i].parameters, "%s: %lld parameters, expected %lld", path, (long long)n,
                   (long long)shipped[i].parameters);
    adj_plan_network_destroy(&net);
  }
  /* AlexNet with Cori's constants, conv layers on the fc layers' grid (001
   * Fig. 6): at P = 512 every mode picks a mixed grid, and paper mode (eq. 9)
   * the paper's 16 x 32; at P = 8, 000 eq. 4 picks pure batch parallelism. */
  char path[512];
  snprintf(path, sizeof path, "%s/alexnet.net", dir);
  adj_plan_network *net = NULL;
  ADJ_TEST_OK(t, adj_plan_network_read(path, &net));
  if (!net) return;
  for (int mode = ADJ_PLAN_PAPER_EQ4; mode <= ADJ_PLAN_ADJOIN; mode++) {
    /* Paper mode with eq. 9's per-layer choice of model or domain for convs. */
    adj_plan_config c = {.mode = (adj_plan_mode)mode, .p = 8, .batch = 2048, .alpha = 2e-6, .beta = 1 / 6e9,
                         .conv = mode == ADJ_PLAN_PAPER ? ADJ_PLAN_CONV_DOMAIN : ADJ_PLAN_CONV_SAME};
    adj_plan_result small = {0}, large = {0};
    ADJ_TEST_OK(t, adj_plan_best(net, &c, &small));
    c.p = 512;
    ADJ_TEST_OK(t, adj_plan_best(net, &c, &large));
    adj_test_report(t, "  alexnet %-9s best at P=8: %dx%d, at P=512: %dx%d", adj_plan_mode_name(c.mode), small.p_r,
                    small.p_c, large.p_r, large.p_c);
    ADJ_TEST_CHECK(t, large.p_r > 1 && large.p_c > 1, "%s: best grid at P=512 %dx%d is not mixed",
                   adj_plan_mode_name(c.mode), large.p_r, large.p_c);
    if (mode == ADJ_PLAN_PAPER_EQ4)
      ADJ_TEST_CHECK(t, small.p_r == 1, "eq4: best grid at P=8 is %dx%d, not 1x8", small.p_r, small.p_c);
    if (mode == ADJ_PLAN_PAPER)
      ADJ_TEST_CHECK(t, large.p_r == 16 && large.p_c == 32, "paper: best grid at P=512 is %dx%d, not 16x32",
                     large.p_r, large.p_c);
    adj_plan_result_free(&small), adj_plan_result_free(&large);
  }
  adj_plan_network_destroy(&net);
}

static void expect_error(adj_test *t, const char *what, int status, const char *phrase) {
  adj_test_expect_error(t, what, status, ADJ_TEST_ANY_ERROR, phrase);
}

static void test_errors(adj_test *t) {
  adj_plan_network *net = parse(t, "input 8\nfc a out=12\nfc b out=4\n");
  if (!net) return;
  adj_plan_result r;
  adj_plan_config c = unit;
  expect_error(t, "grid 4x2 for P = 6", adj_plan_evaluate(net, &c, 4, 2, &r), "grid 4x2 has 8 workers but P = 6");
  c.alpha = 0;
  expect_error(t, "alpha 0", adj_plan_evaluate(net, &c, 2, 3, &r), "alpha 0 must be > 0");
  c.alpha = 1, c.beta = -1;
  expect_error(t, "beta -1", adj_plan_evaluate(net, &c, 2, 3, &r), "beta -1 must be > 0");
  adj_plan_network_destroy(&net);
  adj_plan_network *bad = NULL;
  expect_error(t, "unknown layer type", adj_plan_network_parse("input 8\nlstm a out=3\n", "x.net", &bad),
               "x.net:2: unknown layer type 'lstm'");
  expect_error(t, "malformed option", adj_plan_network_parse("input 8\nfc a out=x3\n", "x.net", &bad),
               "x.net:2: fc a out 'x3' is not an integer");
  expect_error(t, "no key=value", adj_plan_network_parse("input 8\nfc a 3\n", "x.net", &bad),
               "option '3' is not key=value");
  expect_error(t, "layer before input", adj_plan_network_parse("fc a out=3\n", "x.net", &bad),
               "x.net:1: layer before the input line");
  expect_error(t, "kernel larger than input", adj_plan_network_parse("input 1 4 4\nconv c out=2 k=7\n", "x.net", &bad),
               "x.net:2: conv c: kernel 7 (dilation 1) exceeds the padded input 4");
  expect_error(t, "missing file", adj_plan_network_read("/nonexistent/x.net", &bad), "network file /nonexistent/x.net: cannot open it");
  ADJ_TEST_CHECK(t, bad == NULL, "a failed parse must leave no network");
  /* Calibration files: a round trip, then a non-positive alpha. */
  double alpha = 0, beta = 0;
  ADJ_TEST_OK(t, adj_plan_calibration_write("t410-calibration.txt", 2.5e-6, 1.25e-10));
  ADJ_TEST_OK(t, adj_plan_calibration_read("t410-calibration.txt", &alpha, &beta));
  ADJ_TEST_CHECK(t, alpha == 2.5e-6 && beta == 1.25e-10, "calibration round trip gave %g, %g", alpha, beta);
  FILE *f = fopen("t410-calibration.txt", "w");
  if (f) fputs("alpha -1\nbeta 2e-10\n", f), fclose(f);
  expect_error(t, "calibration alpha -1", adj_plan_calibration_read("t410-calibration.txt", &alpha, &beta),
               "alpha -1 must be > 0");
  remove("t410-calibration.txt");
}

/* Padding modes in adjoin mode, the conv of test_conv_by_hand on 2 x 2 with
 * batch 4: reflect and replicate copy rows the boundary workers hold (rows
 * 1 and 4, blocks 0-2 | 3-5): no extra message; circular copies row 5 to
 * worker 0 and row 0 to worker 1: one more message each way, 1 row of 6 x 2
 * channels x 2 samples. */
static void test_padding_modes(adj_test *t) {
  static const struct {
    const char *mode;
    adj_padding_mode parsed;
    double extra;
  } modes[] = {{"zeros", ADJ_PAD_ZEROS, 0}, {"reflect", ADJ_PAD_REFLECT, 0}, {"replicate", ADJ_PAD_REPLICATE, 0},
               {"circular", ADJ_PAD_CIRCULAR, 2 * (1 + 2 * 1 * 6 * 2)}};
  adj_plan_config c = {
      .mode = ADJ_PLAN_ADJOIN, .conv = ADJ_PLAN_CONV_DOMAIN, .p = 4, .batch = 4, .alpha = 1, .beta = 1, .word_bytes = 1};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    char text[96], what[64];
    snprintf(text, sizeof text, "input 2 6 6\nconv c out=4 k=3 p=1 mode=%s\n", modes[i].mode);
    adj_plan_network *net = parse(t, text);
    if (!net) continue;
    ADJ_TEST_CHECK(t, net->layers[0].padding_mode == modes[i].parsed, "mode=%s parsed as %d", modes[i].mode,
                   (int)net->layers[0].padding_mode);
    adj_plan_result r;
    ADJ_TEST_OK(t, adj_plan_evaluate(net, &c, 2, 2, &r));
    snprintf(what, sizeof what, "adjoin conv mode=%s: halo 52 + %g", modes[i].mode, modes[i].extra);
    if (r.layers) expect_near(t, what, r.layers[0].time[ADJ_PLAN_HALO], 2 * (2 + 2 * 1 * 6 * 2) + modes[i].extra);
    adj_plan_result_free(&r);
    adj_plan_network_destroy(&net);
  }
  adj_plan_network *bad = NULL;
  expect_error(t, "mode=symmetric", adj_plan_network_parse("input 1 6 6\npool q k=2 mode=symmetric\n", "x.net", &bad),
               "x.net:2: pool q mode 'symmetric' is not one of zeros, reflect, replicate, circular");
  expect_error(t, "reflect p=4 of 4", adj_plan_network_parse("input 1 4 6\nconv c out=2 k=5 p=4 mode=reflect\n",
                                                              "x.net", &bad),
               "x.net:2: conv c: reflect padding 4 must be < the input extent 4");
  expect_error(t, "fc with a mode", adj_plan_network_parse("input 8\nfc a out=3 mode=reflect\n", "x.net", &bad),
               "x.net:2: fc a: unknown option 'mode'");
  ADJ_TEST_CHECK(t, bad == NULL, "a failed parse must leave no network");
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t410-plan");
  ADJ_TEST_CHECK(&t, argc >= 2, "usage: t410-plan NETWORKS_DIR");
  test_fc_by_hand(&t);
  test_conv_by_hand(&t);
  test_padding_modes(&t);
  if (argc >= 2) test_networks(&t, argv[1]);
  test_errors(&t);
  return adj_test_finish(&t);
}

/* t325: the phantom size API and the energy / communication model.
 *
 * Sizes: the paper's Table I model sizes (n = 16384, L = 2, its six (p, k)
 * pairs, printed in millions) against numbers this test computes from the
 * layer shapes (p blocks of L (n/p)^2, C k n/p and p-1 D's (n/p) k); per-rank
 * sizes summing to the total at uneven n; eq. 8 as the exact condition for
 * the phantom model to be smaller than the dense one.  Model: Table III's
 * fitted times, the alpha-beta volumes of the specs' section 0, and eqs. 9
 * and 10 (PP communicates less, and costs less energy, below the bound). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "harness.h"

static void test_table1(adj_test *t) {
  static const struct {
    int p, k, pp_millions;
  } rows[] = {{8, 16, 71}, {16, 6, 37}, {32, 4, 21}, {64, 2, 13}, {128, 2, 13}, {256, 4, 36}};
  const int64_t n = 16384, layers = 2, tp_millions = 537;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    int64_t p = rows[i].p, k = rows[i].k, b = n / p;
    /* From the shapes: per rank L (b x b), C (k x b), (p - 1) D (b x k). */
    int64_t per_rank = b * b + k * b + (p - 1) * b * k, want = layers * p * per_rank;
    adj_phantom_size pp = adj_phantom_layer_size(n, n, rows[i].p, k, -1);
    adj_phantom_size tp = adj_tp_layer_size(n, n, rows[i].p, -1);
    int64_t got = layers * pp.weights, got_tp = layers * tp.weights;
    long rounded = lround((double)got / 1e6), rounded_tp = lround((double)got_tp / 1e6);
    adj_test_report(t, "  p = %3d k = %2d: PP %lld (%ld M, paper %d M), +bias %lld; TP %lld (%ld M, paper %lld M)",
                    rows[i].p, rows[i].k, (long long)got, rounded, rows[i].pp_millions,
                    (long long)(got + layers * pp.biases), (long long)got_tp, rounded_tp, (long long)tp_millions);
    ADJ_TEST_CHECK(t, got == want && rounded == rows[i].pp_millions && pp.biases == n,
                   "p = %d k = %d: PP size %lld (%ld M), from the shapes %lld, paper %d M", rows[i].p, rows[i].k,
                   (long long)got, rounded, (long long)want, rows[i].pp_millions);
    ADJ_TEST_CHECK(t, got_tp == layers * n * n && rounded_tp == tp_millions && tp.biases == n,
                   "p = %d: TP size %lld (%ld M), expected %lld (paper %lld M)", rows[i].p, (long long)got_tp,
                   rounded_tp, (long long)(layers * n * n), (long long)tp_millions);
  }
}

/* Uneven widths: per-rank sizes (balanced blocks) sum to the total, which
 * is sum_j n_j^out n_j^in + k n_in + (p - 1) k n_out. */
static void test_uneven(adj_test *t) {
  const int64_t n_in = 1000, n_out = 777, k = 5;
  for (int p = 1; p <= 9; p += 2) {
    adj_phantom_size total = adj_phantom_layer_size(n_in, n_out, p, k, -1);
    int64_t sum = 0, biases = 0, diagonal = 0;
    for (int j = 0; j < p; j++) {
      adj_phantom_size s = adj_phantom_layer_size(n_in, n_out, p, k, j);
      sum += s.weights, biases += s.biases;
      int64_t start, in_j, out_j;
      adj_balanced_block(n_in, p, j, &start, &in_j);
      adj_balanced_block(n_out, p, j, &start, &out_j);
      diagonal += in_j * out_j;
    }
    int64_t want = diagonal + k * n_in + (p - 1) * k * n_out;
    ADJ_TEST_CHECK(t, total.weights == sum && sum == want && biases == n_out && total.biases == n_out,
                   "n %lld->%lld p = %d: total %lld, sum of ranks %lld, from the shapes %lld", (long long)n_in,
                   (long long)n_out, p, (long long)total.weights, (long long)sum, (long long)want);
  }
  adj_phantom_size huge = adj_phantom_layer_size(INT64_C(1) << 40, INT64_C(1) << 40, 1, 1, -1);
  ADJ_TEST_CHECK(t, huge.weights == -1, "an overflowing size returns -1, got %lld", (long long)huge.weights);
}

/* Eq. 8: for n divisible by p, k < (n/p)(1 - 1/p) exactly when the phantom
 * layer has fewer weights than the dense one. */
static void test_bound(adj_test *t) {
  int cases = 0, mismatches = 0;
  for (int64_t n = 12; n <= 60; n += 24)
    for (int p = 1; p <= 6; p++) {
      if (n % p) continue;
      for (int64_t k = 1; k <= n; k++, cases++) {
        bool smaller = adj_phantom_layer_size(n, n, p, k, -1).weights < adj_tp_layer_size(n, n, p, -1).weights;
        if (smaller != adj_phantom_k_within_bound(n, p, k)) mismatches++;
      }
    }
  adj_test_report(t, "  eq. 8 bound against the parameter counts: %d cases, %d mismatches", cases, mismatches);
  ADJ_TEST_CHECK(t, mismatches == 0 && cases > 100, "eq. 8: %d of %d cases disagree", mismatches, cases);
  ADJ_TEST_CHECK(t, adj_phantom_k_within_bound(16, 2, 3) && !adj_phantom_k_within_bound(16, 2, 4),
                 "eq. 8 at n = 16, p = 2: the bound is 4");
}

/* The model's times are closed forms of a few terms: the library and the
 * expressions here may round differently, by a few units of float64's eps
 * relative to the time. */
enum { MODEL_TERMS = 4 };
static bool model_near(double got, double want) {
  return fabs(got - want) <= adj_test_tolerance(ADJ_FLOAT64, MODEL_TERMS, ADJ_TEST_SUM_MULTIPLE) * fabs(want);
}

static void test_model(adj_test *t) {
  adj_comm_model fit = adj_comm_model_table3();
  /* eq. 26 with Table III's all-gather row, microseconds. */
  double ag = adj_comm_time(&fit, ADJ_COLL_ALL_GATHER, 1024, 8), want = 1e-6 * (149.94 * 3 + 2.07e-3 * 1024);
  ADJ_TEST_CHECK(t, model_near(ag, want), "Table III all-gather of 1024 floats on 8 ranks: %.6e s, want %.6e",
                 ag, want);
  ADJ_TEST_CHECK(t, adj_comm_time(&fit, ADJ_COLL_ALL_REDUCE, 1e6, 1) == 0, "a collective on one rank costs 0");
  /* Alpha-beta volumes (specs section 0): all-gather of m floats per rank on
   * p ranks receives (p - 1) m floats; all-reduce of m moves 2 (p-1)/p m. */
  adj_comm_model ab = adj_comm_model_alpha_beta(1e-6, 1e-9, 4);
  double t_ag = adj_comm_time(&ab, ADJ_COLL_ALL_GATHER, 1000, 4), t_ar = adj_comm_time(&ab, ADJ_COLL_ALL_REDUCE, 1000, 4);
  ADJ_TEST_CHECK(t, model_near(t_ag, 2e-6 + 1e-9 * 3 * 1000 * 4) && model_near(t_ar, 2e-6 + 1e-9 * 1.5 * 1000 * 4),
                 "alpha-beta: all-gather %.6e s, all-reduce %.6e s", t_ag, t_ar);
  /* Eqs. 9 and 10 on Table I's shapes (batch 64, A = 560 W, B = 90 W). */
  static const int pairs[][2] = {{8, 16}, {16, 6}, {32, 4}, {64, 2}, {128, 2}, {256, 4}};
  int wins = 0;
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    adj_ffn_shape s = {.n = 16384, .p = pairs[i][0], .k = pairs[i][1], .layers = 2, .batch = 64};
    double e_tp = adj_energy(ADJ_ENERGY_P_BUSY, ADJ_ENERGY_P_IDLE, adj_tp_flops(&s) / 1e11, adj_tp_comm_time(&fit, &s));
    double e_pp = adj_energy(ADJ_ENERGY_P_BUSY, ADJ_ENERGY_P_IDLE, adj_pp_flops(&s) / 1e11, adj_pp_comm_time(&fit, &s));
    wins += adj_pp_comm_time(&fit, &s) < adj_tp_comm_time(&fit, &s) && e_pp < e_tp &&
            adj_pp_message_floats(&s) < adj_tp_message_floats(&s);
    adj_test_report(t, "  p = %3d k = %2d: t_comm TP %.3e s PP %.3e s; e TP %.3e J PP %.3e J (per rank, 100 GFLOP/s)",
                    s.p, (int)s.k, adj_tp_comm_time(&fit, &s), adj_pp_comm_time(&fit, &s), e_tp, e_pp);
  }
  ADJ_TEST_CHECK(t, wins == 6, "eqs. 9-10: PP cheaper in %d of 6 Table I shapes", wins);
  ADJ_TEST_CHECK(t, adj_energy(560, 90, 2, 3) == 560 * 2 + 90 * 3, "e = A t_comp + B t_comm");
}

/* The 1.5D layer on p x 1 (energy.h's mp15): per layer Table III's
 * all-gather and reduce-scatter of n/p N floats, TP's GEMM flops, and the
 * counted floats n N + 2 (p-1)/p n N per rank, from the shapes here. */
static void test_mp15_model(adj_test *t) {
  adj_comm_model fit = adj_comm_model_table3();
  adj_ffn_shape s = {.n = 4096, .p = 4, .k = 16, .layers = 2, .batch = 64};
  double m = 4096.0 / 4 * 64, full = 4096.0 * 64;
  double want_time = 2 * 1e-6 * (149.94 * 2 + 2.07e-3 * m + 145.52 * 2 + 2.40e-3 * m);
  double want_floats = 2 * (full + 2 * 3.0 / 4 * full), got_time = adj_mp15_comm_time(&fit, &s);
  double got_floats = adj_mp15_message_floats(&s);
  adj_test_report(t, "  1.5D 4x1 n = 4096 N = 64 L = 2: t_comm %.6e s (want %.6e), floats/rank %.0f (want %.0f)",
                  got_time, want_time, got_floats, want_floats);
  ADJ_TEST_CHECK(t, model_near(got_time, want_time) && got_floats == want_floats,
                 "mp15 model: t_comm %.6e s floats %.0f, want %.6e and %.0f", got_time, got_floats, want_time,
                 want_floats);
  ADJ_TEST_CHECK(t, adj_mp15_flops(&s) == adj_tp_flops(&s) && adj_mp15_comm_time(&fit, &s) < adj_tp_comm_time(&fit, &s),
                 "mp15 model: TP's flops and less communication than TP");
  s.p = 1;
  ADJ_TEST_CHECK(t, adj_mp15_message_floats(&s) == 2 * full && adj_mp15_comm_time(&fit, &s) == 0,
                 "mp15 model on one rank: the all-gather counts its own chunk, nothing takes time");
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t325-phantom-sizes");
  test_table1(&t);
  test_uneven(&t);
  test_bound(&t);
  test_model(&t);
  test_mp15_model(&t);
  return adj_test_finish(&t);
}

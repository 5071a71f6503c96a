/* t324: the 1.5D affine layer (affine15_layer.h) and an MLP of three of them with
 * ReLU between, on P_r x P_c grids from 1 x 1 to 6 x 1 (1x6, 2x3, 3x2, 6x1 at
 * 6 ranks): Jacobian dot-product test (input, weights and biases at once) and
 * distributed against sequential (outputs, jvps, input and parameter
 * gradients, float64 within dl_tolerance) where the sequential twin is the plain
 * affine layer on one worker.  Extents are odd (7 samples, 11 -> 13 -> 9 -> 7
 * features) so blocks are unequal, and one variant cuts the batch
 * quadratically so some workers hold no sample.  Up to 3 ranks every grid
 * that fits runs (smaller grids leave ranks inactive); above, the grids that
 * use every rank.
 * Then float32, and bad configurations. */
#include <stdio.h>
#include <string.h>

#include "dist_check.h"
#include "adjoin/affine_layer.h"

enum { N = 7, F0 = 11, F1 = 13, F2 = 9, F3 = 7 };

static const int grids[][2] = {{1, 1}, {1, 2}, {2, 1}, {1, 3}, {3, 1}, {2, 2}, {1, 6},
                               {2, 3}, {3, 2}, {6, 1}, {5, 1}, {4, 2}, {2, 4}};

/* x (N, F0) on P_c x P_r over the first P_r P_c ranks; quadratic batch cuts
 * when asked. */
static adj_decomposition *input_layout(adj_test *t, int p_r, int p_c, bool quadratic) {
  int64_t cuts[9]; /* P_c + 1 cut points, P_c <= 8 */
  ADJ_TEST_CHECK(t, p_c <= 8, "P_c %d needs more cut points than the test holds", p_c);
  dl_quadratic_cuts(N, p_c <= 8 ? p_c : 8, cuts);
  return dl_layout(t, 2, (const int64_t[2]){N, F0}, (const int[2]){p_c, p_r}, NULL,
                   (const int64_t *[2]){quadratic ? cuts : NULL, NULL});
}

static int affine15(adj_dtype dtype, const adj_decomposition *in, int64_t f_out, adj_layer **layer) {
  return adj_affine15_layer_create(&(adj_affine15_layer_config){.dtype = dtype, .input = in, .out_features = f_out},
                                   layer);
}

static int affine_seq(const adj_decomposition *in, int64_t f_out, adj_layer **layer) {
  return adj_affine_layer_create(&(adj_affine_layer_config){.dtype = ADJ_FLOAT64,
                                                             .input = in,
                                                             .in_features = adj_decomposition_global_shape(in)[1],
                                                             .out_features = f_out},
                                 layer);
}

static int relu(adj_dtype dtype, const adj_layer *before, adj_layer **layer) {
  return adj_activation_layer_create(&(adj_activation_layer_config){.dtype = dtype,
                                                                    .input = adj_layer_output_layout(before),
                                                                    .activation = {.kind = ADJ_RELU}},
                                     layer);
}

/* affine F0->F1, ReLU, affine F1->F2, ReLU, affine F2->F3: the 1.5D network
 * (adj_test_mlp15), or its sequential twin of plain affine layers. */
static int mlp(adj_dtype dtype, const adj_decomposition *in, bool distributed, adj_layer **net) {
  static const int64_t widths[3] = {F1, F2, F3};
  if (distributed)
    return adj_test_mlp15(dtype, in, 3, widths, net);
  adj_layer *l[5] = {0};
  int status = ADJ_SUCCESS;
  const adj_decomposition *x = in;
  for (int i = 0; i < 3 && !status; i++) {
    status = affine_seq(x, widths[i], &l[2 * i]);
    if (!status && i < 2) status = relu(dtype, l[2 * i], &l[2 * i + 1]);
    if (!status) x = adj_layer_output_layout(l[2 * i + (i < 2)]);
  }
  if (!status) status = adj_network_create("mlp", 5, l, net);
  for (int i = 0; i < 5; i++) adj_layer_destroy(&l[i]);
  return status;
}

static void check_grid(adj_test *t, int p_r, int p_c, bool quadratic) {
  char label[96];
  snprintf(label, sizeof label, "%dx%d N=%d%s", p_r, p_c, N, quadratic ? " quadratic batch" : "");
  if (p_r * p_c > t->size) {
    adj_test_report(t, "  %-52s skipped: needs %d ranks", label, p_r * p_c);
    return;
  }
  adj_decomposition *in = input_layout(t, p_r, p_c, quadratic), *self = dl_self_layout(t, 2, (const int64_t[2]){N, F0});
  adj_layer *dist = NULL, *seq = NULL;
  char text[128];
  if (in) ADJ_TEST_OK(t, affine15(ADJ_FLOAT64, in, F1, &dist));
  ADJ_TEST_OK(t, affine_seq(self, F1, &seq));
  if (dist && seq) {
    snprintf(text, sizeof text, "layer %s %d->%d", label, F0, F1);
    dl_dottest(t, text, dist);
    dl_compare(t, text, dist, seq, 41u);
  }
  adj_layer_destroy(&dist), adj_layer_destroy(&seq);
  if (in) ADJ_TEST_OK(t, mlp(ADJ_FLOAT64, in, true, &dist));
  ADJ_TEST_OK(t, mlp(ADJ_FLOAT64, self, false, &seq));
  if (dist && seq) {
    snprintf(text, sizeof text, "mlp %s %d-%d-%d-%d", label, F0, F1, F2, F3);
    dl_dottest(t, text, dist);
    dl_compare(t, text, dist, seq, 43u);
  }
  adj_layer_destroy(&dist), adj_layer_destroy(&seq);
  adj_decomposition_destroy(&in), adj_decomposition_destroy(&self);
}

/* float32 at its own tolerance on the largest grid of the run. */
static void test_float32(adj_test *t) {
  int p_r = t->size >= 2 ? 2 : 1, p_c = t->size / p_r;
  adj_decomposition *in = input_layout(t, p_r, p_c, false);
  adj_layer *net = NULL;
  if (in) ADJ_TEST_OK(t, mlp(ADJ_FLOAT32, in, true, &net));
  char label[64];
  snprintf(label, sizeof label, "float32 mlp %dx%d", p_r, p_c);
  if (net) dl_dottest(t, label, net);
  adj_layer_destroy(&net);
  adj_decomposition_destroy(&in);
}

static void test_errors(adj_test *t) {
  adj_layer *layer = NULL;
  int p_r = t->size;
  adj_decomposition *in = input_layout(t, p_r, 1, false);
  int status = affine15(ADJ_FLOAT64, in, p_r - 1 > 0 ? p_r - 1 : 0, &layer);
  char phrase[128];
  if (p_r > 1) snprintf(phrase, sizeof phrase, "P_r = %d row workers but only %d output features", p_r, p_r - 1);
  else snprintf(phrase, sizeof phrase, "out_features 0 must be >= 1");
  dl_expect_error(t, "more row workers than output features", status, &layer, phrase);
  adj_decomposition *image = dl_layout(t, 3, (const int64_t[3]){4, 2, 3}, (const int[3]){1, 1, 1}, NULL, NULL);
  status = affine15(ADJ_FLOAT64, image, 3, &layer);
  dl_expect_error(t, "rank-3 input", status, &layer, "the input partition has 3 dimensions");
  status = adj_affine15_layer_create(NULL, &layer);
  dl_expect_error(t, "NULL config", status, &layer, "config is NULL");
  adj_decomposition_destroy(&image);
  adj_decomposition_destroy(&in);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t329-affine15-layer");
  adj_test_report(&t, "t324 on %d ranks (float64 unless noted; grids P_r x P_c)", t.size);
  /* Every grid that fits on up to 3 ranks (so some leave ranks inactive), and
   * beyond that the grids that use every rank, to keep the run short. */
  for (size_t i = 0; i < sizeof grids / sizeof grids[0]; i++)
    if (t.size <= 3 || grids[i][0] * grids[i][1] == t.size) check_grid(&t, grids[i][0], grids[i][1], false);
  check_grid(&t, 2, t.size / 2 > 0 ? t.size / 2 : 1, true);
  check_grid(&t, 1, t.size, true);
  test_float32(&t);
  test_errors(&t);
  return adj_test_finish(&t);
}

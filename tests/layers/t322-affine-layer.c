/* t322: the distributed affine layer, P_fo x P_fi from 1 x 1 to 4 x 2, with
 * and without a partitioned batch and a bias: Jacobian dot-product test
 * (input, weights and bias at once), Taylor test (the map is bilinear in
 * (x, W), so the remainder is exactly second order), distributed against
 * sequential (outputs, jvps, input, weight and bias gradients), and bad
 * configurations.
 *
 * The cases are the battery's table (adjoint_tests/layer_cases.h): extents
 * are prime so blocks are uneven; some cases cut the input so blocks are
 * empty, list the ranks of each partition in a shuffled order, or leave ranks
 * out of every partition (inactive workers).  A case needing more ranks than
 * the run has is skipped and says so. */
#include <stdio.h>
#include <string.h>

#include "dist_check.h"
#include "layer_cases.h"
#include "adjoin/affine_layer.h"

static void check_case(adj_test *t, const adj_affine_case *c) {
  char label[160];
  adj_affine_case_format(label, sizeof label, c);
  int needed = adj_affine_case_ranks(c);
  if (needed > t->size) {
    adj_test_report(t, "  %-52s skipped: needs %d ranks", label, needed);
    return;
  }
  adj_decomposition *input = NULL, *self = dl_self_layout(t, 2, (const int64_t[2]){c->n, c->f_in});
  ADJ_TEST_OK(t, adj_affine_case_input(MPI_COMM_WORLD, c, &input));
  adj_layer *dist = NULL, *seq = NULL;
  if (input) ADJ_TEST_OK(t, adj_affine_case_create(c, ADJ_FLOAT64, input, false, &dist));
  ADJ_TEST_OK(t, adj_affine_case_create(c, ADJ_FLOAT64, self, true, &seq));
  if (dist && seq) {
    dl_dottest(t, label, dist);
    dl_taylor(t, label, dist, DL_TAYLOR_SMOOTH);
    dl_compare(t, label, dist, seq, 31u);
  }
  adj_layer_destroy(&dist), adj_layer_destroy(&seq);
  adj_decomposition_destroy(&input), adj_decomposition_destroy(&self);
}

/* float32 at its own tolerance, on the last case with first-rank lists that fits. */
static void test_float32(adj_test *t) {
  const adj_affine_case *c = &adj_affine_cases[0];
  for (int i = 0; i < adj_affine_case_count; i++)
    if (!*adj_affine_cases[i].work && adj_affine_case_ranks(&adj_affine_cases[i]) <= t->size) c = &adj_affine_cases[i];
  adj_decomposition *input = NULL;
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, adj_affine_case_input(MPI_COMM_WORLD, c, &input));
  if (input) ADJ_TEST_OK(t, adj_affine_case_create(c, ADJ_FLOAT32, input, false, &layer));
  char label[160], text[120];
  adj_affine_case_format(text, sizeof text, c);
  snprintf(label, sizeof label, "float32 %s", text);
  if (layer) dl_dottest(t, label, layer);
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&input);
}

static void test_errors(adj_test *t) {
  adj_layer *layer = NULL;
  adj_decomposition *input = dl_layout(t, 2, (const int64_t[2]){4, 6}, (const int[2]){1, 1}, NULL, NULL);
  adj_affine_layer_config config = {.dtype = ADJ_FLOAT64, .input = input, .in_features = 8, .out_features = 3};
  int status = adj_affine_layer_create(&config, &layer);
  dl_expect_error(t, "W takes 8 features, x has 6", status, &layer, "take 8 input features but the input has 6");
  config.in_features = 6;
  config.out_parts = t->size + 1;
  status = adj_affine_layer_create(&config, &layer);
  dl_expect_error(t, "more workers than ranks", status, &layer, "ranks but the communicator has");
  adj_decomposition *image = dl_layout(t, 4, (const int64_t[4]){4, 2, 3, 3}, (const int[4]){1, 1, 1, 1}, NULL, NULL);
  status = adj_affine_layer_create(
      &(adj_affine_layer_config){.dtype = ADJ_FLOAT64, .input = image, .in_features = 18, .out_features = 3}, &layer);
  dl_expect_error(t, "rank-4 input", status, &layer, "flatten first");
  adj_decomposition_destroy(&image);
  adj_decomposition_destroy(&input);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t322-affine-layer");
  adj_test_report(&t, "t322 on %d ranks (float64 unless noted)", t.size);
  for (int i = 0; i < adj_affine_case_count; i++) check_case(&t, &adj_affine_cases[i]);
  test_float32(&t);
  test_errors(&t);
  return adj_test_finish(&t);
}

/* t322: the distributed affine layer, P_fo x P_fi from 1 x 1 to 4 x 2, with
 * and without a partitioned batch and a bias: Jacobian dot-product test
 * (input, weights and bias at once), Taylor test (the map is bilinear in
 * (x, W), so the remainder is exactly second order), distributed against
 * sequential (outputs, jvps, input, weight and bias gradients), and bad
 * configurations.
 *
 * Extents are prime so blocks are uneven; some cases cut the input so blocks
 * are empty, list the ranks of each partition in a shuffled order, or leave
 * ranks out of every partition (inactive workers).  A case needing more ranks
 * than the run has is skipped and says so. */
#include <stdio.h>
#include <string.h>

#include "dist_check.h"

typedef struct affine_case {
  int p_b, p_fo, p_fi;
  int64_t n, f_in, f_out;
  bool no_bias, uneven;
  /* Ranks in grid order as digits; "" means 0, 1, 2, ... */
  const char *input, *weight, *work, *output;
} affine_case;

static const affine_case cases[] = {
    {1, 1, 1, 5, 13, 7, false, false, "", "", "", ""},
    {1, 1, 2, 5, 13, 7, false, false, "", "", "", ""},
    {1, 2, 1, 5, 13, 7, false, false, "", "", "", ""},
    {1, 2, 2, 5, 13, 7, false, false, "", "", "", ""},
    {1, 3, 1, 4, 11, 7, false, false, "", "", "", ""},
    {1, 1, 3, 4, 11, 7, false, false, "", "", "", ""},
    {1, 4, 1, 3, 5, 9, false, false, "", "", "", ""},
    {1, 3, 2, 3, 10, 8, true, false, "", "", "", ""},
    {1, 4, 2, 6, 13, 11, false, false, "", "", "", ""},
    /* Batch partitioned: weights broadcast over P_b, gradients summed back. */
    {3, 1, 1, 7, 6, 5, false, false, "", "", "", ""},
    {2, 2, 1, 7, 6, 5, true, false, "", "", "", ""},
    {2, 1, 2, 7, 6, 5, false, false, "", "", "", ""},
    {2, 2, 2, 7, 9, 5, false, false, "", "", "", ""},
    /* Uneven cuts with empty blocks (a worker with no input features still
     * adds the bias on the fi = 0 column). */
    {1, 2, 3, 5, 7, 6, false, true, "", "", "", ""},
    {2, 2, 2, 5, 6, 5, false, true, "", "", "", ""},
    /* Shuffled rank lists; rank 0 holds nothing in the second. */
    {1, 2, 2, 5, 13, 7, false, false, "31", "2301", "3210", "12"},
    {2, 2, 1, 6, 9, 4, false, false, "42", "13", "4321", "1234"},
    {1, 2, 2, 4, 8, 6, false, false, "54", "5432", "2345", "45"},
};

static int case_ranks_needed(const affine_case *c) {
  int needed = c->p_b * c->p_fo * c->p_fi;
  const char *lists[] = {c->input, c->weight, c->work, c->output};
  for (int l = 0; l < 4; l++)
    for (const char *r = lists[l]; *r; r++)
      if (*r - '0' + 1 > needed) needed = *r - '0' + 1;
  return needed;
}

/* Digits to ranks, or NULL for the default order. */
static const int *parse_ranks(const char *digits, int *storage) {
  if (!*digits) return NULL;
  for (int i = 0; digits[i]; i++) storage[i] = digits[i] - '0';
  return storage;
}

/* c_p = n p^2 / P^2: small, often empty, first blocks. */
static void quadratic_cuts(int64_t n, int parts, int64_t *cuts) {
  for (int p = 0; p <= parts; p++) cuts[p] = n * p * p / ((int64_t)parts * parts);
}

static adj_decomposition *input_layout(adj_test *t, const affine_case *c) {
  int storage[8], parts[2] = {c->p_b, c->p_fi};
  int64_t shape[2] = {c->n, c->f_in}, batch[9], features[9];
  quadratic_cuts(c->n, c->p_b, batch);
  quadratic_cuts(c->f_in, c->p_fi, features);
  const int64_t *cuts[2] = {batch, features};
  return dl_layout(t, 2, shape, parts, parse_ranks(c->input, storage), c->uneven ? cuts : NULL);
}

static int affine_create(const affine_case *c, adj_dtype dtype, const adj_decomposition *input, bool sequential,
                         adj_layer **layer) {
  int weight[8], work[8], output[8];
  return adj_affine_layer_create(
      &(adj_affine_layer_config){.dtype = dtype,
                                 .input = input,
                                 .in_features = c->f_in,
                                 .out_features = c->f_out,
                                 .out_parts = sequential ? 1 : c->p_fo,
                                 .no_bias = c->no_bias,
                                 .weight_ranks = sequential ? NULL : parse_ranks(c->weight, weight),
                                 .work_ranks = sequential ? NULL : parse_ranks(c->work, work),
                                 .output_ranks = sequential ? NULL : parse_ranks(c->output, output)},
      layer);
}

static void check_case(adj_test *t, const affine_case *c) {
  char label[160];
  snprintf(label, sizeof label, "P_b %d x P_fo %d x P_fi %d, (%lld,%lld)->%lld%s%s%s", c->p_b, c->p_fo, c->p_fi,
           (long long)c->n, (long long)c->f_in, (long long)c->f_out, c->no_bias ? " no bias" : "",
           c->uneven ? " uneven" : "", *c->work ? " shuffled" : "");
  int needed = case_ranks_needed(c);
  if (needed > t->size) {
    adj_test_report(t, "  %-52s skipped: needs %d ranks", label, needed);
    return;
  }
  adj_decomposition *input = input_layout(t, c), *self = dl_self_layout(t, 2, (const int64_t[2]){c->n, c->f_in});
  adj_layer *dist = NULL, *seq = NULL;
  ADJ_TEST_OK(t, affine_create(c, ADJ_FLOAT64, input, false, &dist));
  ADJ_TEST_OK(t, affine_create(c, ADJ_FLOAT64, self, true, &seq));
  if (dist && seq) {
    dl_dottest(t, label, dist);
    dl_taylor(t, label, dist, DL_TAYLOR_SMOOTH);
    dl_compare(t, label, dist, seq, 31u);
  }
  adj_layer_destroy(&dist), adj_layer_destroy(&seq);
  adj_decomposition_destroy(&input), adj_decomposition_destroy(&self);
}

/* float32 at its own tolerance, on the largest case that fits. */
static void test_float32(adj_test *t) {
  const affine_case *c = &cases[0];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (!*cases[i].work && case_ranks_needed(&cases[i]) <= t->size) c = &cases[i];
  adj_decomposition *input = input_layout(t, c);
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, affine_create(c, ADJ_FLOAT32, input, false, &layer));
  char label[96];
  snprintf(label, sizeof label, "float32 P_b %d x P_fo %d x P_fi %d", c->p_b, c->p_fo, c->p_fi);
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
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&t, &cases[i]);
  test_float32(&t);
  test_errors(&t);
  return adj_test_finish(&t);
}

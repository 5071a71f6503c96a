/* t320: pointwise layers (ReLU, leaky ReLU, tanh, sigmoid) and flatten on
 * distributed layouts: Jacobian dot-product test, Taylor test, distributed
 * against sequential, and bad configurations.
 *
 * Layouts use every rank, leave rank 0 out (inactive worker, ranks listed in
 * reverse), or cut a dimension unevenly with empty blocks. */
#include <stdio.h>
#include <string.h>

#include "dist_check.h"

typedef enum layout_kind { LAYOUT_ALL = 0, LAYOUT_INACTIVE = 1, LAYOUT_CUTS = 2 } layout_kind;
static const char *const layout_names[] = {"all ranks", "rank 0 inactive", "uneven cuts"};

/* A partition shape of `workers` for a tensor of `rank` dims, spreading over
 * the dimensions listed in `dims` (2..8 workers). */
static void spread(int workers, int rank, const int *dims, int *parts) {
  for (int i = 0; i < rank; i++) parts[i] = 1;
  static const int factors[9][2] = {{1, 1}, {1, 1}, {2, 1}, {3, 1}, {2, 2}, {5, 1}, {3, 2}, {7, 1}, {4, 2}};
  parts[dims[0]] = factors[workers][0];
  parts[dims[1]] *= factors[workers][1];
}

static adj_decomposition *make_layout(adj_test *t, layout_kind kind, int rank, const int64_t *shape, const int *dims) {
  int workers = kind == LAYOUT_INACTIVE ? t->size - 1 : t->size, parts[ADJ_MAX_RANK], ranks[8];
  if (workers < 1) return NULL;
  spread(workers, rank, dims, parts);
  for (int i = 0; i < workers; i++) ranks[i] = t->size - 1 - i; /* reverse order; rank 0 last or absent */
  int64_t storage[ADJ_MAX_RANK][9];
  const int64_t *cuts[ADJ_MAX_RANK] = {NULL};
  for (int i = 0; kind == LAYOUT_CUTS && i < rank; i++) {
    dl_quadratic_cuts(shape[i], parts[i], storage[i]);
    cuts[i] = storage[i];
  }
  return dl_layout(t, rank, shape, parts, ranks, cuts);
}

/* ---- activations ----------------------------------------------------------------------- */

static const adj_activation activations[] = {
    {ADJ_RELU, 0}, {ADJ_LEAKY_RELU, 0.1}, {ADJ_TANH, 0}, {ADJ_SIGMOID, 0}};
static const char *const activation_names[] = {"relu", "leaky_relu(0.1)", "tanh", "sigmoid"};

static void check_activation(adj_test *t, const adj_activation *a, const char *name, adj_decomposition *layout,
                             adj_decomposition *root, const char *where, bool taylor) {
  adj_layer *dist = NULL, *seq = NULL;
  ADJ_TEST_OK(t, adj_activation_layer_create(
                     &(adj_activation_layer_config){.dtype = ADJ_FLOAT64, .input = layout, .activation = *a}, &dist));
  ADJ_TEST_OK(t, adj_activation_layer_create(
                     &(adj_activation_layer_config){.dtype = ADJ_FLOAT64, .input = root, .activation = *a}, &seq));
  if (dist && seq) {
    char label[128];
    snprintf(label, sizeof label, "%s on %s", name, where);
    bool piecewise = a->kind == ADJ_RELU || a->kind == ADJ_LEAKY_RELU;
    dl_dottest(t, label, dist);
    if (taylor) dl_taylor(t, label, dist, piecewise ? DL_TAYLOR_PIECEWISE : DL_TAYLOR_SMOOTH);
    dl_compare(t, label, dist, seq, 11u);
  }
  adj_layer_destroy(&dist);
  adj_layer_destroy(&seq);
}

static void test_activations(adj_test *t) {
  static const int64_t shape[4] = {4, 3, 7, 5};
  static const int dims[2] = {2, 0}; /* spread over H, then the batch */
  adj_decomposition *root = dl_self_layout(t, 4, shape);
  for (int k = LAYOUT_ALL; k <= LAYOUT_CUTS; k++) {
    adj_decomposition *layout = make_layout(t, (layout_kind)k, 4, shape, dims);
    if (!layout) continue;
    char where[96], text[48];
    snprintf(where, sizeof where, "[4,3,7,5] %s (%s)",
             adj_partition_format(adj_decomposition_partition(layout), text, sizeof text), layout_names[k]);
    for (size_t i = 0; i < sizeof activations / sizeof activations[0]; i++)
      /* The Taylor test checks jvp against forward, which the layout does not
       * change; it runs once per activation (time on the 2-core machine). */
      check_activation(t, &activations[i], activation_names[i], layout, root, where, k == LAYOUT_ALL);
    adj_decomposition_destroy(&layout);
  }
  adj_decomposition_destroy(&root);
}

/* float32: the dot-product test at the float32 tolerance. */
static void test_activation_f32(adj_test *t) {
  static const int64_t shape[2] = {9, 4};
  static const int dims[2] = {0, 1};
  adj_decomposition *layout = make_layout(t, LAYOUT_ALL, 2, shape, dims);
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, adj_activation_layer_create(&(adj_activation_layer_config){.dtype = ADJ_FLOAT32, .input = layout,
                                                                            .activation = {ADJ_TANH, 0}},
                                             &layer));
  if (layer) dl_dottest(t, "tanh float32 on [9,4]", layer);
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&layout);
}

/* ---- flatten ---------------------------------------------------------------------------- */

/* Flatten on the batch alone, and on the first feature dimension (with the
 * batch where there are workers to spare): each block flattens into one
 * range of features. */
static void test_flatten(adj_test *t) {
  static const int64_t shape[4] = {6, 3, 4, 2};
  static const int spreads[2][2] = {{0, 0}, {1, 0}};
  adj_decomposition *root = dl_self_layout(t, 4, shape);
  adj_layer *seq = NULL;
  ADJ_TEST_OK(t, adj_flatten_layer_create(&(adj_flatten_layer_config){.dtype = ADJ_FLOAT64, .input = root}, &seq));
  for (int s = 0; s < 2 && seq; s++)
    for (int k = LAYOUT_ALL; k <= LAYOUT_CUTS; k++) {
      adj_decomposition *layout = make_layout(t, (layout_kind)k, 4, shape, spreads[s]);
      if (!layout) continue;
      adj_layer *dist = NULL;
      ADJ_TEST_OK(t, adj_flatten_layer_create(&(adj_flatten_layer_config){.dtype = ADJ_FLOAT64, .input = layout}, &dist));
      if (dist) {
        const int64_t *out = adj_decomposition_global_shape(adj_layer_output_layout(dist));
        ADJ_TEST_CHECK(t, out[0] == 6 && out[1] == 24, "flatten: global output [%lld, %lld], not [6, 24]",
                       (long long)out[0], (long long)out[1]);
        char label[96], text[48];
        snprintf(label, sizeof label, "flatten [6,3,4,2] %s (%s)",
                 adj_partition_format(adj_decomposition_partition(layout), text, sizeof text), layout_names[k]);
        dl_dottest(t, label, dist);
        if (k == LAYOUT_ALL) dl_taylor(t, label, dist, DL_TAYLOR_LINEAR);
        dl_compare(t, label, dist, seq, 12u);
      }
      adj_layer_destroy(&dist);
      adj_decomposition_destroy(&layout);
    }
  adj_layer_destroy(&seq);
  adj_decomposition_destroy(&root);
}

/* ---- bad configurations ----------------------------------------------------------------- */

static void test_errors(adj_test *t) {
  static const int64_t shape[4] = {4, 6, 3, 3};
  adj_decomposition *split = dl_layout(t, 4, shape, (const int[4]){1, 1, t->size, 1}, NULL, NULL);
  adj_layer *layer = NULL;
  int status = adj_activation_layer_create(
      &(adj_activation_layer_config){.dtype = ADJ_FLOAT64, .input = split, .activation = {(adj_activation_kind)7, 0}},
      &layer);
  dl_expect_error(t, "activation kind 7", status, &layer, "unknown activation kind 7");
  status = adj_activation_layer_create(&(adj_activation_layer_config){.dtype = ADJ_FLOAT64}, &layer);
  dl_expect_error(t, "activation without input", status, &layer, "input decomposition is NULL");
  if (t->size > 1) {
    status = adj_flatten_layer_create(&(adj_flatten_layer_config){.dtype = ADJ_FLOAT64, .input = split}, &layer);
    dl_expect_error(t, "flatten of split rows", status, &layer, "splits feature dimension 2");
  }
  adj_decomposition_destroy(&split);
  adj_decomposition *vector = dl_self_layout(t, 1, (const int64_t[1]){5});
  status = adj_flatten_layer_create(&(adj_flatten_layer_config){.dtype = ADJ_FLOAT64, .input = vector}, &layer);
  dl_expect_error(t, "flatten of rank 1", status, &layer, "rank >= 2");
  adj_decomposition_destroy(&vector);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t320-pointwise-layers");
  if (t.size > 8) return adj_test_skip(&t, "the layouts are written for 1 to 8 ranks");
  adj_test_report(&t, "t320 on %d ranks (float64 unless noted)", t.size);
  test_activations(&t);
  test_activation_f32(&t);
  test_flatten(&t);
  test_errors(&t);
  return adj_test_finish(&t);
}

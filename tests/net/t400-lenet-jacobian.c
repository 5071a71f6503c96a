/* The Jacobian of LeNet-5 + softmax cross-entropy (the loss with respect to
 * the input and every parameter at once) passes the dot-product test, jvp
 * against backward, in every layout that fits the ranks: below 1e-12 in
 * float64 and 1e-5 in float32.  The batch is padded (its last sample does not
 * count), so the padding path of the loss is inside the test.  So does the
 * logits-only network (all 10 B outputs gathered on rank 0) of the widest
 * layout, and unknown layouts or too few ranks fail on every rank. */
#include <string.h>

#include "net_check.h"

enum { BATCH = 3 };

static void check_layout(adj_test *t, const char *layout, adj_dtype dtype, bool logits_only) {
  adj_layer *net = NULL;
  adj_network_build_options o = {.dtype = dtype, .batch = BATCH, .logits_only = logits_only};
  ADJ_TEST_OK(t, nc_build_network("lenet", layout, &o, &net));
  if (!net) return;
  const int64_t labels[BATCH] = {7, 2, 9};
  if (!logits_only) ADJ_TEST_OK(t, adj_xent_layer_set_labels(adj_network_build_loss(net), labels, BATCH - 1));
  ADJ_TEST_CHECK(t, !logits_only || !adj_network_build_loss(net), "%s: the logits-only network has a loss stage", layout);
  char label[96];
  snprintf(label, sizeof label, "lenet5 %-10s %s batch %d", layout, logits_only ? "logits" : "loss  ", BATCH);
  nc_check_jacobian(t, net, 400, dtype, label);
  adj_layer_destroy(&net);
}

/* Creation fails on every rank with a message containing `phrase` (NULL: it
 * must succeed). */
static void expect_failure(adj_test *t, const char *layout, const char *phrase) {
  adj_layer *net = NULL;
  int status = nc_build_network("lenet", layout, &(adj_network_build_options){.dtype = ADJ_FLOAT64, .batch = BATCH},
                                &net);
  if (phrase) {
    char label[200];
    snprintf(label, sizeof label, "layout %s", layout);
    adj_test_expect_error(t, label, status, ADJ_TEST_ANY_ERROR, phrase);
    ADJ_TEST_CHECK(t, !net, "layout %s: a failed create left a network behind", layout);
  } else ADJ_TEST_CHECK(t, !status && net, "layout %s: %s", layout, adj_last_error());
  adj_layer_destroy(&net);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t400-lenet-jacobian");
  const char *layouts[NC_MAX_LAYOUTS];
  int n = nc_layouts_fitting(t.size, layouts);
  for (int i = 0; layouts[i]; i++) {
    check_layout(&t, layouts[i], ADJ_FLOAT64, false);
    check_layout(&t, layouts[i], ADJ_FLOAT32, false);
  }
  check_layout(&t, layouts[n - 1], ADJ_FLOAT64, true);
  expect_failure(&t, "dist3", "placement 'dist3'");
  expect_failure(&t, "dist8", t.size < 8 ? "needs 8 ranks" : NULL);
  return adj_test_finish(&t);
}

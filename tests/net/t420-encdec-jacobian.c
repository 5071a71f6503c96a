/* The Jacobian of the batch norm encoder-decoder + softmax cross-entropy
 * (networks/encdec.net; the loss with respect to the input and every parameter at once)
 * passes the dot-product test, jvp against backward, in training mode (batch
 * statistics: the projection of batch norm is inside the test) and in
 * evaluation mode (running statistics), in every layout that fits the ranks:
 * below 1e-12 in float64 and 1e-5 in float32.  The batch is padded (its last
 * sample does not count).  Unknown layouts and too few ranks fail on every
 * rank with a message naming the value. */
#include <string.h>

#include "net_check.h"

enum { BATCH = 3 };

static void check_layout(adj_test *t, const char *layout, adj_dtype dtype, bool training) {
  adj_layer *net = NULL;
  ADJ_TEST_OK(t, nc_build_network("encdec", layout, &(adj_network_build_options){.dtype = dtype, .batch = BATCH}, &net));
  if (!net) return;
  ADJ_TEST_OK(t, adj_network_init_uniform(net, 420));
  const int64_t labels[BATCH] = {7, 2, 9};
  ADJ_TEST_OK(t, adj_xent_layer_set_labels(adj_network_build_loss(net), labels, BATCH - 1));
  ADJ_TEST_OK(t, adj_network_set_training(net, training));
  char label[96];
  snprintf(label, sizeof label, "encdec %-10s %s batch %d", layout, training ? "train" : "eval ", BATCH);
  nc_check_jacobian(t, net, 420, dtype, label);
  adj_layer_destroy(&net);
}

static void expect_failure(adj_test *t, const char *layout, int64_t batch, const char *phrase) {
  adj_layer *net = NULL;
  adj_network_build_options o = {.dtype = ADJ_FLOAT64, .batch = batch};
  char label[200];
  snprintf(label, sizeof label, "layout %s batch %lld", layout, (long long)batch);
  adj_test_expect_error(t, label, nc_build_network("encdec", layout, &o, &net), ADJ_TEST_ANY_ERROR, phrase);
  ADJ_TEST_CHECK(t, !net, "%s: a failed create left a network behind", label);
  adj_layer_destroy(&net);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t420-encdec-jacobian");
  static const char *const layouts[] = {"sequential", "2x1", "1x2", "3x1", "2x2", "3x2", "7x1"};
  const char *widest = "sequential";
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
    if (nc_layout_ranks("encdec", layouts[i]) > t.size) continue;
    check_layout(&t, layouts[i], ADJ_FLOAT64, true);
    check_layout(&t, layouts[i], ADJ_FLOAT32, true);
    widest = layouts[i];
  }
  check_layout(&t, widest, ADJ_FLOAT64, false);
  check_layout(&t, widest, ADJ_FLOAT32, false);
  expect_failure(&t, "8x1", 4, "is split over 8 workers");
  expect_failure(&t, "dist4", 4, "placement 'dist4'");
  expect_failure(&t, "sequential", 0, "batch 0 must be at least 1");
  if (t.size < 49) expect_failure(&t, "7x7", 4, "needs 49 ranks");
  return adj_test_finish(&t);
}

/* The network accessors check that their argument is a network: given a
 * network made by adj_network_create they return its stages; given any other
 * layer (here a ReLU layer) they fail with ADJ_ERR_ARG and a message naming
 * the layer instead of reading its implementation as a network's. */
#include <string.h>

#include "harness.h"

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t402-network-kind");
  adj_partition *p = NULL;
  adj_decomposition *layout = NULL;
  adj_layer *relu = NULL, *tanh_layer = NULL, *net = NULL;
  ADJ_TEST_OK(&t, adj_partition_create(t.comm, 2, (const int[]){t.size, 1}, t.size, NULL, &p));
  ADJ_TEST_OK(&t, adj_decomposition_create(p, 2, (const int64_t[]){2 * t.size + 1, 3}, &layout));
  ADJ_TEST_OK(&t, adj_activation_layer_create(
                      &(adj_activation_layer_config){.dtype = ADJ_FLOAT64, .input = layout, .activation = {ADJ_RELU, 0}},
                      &relu));
  ADJ_TEST_OK(&t, adj_activation_layer_create(
                      &(adj_activation_layer_config){.dtype = ADJ_FLOAT64, .input = layout, .activation = {ADJ_TANH, 0}},
                      &tanh_layer));
  ADJ_TEST_OK(&t, adj_network_create("two-stage", 2, (adj_layer *const[]){relu, tanh_layer}, &net));

  /* A network answers. */
  ADJ_TEST_CHECK(&t, adj_layer_is_network(net) && !adj_layer_is_network(relu) && !adj_layer_is_network(NULL),
                 "adj_layer_is_network: network %d, relu %d, NULL %d", adj_layer_is_network(net),
                 adj_layer_is_network(relu), adj_layer_is_network(NULL));
  ADJ_TEST_CHECK(&t, adj_network_depth(net) == 2, "depth %d, expected 2", adj_network_depth(net));
  ADJ_TEST_CHECK(&t, adj_network_layer(net, 0) == relu && adj_network_layer(net, 1) == tanh_layer,
                 "stages are not the layers given");
  adj_tensor values, grads;
  ADJ_TEST_OK(&t, adj_network_flat_parameters(net, &values, &grads));
  ADJ_TEST_CHECK(&t, adj_tensor_volume(&values) == 0, "activations have no parameters, got %lld values",
                 (long long)adj_tensor_volume(&values));

  /* Out-of-range stage. */
  adj_clear_error();
  adj_layer *none = adj_network_layer(net, 2);
  adj_test_expect_error(&t, "stage 2 of a 2-stage network", none ? ADJ_SUCCESS : ADJ_ERR_ARG, ADJ_ERR_ARG,
                        "stage 2 of network 'two-stage' is outside 0..1");

  /* Another layer is refused, by name. */
  adj_clear_error();
  int depth = adj_network_depth(relu);
  ADJ_TEST_CHECK(&t, depth == -1, "depth of a ReLU layer: %d, expected -1", depth);
  adj_test_expect_error(&t, "adj_network_depth(relu)", depth == -1 ? ADJ_ERR_ARG : ADJ_SUCCESS, ADJ_ERR_ARG,
                        "is not a network");
  char phrase[160];
  snprintf(phrase, sizeof phrase, "adj_network_layer: layer '%s' is not a network", adj_layer_name(relu));
  adj_clear_error();
  none = adj_network_layer(relu, 0);
  adj_test_expect_error(&t, "adj_network_layer(relu, 0)", none ? ADJ_SUCCESS : ADJ_ERR_ARG, ADJ_ERR_ARG, phrase);
  adj_test_expect_error(&t, "adj_network_flat_parameters(relu)", adj_network_flat_parameters(relu, &values, &grads),
                        ADJ_ERR_ARG, "is not a network");
  adj_clear_error();
  ADJ_TEST_CHECK(&t, adj_network_depth(NULL) == -1 && strstr(adj_last_error(), "layer 'NULL' is not a network"),
                 "depth of NULL: '%s'", adj_last_error());

  adj_layer_destroy(&net);
  adj_layer_destroy(&relu);
  adj_layer_destroy(&tanh_layer);
  adj_decomposition_destroy(&layout);
  adj_partition_destroy(&p);
  return adj_test_finish(&t);
}

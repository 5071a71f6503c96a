/* The network accessors check that their argument is a network: given a
 * network made by adj_network_create they return its stages; given any other
 * layer (here a ReLU layer) or NULL, every one of them (depth, layer,
 * set_training, stage_parameters, set_backward_hook, flat_parameters) fails
 * with ADJ_ERR_ARG and a message naming the layer instead of reading its
 * implementation as a network's; the ReLU layer still runs afterwards.
 * adj_network_init_uniform takes any layer but refuses NULL. */
#include <string.h>

#include "harness.h"

/* Counts the hook's calls: (BEGIN, END) per stage in one backward. */
typedef struct hook_count {
  int begin, end;
} hook_count;

static int count_events(void *ctx, int index, adj_backward_event event) {
  hook_count *c = ctx;
  (void)index;
  if (event == ADJ_BACKWARD_BEGIN) c->begin++;
  else c->end++;
  return 0;
}

/* One forward and backward through `layer` on zero tensors. */
static int run_once(adj_layer *layer) {
  adj_tensor x = {0}, y = {0}, dy = {0}, dx = {0};
  int status = adj_layer_create_input(layer, &x);
  if (!status) status = adj_layer_create_output(layer, &y);
  if (!status) status = adj_layer_create_output(layer, &dy);
  if (!status) status = adj_layer_create_input(layer, &dx);
  if (!status) status = adj_layer_forward(layer, &x, &y);
  if (!status) status = adj_layer_backward(layer, &dy, &dx);
  adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&dy), adj_tensor_destroy(&dx);
  return status;
}

/* The accessors that write (set_training, set_backward_hook) or read a
 * network's stage table (stage_parameters) refuse another layer and NULL. */
static void refuse_other_layers(adj_test *t, adj_layer *net, adj_layer *relu) {
  int first = -7, count = -7;
  adj_test_expect_error(t, "adj_network_stage_parameters(relu, 0)",
                        adj_network_stage_parameters(relu, 0, &first, &count), ADJ_ERR_ARG,
                        "adj_network_stage_parameters: layer 'relu' is not a network");
  ADJ_TEST_CHECK(t, first == -7 && count == -7, "a refused stage_parameters wrote first %d, count %d", first, count);
  adj_test_expect_error(t, "adj_network_stage_parameters(NULL, 0)",
                        adj_network_stage_parameters(NULL, 0, &first, &count), ADJ_ERR_ARG,
                        "layer 'NULL' is not a network");
  adj_test_expect_error(t, "adj_network_stage_parameters(net, 0, NULL, NULL)",
                        adj_network_stage_parameters(net, 0, NULL, NULL), ADJ_ERR_ARG,
                        "first and count are required");
  ADJ_TEST_OK(t, adj_network_stage_parameters(net, 1, &first, &count));
  ADJ_TEST_CHECK(t, first == 0 && count == 0, "stage 1 of two activations: first %d, count %d", first, count);

  hook_count calls = {0, 0};
  adj_test_expect_error(t, "adj_network_set_backward_hook(relu)",
                        adj_network_set_backward_hook(relu, count_events, &calls), ADJ_ERR_ARG,
                        "adj_network_set_backward_hook: layer 'relu' is not a network");
  adj_test_expect_error(t, "adj_network_set_backward_hook(NULL)",
                        adj_network_set_backward_hook(NULL, count_events, &calls), ADJ_ERR_ARG,
                        "layer 'NULL' is not a network");
  adj_test_expect_error(t, "adj_network_set_training(relu)", adj_network_set_training(relu, false), ADJ_ERR_ARG,
                        "adj_network_set_training: layer 'relu' is not a network");
  adj_test_expect_error(t, "adj_network_set_training(NULL)", adj_network_set_training(NULL, false), ADJ_ERR_ARG,
                        "layer 'NULL' is not a network");
  adj_test_expect_error(t, "adj_network_init_uniform(NULL)", adj_network_init_uniform(NULL, 1), ADJ_ERR_ARG,
                        "adj_network_init_uniform: layer is NULL");
  ADJ_TEST_OK(t, adj_network_init_uniform(relu, 1));

  /* The refused calls left the ReLU layer as it was: it runs and calls no hook. */
  ADJ_TEST_OK(t, run_once(relu));
  ADJ_TEST_CHECK(t, calls.begin == 0 && calls.end == 0, "a refused hook was called %d + %d times", calls.begin,
                 calls.end);
  /* On the network the hook is set, runs around each stage, and NULL removes it. */
  ADJ_TEST_OK(t, adj_network_set_backward_hook(net, count_events, &calls));
  ADJ_TEST_OK(t, run_once(net));
  ADJ_TEST_CHECK(t, calls.begin == 2 && calls.end == 2, "hook on a 2-stage backward: %d begins, %d ends", calls.begin,
                 calls.end);
  ADJ_TEST_OK(t, adj_network_set_backward_hook(net, NULL, NULL));
  ADJ_TEST_OK(t, run_once(net));
  ADJ_TEST_CHECK(t, calls.begin == 2 && calls.end == 2, "a removed hook still ran: %d begins, %d ends", calls.begin,
                 calls.end);
  adj_test_report(t, "stage_parameters, set_backward_hook, set_training refuse relu and NULL; hook ran %d+%d times",
                  calls.begin, calls.end);
}

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
  refuse_other_layers(&t, net, relu);

  adj_layer_destroy(&net);
  adj_layer_destroy(&relu);
  adj_layer_destroy(&tanh_layer);
  adj_decomposition_destroy(&layout);
  adj_partition_destroy(&p);
  return adj_test_finish(&t);
}

/* t313: a NULL layer (or operator) given to a layer or dot-product test entry
 * point fails with ADJ_ERR_ARG and a message naming the call, instead of
 * crashing.  Every rank passes NULL here: a NULL handle has no communicator,
 * so it is refused on the ranks that pass it without communicating (layer.h).
 * The accessors without a status (adj_layer_parameter, the zero calls) take
 * NULL too; a real layer then still runs. */
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* status must be ADJ_ERR_ARG, and the message "<call>: layer is NULL". */
static void expect_null_layer(adj_test *t, const char *call, int status) {
  char phrase[96];
  snprintf(phrase, sizeof phrase, "%s: layer is NULL", call);
  adj_test_expect_error(t, call, status, ADJ_ERR_ARG, phrase);
}

static void layer_calls(adj_test *t, adj_tensor *x, adj_tensor *y) {
  expect_null_layer(t, "adj_layer_forward", adj_layer_forward(NULL, x, y));
  expect_null_layer(t, "adj_layer_jvp", adj_layer_jvp(NULL, x, y));
  expect_null_layer(t, "adj_layer_backward", adj_layer_backward(NULL, y, x));
  adj_tensor made = {0};
  expect_null_layer(t, "adj_layer_create_input", adj_layer_create_input(NULL, &made));
  expect_null_layer(t, "adj_layer_create_output", adj_layer_create_output(NULL, &made));
  expect_null_layer(t, "adj_layer_set_parameter", adj_layer_set_parameter(NULL, 0, 0, NULL));
  expect_null_layer(t, "adj_layer_get_parameter", adj_layer_get_parameter(NULL, 0, 0, NULL));
  expect_null_layer(t, "adj_layer_get_gradient", adj_layer_get_gradient(NULL, 0, 0, NULL));
  expect_null_layer(t, "adj_layer_move_parameter_data", adj_layer_move_parameter_data(NULL, 0, 0, true, x, NULL));
  ADJ_TEST_CHECK(t, adj_layer_parameter(NULL, 0) == NULL, "adj_layer_parameter(NULL, 0) is not NULL");
  adj_layer_zero_grad(NULL);
  adj_layer_zero_tangent(NULL);
}

static void dottest_calls(adj_test *t, adj_layer *layer) {
  adj_dottest_result r;
  adj_test_expect_error(t, "adj_dottest_op(NULL)", adj_dottest_op(NULL, 1, &r), ADJ_ERR_ARG,
                        "adj_dottest_op: operator is NULL");
  adj_op *copy = NULL;
  ADJ_TEST_OK(t, adj_copy_create(ADJ_FLOAT64, 4, &copy));
  if (copy) {
    adj_test_expect_error(t, "adj_dottest_op(copy, result NULL)", adj_dottest_op(copy, 1, NULL), ADJ_ERR_ARG,
                          "adj_dottest_op: result is NULL");
    ADJ_TEST_OK(t, adj_dottest_op(copy, 1, &r));
  }
  adj_op_destroy(&copy);
  adj_test_expect_error(t, "adj_dottest_run(NULL)", adj_dottest_run(NULL, 1, &r), ADJ_ERR_ARG,
                        "adj_dottest_run: problem is NULL");
  adj_dottest_problem p = {.comm = adj_layer_comm(layer), .n_domain = 1, .n_range = 1};
  adj_test_expect_error(t, "adj_dottest_run(no maps)", adj_dottest_run(&p, 1, &r), ADJ_ERR_ARG,
                        "forward and adjoint are required");
  adj_test_expect_error(t, "adj_dottest_layer(NULL)", adj_dottest_layer(NULL, 1, &r), ADJ_ERR_ARG,
                        "dot-product test of a layer: layer is NULL");
  adj_test_expect_error(t, "adj_dottest_layer(relu, result NULL)", adj_dottest_layer(layer, 1, NULL), ADJ_ERR_ARG,
                        "dot-product test of a layer: result is NULL");
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t313-layer-null-args");
  adj_partition *p = NULL;
  adj_decomposition *layout = NULL;
  adj_layer *relu = NULL;
  ADJ_TEST_OK(&t, adj_partition_create(t.comm, 2, (const int[]){t.size, 1}, t.size, NULL, &p));
  ADJ_TEST_OK(&t, adj_decomposition_create(p, 2, (const int64_t[]){2 * t.size + 1, 3}, &layout));
  ADJ_TEST_OK(&t, adj_activation_layer_create(
                      &(adj_activation_layer_config){.dtype = ADJ_FLOAT64, .input = layout, .activation = {ADJ_RELU, 0}},
                      &relu));
  adj_tensor x = {0}, y = {0};
  if (relu) {
    ADJ_TEST_OK(&t, adj_layer_create_input(relu, &x));
    ADJ_TEST_OK(&t, adj_layer_create_output(relu, &y));
    layer_calls(&t, &x, &y);
    dottest_calls(&t, relu);
    /* The refusals touched nothing: a real layer runs. */
    ADJ_TEST_OK(&t, adj_layer_forward(relu, &x, &y));
    adj_test_report(&t, "layer and dot-product test entry points refuse NULL with ADJ_ERR_ARG on %d ranks", t.size);
  }
  adj_tensor_destroy(&x), adj_tensor_destroy(&y);
  adj_layer_destroy(&relu);
  adj_decomposition_destroy(&layout);
  adj_partition_destroy(&p);
  return adj_test_finish(&t);
}

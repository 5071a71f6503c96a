/* t312: bad configurations of the distributed convolution layer fail at
 * creation on every rank with a message naming the problem (checked with
 * strstr on every rank), and nobody hangs: after the failures the
 * communicator still carries a working layer.  A wrong tensor handed to one
 * rank only fails on every rank too. */
#include <string.h>

#include "dist_check.h"

/* A valid 2-D configuration on one worker: x (2, 4, 6, 6), k3, pad 1, C_out 3. */
static adj_conv_layer_config base_config(void) {
  return (adj_conv_layer_config){.comm = MPI_COMM_WORLD,
                                 .dtype = ADJ_FLOAT64,
                                 .window = {.spatial_dims = 2, .kernel = {3, 3}, .padding_left = {1, 1},
                                            .padding_right = {1, 1}},
                                 .out_channels = 3,
                                 .input_shape = {2, 4, 6, 6}};
}

static void expect(adj_test *t, const char *label, const adj_conv_layer_config *config, const char *phrase) {
  adj_layer *layer = NULL;
  int status = adj_conv_layer_create(config, &layer);
  dl_expect_error(t, label, status, &layer, phrase);
}

static void creation_errors(adj_test *t) {
  adj_conv_layer_config c = base_config();
  c.window.kernel[0] = 9;
  expect(t, "kernel larger than padded input", &c, "spans 9 but the padded input is only 8");
  c = base_config();
  c.window.dilation[1] = 4;
  expect(t, "dilated kernel too large", &c, "kernel 3 with dilation 4 spans 9");
  c = base_config();
  c.input_parts[4] = 2;
  expect(t, "partition rank 5 for rank-4 input", &c, "has an entry in dimension 4 but a 2-D convolution");
  c = base_config();
  c.input_shape[4] = 5;
  expect(t, "shape rank 5 for a 2-D kernel", &c, "takes a rank-4 input");
  c = base_config();
  c.in_channels = 3;
  expect(t, "weights' C_in differs from input", &c, "the weights take 3 input channels but the input has 4");
  c = base_config();
  c.input_parts[1] = 5;
  expect(t, "more channel workers than channels", &c, "5 input-channel workers for 4 input channels");
  c = base_config();
  c.out_channel_parts = 4;
  expect(t, "more output-channel workers", &c, "4 output-channel workers for 3 output channels");
  c = base_config();
  c.input_parts[0] = 3;
  expect(t, "more batch workers than samples", &c, "3 batch workers for a batch of 2");
  c = base_config();
  c.input_parts[2] = t->size + 1;
  expect(t, "more workers than ranks", &c, "workers but the communicator has");
  c = base_config();
  c.window.stride[0] = -1;
  expect(t, "negative stride", &c, "stride -1");
  c = base_config();
  c.window.spatial_dims = 4;
  expect(t, "four spatial dimensions", &c, "spatial_dims is 4");
  c = base_config();
  c.out_channels = 0;
  expect(t, "no output channels", &c, "out_channels is 0");
  c = base_config();
  c.dtype = (adj_dtype)7;
  expect(t, "invalid dtype", &c, "invalid dtype 7");
}

/* Errors that involve a decomposition or rank lists. */
static void layout_errors(adj_test *t) {
  adj_conv_layer_config c = base_config();
  int parts3[3] = {1, 1, 1};
  adj_decomposition *rank3 = dl_layout(t, 3, (int64_t[]){2, 4, 6}, parts3, NULL, NULL);
  c.input = rank3;
  memset(c.input_shape, 0, sizeof c.input_shape);
  expect(t, "input decomposition of rank 3", &c, "the input partition has 3 dimensions but a 2-D convolution");
  adj_decomposition_destroy(&rank3);
  if (t->size < 2) return;
  int parts4[4] = {1, 2, 1, 1};
  adj_decomposition *uneven = dl_layout(t, 4, (int64_t[]){2, 4, 6, 6}, parts4, NULL,
                                        (const int64_t *const[]){NULL, (const int64_t[]){0, 1, 4}, NULL, NULL});
  c = base_config();
  c.input = uneven;
  expect(t, "uneven channel cuts", &c, "cuts the channels unevenly");
  c.input_parts[1] = 2;
  expect(t, "input given twice", &c, "not both");
  adj_decomposition_destroy(&uneven);
  c = base_config();
  c.input_parts[2] = 2;
  c.work_ranks = (const int[]){1, 1};
  expect(t, "rank listed twice", &c, "conv layer: work partition: partition: rank 1 is listed twice");
}

/* A tensor of the wrong local shape on the last rank only: every rank fails. */
static void runtime_error(adj_test *t) {
  adj_conv_layer_config c = base_config();
  c.input_parts[2] = t->size > 1 ? 2 : 1;
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, adj_conv_layer_create(&c, &layer));
  if (!layer) return;
  adj_tensor x, y;
  adj_layer_create_input(layer, &x);
  if (t->rank == t->size - 1) adj_tensor_create(&y, ADJ_FLOAT64, 4, (int64_t[]){1, 1, 1, 1});
  else adj_layer_create_output(layer, &y);
  int status = adj_layer_forward(layer, &x, &y);
  ADJ_TEST_CHECK(t, status != 0 && strstr(adj_last_error(), "forward output tensor has local shape"),
                 "wrong output shape on rank %d: got %s: %s", t->size - 1, adj_status_name(status), adj_last_error());
  adj_test_report(t, "  wrong tensor on rank %d only -> %s: %s", t->size - 1, adj_status_name(status),
                  adj_last_error());
  /* The communicator still works: a correct call succeeds everywhere. */
  adj_tensor_destroy(&y);
  adj_layer_create_output(layer, &y);
  ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &y));
  adj_tensor_destroy(&x), adj_tensor_destroy(&y);
  adj_layer_destroy(&layer);
}

/* dx left out (NULL) on rank 0 only, in backward and jvp: a collective choice
 * broken, the same ADJ_ERR_ARG on every rank from the call's one agreement;
 * then a backward with dx everywhere succeeds. */
static void split_dx_choice(adj_test *t) {
  if (t->size < 2) return;
  adj_conv_layer_config c = base_config();
  c.input_parts[2] = 2;
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, adj_conv_layer_create(&c, &layer));
  if (!layer) return;
  adj_tensor x, y, dx;
  adj_layer_create_input(layer, &x), adj_layer_create_input(layer, &dx);
  adj_layer_create_output(layer, &y);
  ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &y));
  adj_tensor *mine = t->rank == 0 ? NULL : &dx;
  adj_test_expect_error(t, "backward with dx NULL on rank 0 only", adj_layer_backward(layer, &y, mine), ADJ_ERR_ARG,
                        "backward input gradient is NULL on some ranks and not on others");
  adj_test_expect_error(t, "jvp with dx NULL on rank 0 only", adj_layer_jvp(layer, mine, &y), ADJ_ERR_ARG,
                        "jvp input perturbation is NULL on some ranks and not on others");
  ADJ_TEST_OK(t, adj_layer_backward(layer, &y, &dx));
  adj_tensor_destroy(&x), adj_tensor_destroy(&dx), adj_tensor_destroy(&y);
  adj_layer_destroy(&layer);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t312-conv-layer-errors");
  adj_test_report(&t, "conv layer configuration errors on %d ranks", t.size);
  creation_errors(&t);
  layout_errors(&t);
  runtime_error(&t);
  split_dx_choice(&t);
  return adj_test_finish(&t);
}

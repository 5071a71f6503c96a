/* t242: compute refuses integer tensors.  Integer dtypes are for data
 * movement; every layer constructor (conv, pool, affine, activation, flatten,
 * batch norm, upsample, pad, the losses, cross-entropy, repartition) given an
 * integer dtype fails on every rank with a message naming the dtype, and every
 * kernel (conv, pool, affine, activation, softmax cross-entropy, MSE) given an
 * integer tensor fails with ADJ_ERR_DTYPE naming it instead of computing. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "adjoin/pool_layer.h"
#include "adjoin/affine_layer.h"
#include "adjoin/repartition_layer.h"
#include "adjoin/pool.h"
#include "adjoin/affine.h"
#include "adjoin/loss.h"

static const adj_dtype integer_dtypes[] = {ADJ_INT32, ADJ_INT64, ADJ_UINT8};

/* One constructor call per layer kind, all with dtype and the same input. */
static int create_layer(int kind, adj_dtype dtype, const adj_decomposition *x, adj_layer **layer, const char **name) {
  static const char *const names[] = {"conv",      "pool",     "affine", "activation", "flatten",     "batchnorm",
                                      "upsample",  "pad",      "loss",   "xent",       "repartition"};
  *name = names[kind];
  const adj_window_geometry window = {.spatial_dims = 2, .kernel = {3, 3}};
  switch (kind) {
  case 0:
    return adj_conv_layer_create(&(adj_conv_layer_config){.comm = MPI_COMM_WORLD, .dtype = dtype, .input = x}, layer);
  case 1: return adj_pool_layer_create(&(adj_pool_layer_config){.dtype = dtype, .input = x, .window = window}, layer);
  case 2:
    return adj_affine_layer_create(&(adj_affine_layer_config){.dtype = dtype, .input = x, .in_features = 3,
                                                              .out_features = 2},
                                   layer);
  case 3: return adj_activation_layer_create(&(adj_activation_layer_config){.dtype = dtype, .input = x}, layer);
  case 4: return adj_flatten_layer_create(&(adj_flatten_layer_config){.dtype = dtype, .input = x}, layer);
  case 5: return adj_batchnorm_layer_create(&(adj_batchnorm_layer_config){.dtype = dtype, .input = x}, layer);
  case 6: return adj_upsample_layer_create(&(adj_upsample_layer_config){.dtype = dtype, .input = x}, layer);
  case 7: return adj_pad_layer_create(&(adj_pad_layer_config){.dtype = dtype, .input = x}, layer);
  case 8: return adj_loss_layer_create(&(adj_loss_layer_config){.dtype = dtype, .input = x}, layer);
  case 9: return adj_xent_layer_create(&(adj_xent_layer_config){.dtype = dtype, .input = x}, layer);
  default:
    return adj_repartition_layer_create(&(adj_repartition_layer_config){.dtype = dtype, .input = x, .output = x},
                                        layer);
  }
}

static void check_layers(adj_test *t, const adj_decomposition *x) {
  for (size_t d = 0; d < sizeof integer_dtypes / sizeof integer_dtypes[0]; d++)
    for (int kind = 0; kind < 11; kind++) {
      adj_layer *layer = NULL;
      const char *name;
      int status = create_layer(kind, integer_dtypes[d], x, &layer, &name);
      char label[64], phrase[96];
      snprintf(label, sizeof label, "%s layer in %s", name, adj_dtype_name(integer_dtypes[d]));
      snprintf(phrase, sizeof phrase, "has dtype %s, but layers and kernels compute in float32 or float64",
               adj_dtype_name(integer_dtypes[d]));
      adj_test_expect_error(t, label, status, ADJ_ERR_DTYPE, phrase);
      ADJ_TEST_CHECK(t, layer == NULL, "%s: a failed create left a layer behind", label);
    }
}

/* Kernel calls with integer x (shapes valid, so only the dtype is wrong). */
static int run_kernel(int kind, adj_tensor *x4, adj_tensor *x2, adj_tensor *w, adj_tensor *y, const char **name) {
  static const char *const names[] = {"adj_conv_forward", "adj_pool_forward",         "adj_affine_forward",
                                      "adj_activation_forward", "adj_softmax_xent_forward", "adj_mse_forward"};
  *name = names[kind];
  const adj_window_geometry g = {.spatial_dims = 2, .kernel = {1, 1}};
  const int64_t labels[2] = {0, 1};
  double loss;
  switch (kind) {
  case 0: return adj_conv_forward(&g, x4, w, NULL, y, NULL);
  case 1: return adj_pool_forward(ADJ_POOL_MAX, &g, x4, y);
  case 2: return adj_affine_forward(x2, w, NULL, y);
  case 3: return adj_activation_forward(&(adj_activation){.kind = ADJ_RELU}, x2, y);
  case 4: return adj_softmax_xent_forward(x2, labels, ADJ_REDUCE_MEAN, &loss);
  default: return adj_mse_forward(x2, x2, ADJ_REDUCE_MEAN, &loss);
  }
}

static void check_kernels(adj_test *t) {
  int refused = 0;
  for (size_t d = 0; d < sizeof integer_dtypes / sizeof integer_dtypes[0]; d++) {
    adj_dtype dtype = integer_dtypes[d];
    adj_tensor x4, x2, w1, w2, y4, y2;
    adj_tensor_create(&x4, dtype, 4, (const int64_t[]){2, 1, 3, 3});
    adj_tensor_create(&x2, dtype, 2, (const int64_t[]){2, 3});
    adj_tensor_create(&w1, dtype, 4, (const int64_t[]){1, 1, 1, 1});
    adj_tensor_create(&w2, dtype, 2, (const int64_t[]){3, 3});
    adj_tensor_create(&y4, dtype, 4, (const int64_t[]){2, 1, 3, 3});
    adj_tensor_create(&y2, dtype, 2, (const int64_t[]){2, 3});
    for (int kind = 0; kind < 6; kind++) {
      const char *name;
      bool four = kind < 2;
      int status = run_kernel(kind, &x4, &x2, kind == 0 ? &w1 : &w2, four ? &y4 : &y2, &name);
      bool named = strstr(adj_last_error(), adj_dtype_name(dtype)) != NULL;
      ADJ_TEST_CHECK(t, status == ADJ_ERR_DTYPE && named, "%s on %s: status %s, message '%s'", name,
                     adj_dtype_name(dtype), adj_status_name(status), adj_last_error());
      refused += status == ADJ_ERR_DTYPE && named;
      if (d == 0 && kind == 0) adj_test_report(t, "  %s on int32: %s", name, adj_last_error());
    }
    adj_tensor_destroy(&x4), adj_tensor_destroy(&x2), adj_tensor_destroy(&w1), adj_tensor_destroy(&w2);
    adj_tensor_destroy(&y4), adj_tensor_destroy(&y2);
  }
  adj_test_report(t, "kernels: %d of 18 integer calls refused with the dtype named", refused);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t242-int-compute-refused");
  adj_decomposition *x = NULL;
  ADJ_TEST_OK(&t, adj_decomposition_create_on_first_ranks(t.comm, 4, (const int[]){t.size, 1, 1, 1},
                                                          (const int64_t[]){2 * t.size, 1, 6, 6}, &x));
  if (x) check_layers(&t, x);
  check_kernels(&t);
  adj_decomposition_destroy(&x);
  return adj_test_finish(&t);
}

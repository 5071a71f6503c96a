/* A multilayer perceptron of 1.5D affine layers (mlp15.h). */
#include "adjoin/mlp15.h"
#include "adjoin/pointwise_layer.h"
#include "adjoin/network.h"
#include "error_impl.h"

int adj_mlp15_create(const adj_mlp15_config *c, adj_layer **network) {
  ADJ_CHECK(network, ADJ_ERR_ARG, "mlp15: output network pointer is NULL");
  *network = NULL;
  ADJ_CHECK(c && c->input && c->widths, ADJ_ERR_ARG, "mlp15: config, input or widths is NULL");
  ADJ_CHECK(c->layers >= 1 && c->layers <= ADJ_MLP15_MAX_LAYERS, ADJ_ERR_ARG, "mlp15: %d layers, must be 1..%d",
            c->layers, ADJ_MLP15_MAX_LAYERS);
  adj_layer *l[2 * ADJ_MLP15_MAX_LAYERS] = {0};
  int n = 0, status = ADJ_SUCCESS;
  const adj_decomposition *x = c->input;
  for (int i = 0; i < c->layers && !status; i++) {
    adj_affine15_layer_config ac = {.dtype = c->dtype, .input = x, .out_features = c->widths[i], .no_bias = c->no_bias};
    status = adj_affine15_layer_create(&ac, &l[n]);
    if (status) break;
    x = adj_layer_output_layout(l[n++]);
    if (i + 1 == c->layers) break;
    adj_activation_layer_config fc = {.dtype = c->dtype, .input = x, .activation = c->activation};
    status = adj_activation_layer_create(&fc, &l[n]);
    if (!status) x = adj_layer_output_layout(l[n++]);
  }
  if (!status) status = adj_network_create("mlp15", n, l, network);
  for (int i = 0; i < n; i++) adj_layer_destroy(&l[i]);
  return status;
}

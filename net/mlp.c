/* The multilayer perceptron (see include/adjoin/mlp.h). */
#include <stdio.h>

#include "adjoin/affine15_layer.h"
#include "adjoin/pointwise_layer.h"
#include "adjoin/affine_layer.h"
#include "adjoin/repartition_layer.h"
#include "adjoin/xent_layer.h"
#include "adjoin/mlp.h"
#include "adjoin/network.h"
#include "error_impl.h"

static int mlp_check(const adj_mlp_config *c) {
  ADJ_CHECK(c, ADJ_ERR_ARG, "mlp: config is NULL");
  ADJ_CHECK(c->n_sizes >= 2 && c->n_sizes <= ADJ_MLP_MAX_LAYERS + 1 && c->sizes, ADJ_ERR_ARG,
            "mlp: %d widths (need 2..%d)", c->n_sizes, ADJ_MLP_MAX_LAYERS + 1);
  ADJ_CHECK(c->batch >= 1, ADJ_ERR_ARG, "mlp: batch %lld must be at least 1", (long long)c->batch);
  ADJ_CHECK(c->rows >= 1 && c->cols >= 1 && c->sizes[0] == c->rows * c->cols, ADJ_ERR_ARG,
            "mlp: input width %lld is not the image's %lld x %lld pixels", (long long)c->sizes[0], (long long)c->rows,
            (long long)c->cols);
  ADJ_CHECK(c->grid_rows >= 0 && c->grid_cols >= 0 && (c->grid_rows == 0) == (c->grid_cols == 0), ADJ_ERR_ARG,
            "mlp: grid %d x %d (give both P_r and P_c, or neither)", c->grid_rows, c->grid_cols);
  ADJ_CHECK(c->grid_cols <= c->batch, ADJ_ERR_SIZE, "mlp: grid %d x %d splits a batch of %lld over %d workers",
            c->grid_rows, c->grid_cols, (long long)c->batch, c->grid_cols);
  for (int i = 1; i < c->n_sizes; i++)
    ADJ_CHECK(c->sizes[i] >= 1 && c->sizes[i] >= c->grid_rows, ADJ_ERR_ARG,
              "mlp: width %d is %lld (at least 1, and at least P_r = %d)", i, (long long)c->sizes[i], c->grid_rows);
  return ADJ_SUCCESS;
}

/* Appends a created stage; `current` becomes its output layout.  The stage
 * comes by address: the call that creates it is an argument of this one. */
static int mlp_push(adj_layer **stages, int *n, const adj_decomposition **current, int status, adj_layer **layer) {
  if (status) return status;
  stages[(*n)++] = *layer;
  *current = adj_layer_output_layout(*layer);
  return ADJ_SUCCESS;
}

/* The flattened images (B, F) onto the 1.5D grid: batch over P_c, features over P_r. */
static int mlp_to_grid(const adj_mlp_config *c, adj_layer **stages, int *n, const adj_decomposition **current) {
  adj_decomposition *grid = NULL;
  ADJ_CALL(adj_decomposition_create_on_first_ranks(c->comm, 2, (const int[2]){c->grid_cols, c->grid_rows},
                                                   (const int64_t[2]){c->batch, c->sizes[0]}, &grid));
  adj_layer *layer = NULL;
  adj_repartition_layer_config rc = {.dtype = c->dtype, .input = *current, .output = grid};
  int status = mlp_push(stages, n, current, adj_repartition_layer_create(&rc, &layer), &layer);
  adj_decomposition_destroy(&grid);
  return status;
}

static int mlp_affine(const adj_mlp_config *c, int i, const adj_decomposition *current, adj_layer **layer) {
  if (c->grid_rows) {
    adj_affine15_layer_config ac = {.dtype = c->dtype, .input = current, .out_features = c->sizes[i]};
    return adj_affine15_layer_create(&ac, layer);
  }
  adj_affine_layer_config ac = {.dtype = c->dtype, .input = current, .in_features = c->sizes[i - 1],
                                .out_features = c->sizes[i]};
  return adj_affine_layer_create(&ac, layer);
}

static int mlp_stages(const adj_mlp_config *c, adj_layer **stages, int *n) {
  adj_decomposition *input = NULL;
  ADJ_CALL(adj_decomposition_create_on_first_ranks(c->comm, 4, (const int[4]){1, 1, 1, 1},
                                                   (const int64_t[4]){c->batch, 1, c->rows, c->cols}, &input));
  const adj_decomposition *current = input;
  adj_layer *layer = NULL;
  adj_flatten_layer_config fc = {.dtype = c->dtype, .input = current};
  int status = mlp_push(stages, n, &current, adj_flatten_layer_create(&fc, &layer), &layer);
  if (!status && c->grid_rows) status = mlp_to_grid(c, stages, n, &current);
  for (int i = 1; !status && i < c->n_sizes; i++) {
    layer = NULL;
    status = mlp_push(stages, n, &current, mlp_affine(c, i, current, &layer), &layer);
    if (!status && i + 1 < c->n_sizes) {
      adj_activation_layer_config rc = {.dtype = c->dtype, .input = current, .activation = {ADJ_RELU, 0}};
      layer = NULL;
      status = mlp_push(stages, n, &current, adj_activation_layer_create(&rc, &layer), &layer);
    }
  }
  if (!status) {
    adj_xent_layer_config lc = {.dtype = c->dtype, .input = current, .root = 0};
    layer = NULL;
    status = mlp_push(stages, n, &current, adj_xent_layer_create(&lc, &layer), &layer);
  }
  adj_decomposition_destroy(&input);
  return status;
}

int adj_mlp_create(const adj_mlp_config *c, adj_layer **network) {
  *network = NULL;
  ADJ_CALL(mlp_check(c));
  adj_layer *stages[2 * ADJ_MLP_MAX_LAYERS + 3] = {NULL};
  int n = 0;
  int status = mlp_stages(c, stages, &n);
  if (!status) status = adj_network_create("mlp", n, stages, network);
  for (int i = 0; i < n; i++) adj_layer_destroy(&stages[i]);
  return status;
}

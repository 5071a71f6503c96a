/* Stage-by-stage network building (see net_builder.h). */
#include "net_builder.h"

#include <stdio.h>

#include "adjoin/parse.h"
#include "adjoin/pointwise_layer.h"
#include "adjoin/repartition_layer.h"
#include "adjoin/network.h"
#include "error_impl.h"

int adj_builder_push(adj_builder *b, int status, adj_layer **stage) {
  if (status) return status;
  adj_layer *layer = *stage;
  if (b->n == ADJ_BUILDER_MAX_STAGES) {
    adj_layer_destroy(stage);
    return adj_error_set(ADJ_ERR_ARG, "network builder: more than %d stages", ADJ_BUILDER_MAX_STAGES);
  }
  b->stages[b->n++] = layer;
  adj_decomposition_destroy(&b->current);
  b->current = adj_decomposition_reference((adj_decomposition *)adj_layer_output_layout(layer));
  return ADJ_SUCCESS;
}

int adj_builder_start(adj_builder *b, int ndim, const int *parts, const int64_t *shape) {
  adj_decomposition_destroy(&b->current);
  return adj_decomposition_create_on_first_ranks(b->comm, ndim, parts, shape, &b->current);
}

/* True when both layouts have the same grid, global shape and cuts on the
 * same ranks: every rank holds the same block in both. */
static bool adj_builder_same_grid(const adj_decomposition *a, const adj_decomposition *b) {
  const adj_partition *pa = adj_decomposition_partition(a), *pb = adj_decomposition_partition(b);
  int ndim = adj_partition_ndim(pa);
  if (ndim != adj_partition_ndim(pb)) return false;
  for (int d = 0; d < ndim; d++) {
    int parts = adj_partition_shape(pa)[d];
    if (parts != adj_partition_shape(pb)[d] ||
        adj_decomposition_global_shape(a)[d] != adj_decomposition_global_shape(b)[d])
      return false;
    const int64_t *ca = adj_decomposition_cuts(a, d), *cb = adj_decomposition_cuts(b, d);
    for (int k = 1; k <= parts; k++)
      if (ca[k] != cb[k]) return false;
  }
  for (int i = 0; i < adj_partition_size(pa); i++)
    if (adj_partition_rank_of_index(pa, i) != adj_partition_rank_of_index(pb, i)) return false;
  return true;
}

/* True when the glue would move nothing, decided alike on every rank from the
 * shapes: the same grid and cuts, or both layouts split only the leading
 * (batch) axis, at the same cuts on the same ranks, and agree in the product
 * of the other axes (each rank's block is then the same bytes in both: a
 * flatten is a reinterpretation). */
static bool adj_builder_same_blocks(const adj_decomposition *a, const adj_decomposition *b) {
  if (adj_builder_same_grid(a, b)) return true;
  const adj_decomposition *d[2] = {a, b};
  int64_t inner[2];
  for (int k = 0; k < 2; k++) {
    const adj_partition *p = adj_decomposition_partition(d[k]);
    const int *parts = adj_partition_shape(p);
    const int64_t *shape = adj_decomposition_global_shape(d[k]);
    inner[k] = 1;
    for (int i = 1; i < adj_partition_ndim(p); i++) {
      if (parts[i] != 1) return false;
      inner[k] *= shape[i];
    }
  }
  const adj_partition *pa = adj_decomposition_partition(a), *pb = adj_decomposition_partition(b);
  if (adj_partition_shape(pa)[0] != adj_partition_shape(pb)[0] || inner[0] != inner[1] ||
      adj_decomposition_global_shape(a)[0] != adj_decomposition_global_shape(b)[0])
    return false;
  const int64_t *ca = adj_decomposition_cuts(a, 0), *cb = adj_decomposition_cuts(b, 0);
  for (int i = 0; i < adj_partition_size(pa); i++)
    if (adj_partition_rank_of_index(pa, i) != adj_partition_rank_of_index(pb, i) || ca[i + 1] != cb[i + 1])
      return false;
  return true;
}

int adj_builder_glue(adj_builder *b, int ndim, const int *parts, const int64_t *shape) {
  adj_decomposition *target;
  ADJ_CALL(adj_decomposition_create_on_first_ranks(b->comm, ndim, parts, shape, &target));
  int status = ADJ_SUCCESS;
  if (adj_builder_same_blocks(b->current, target)) {
    adj_decomposition_destroy(&b->current);
    b->current = adj_decomposition_reference(target);
  } else {
    adj_layer *layer = NULL;
    adj_repartition_layer_config rc = {.dtype = b->dtype, .input = b->current, .output = target};
    status = adj_builder_push(b, adj_repartition_layer_create(&rc, &layer), &layer);
  }
  adj_decomposition_destroy(&target);
  return status;
}

int adj_builder_relu(adj_builder *b) {
  adj_layer *layer = NULL;
  adj_activation_layer_config ac = {.dtype = b->dtype, .input = b->current, .activation = {ADJ_RELU, 0}};
  return adj_builder_push(b, adj_activation_layer_create(&ac, &layer), &layer);
}

int adj_builder_finish(adj_builder *b, int status, const char *name, adj_layer **network) {
  if (!status) status = adj_network_create(name, b->n, b->stages, network);
  for (int i = 0; i < b->n; i++) adj_layer_destroy(&b->stages[i]);
  b->n = 0;
  adj_decomposition_destroy(&b->current);
  return status;
}

bool adj_builder_parse_grid(const char *name, int max_rows, int max_cols, int parts[2]) {
  /* Checked (parse.h): "4294967297x1" is no grid, never 1x1. */
  int64_t grid[2];
  if (!name || adj_parse_int64_pair(name, 'x', 1, max_rows > max_cols ? max_rows : max_cols, "layout", grid) ||
      grid[0] > max_rows || grid[1] > max_cols)
    return false;
  parts[0] = (int)grid[0], parts[1] = (int)grid[1];
  return true;
}

/* Helpers shared by the distributed layers (see dist_layer_impl.h). */
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "dist_layer_impl.h"
#include "op_after_impl.h"

int adj_reshape_view(const adj_tensor *t, int rank, const int64_t *shape, adj_tensor *view) {
  adj_box want = adj_box_whole(rank, shape);
  char have_text[160], want_text[160];
  ADJ_CHECK(adj_box_volume(&want) == adj_tensor_volume(t), ADJ_ERR_SIZE,
            "reshape: a block of shape %s cannot be seen as %s",
            adj_shape_format(have_text, sizeof have_text, t->rank, t->shape),
            adj_shape_format(want_text, sizeof want_text, rank, shape));
  return adj_tensor_view(view, t->dtype, rank, shape, t->data);
}

int adj_layer_config_check(const char *who, const void *config, adj_dtype dtype, const adj_decomposition *input) {
  ADJ_CHECK(config, ADJ_ERR_ARG, "%s: config is NULL", who);
  ADJ_CALL(adj_dtype_check_compute(who, "the config", dtype));
  ADJ_CHECK(input, ADJ_ERR_ARG, "%s: the input decomposition is NULL", who);
  return ADJ_SUCCESS;
}

int adj_layer_agree(const adj_decomposition *d, int status) {
  const adj_partition *p = adj_decomposition_partition(d);
  return adj_status_agree(adj_partition_base_comm(p), status, adj_partition_wait_policy(p));
}

int adj_layer_alloc_between(const char *name, adj_dtype dtype, const adj_decomposition *input,
                            const adj_decomposition *output,
                            const adj_layer_methods *methods, void *impl, adj_layer **layer) {
  adj_box in = adj_decomposition_local_block(input), out = adj_decomposition_local_block(output);
  MPI_Comm base = adj_partition_base_comm(adj_decomposition_partition(input));
  ADJ_CALL(adj_layer_alloc(name, base, dtype, in.rank, in.extent, out.rank, out.extent, methods, impl, layer));
  /* Decompositions are immutable; referencing one only counts its users. */
  adj_layer_set_layouts(*layer, (adj_decomposition *)input, (adj_decomposition *)output);
  return ADJ_SUCCESS;
}

int adj_partition_reshape(const adj_partition *p, int ndim, const int *shape, adj_partition **reshaped) {
  *reshaped = NULL;
  int n = adj_partition_size(p);
  int *ranks = malloc(sizeof *ranks * (size_t)n);
  int local = ranks ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "partition reshape: out of memory");
  MPI_Comm base = adj_partition_base_comm(p);
  int status = adj_status_agree(base, local, adj_partition_wait_policy(p));
  if (!status) {
    for (int i = 0; i < n; i++) ranks[i] = adj_partition_rank_of_index(p, i);
    status = adj_partition_create(base, ndim, shape, n, ranks, reshaped);
  }
  free(ranks);
  return status;
}

void adj_tensor_copy_flat(adj_tensor *dst, const adj_tensor *src) {
  memcpy(dst->data, src->data, adj_tensor_bytes(src));
}

int adj_layer_move_ops(int prior, int n, adj_op *const *ops, adj_direction direction, const adj_tensor *const *in,
                       adj_tensor *const *out) {
  int status = ADJ_SUCCESS;
  bool begun[ADJ_LAYER_MAX_MOVES] = {false}, first = true;
  if (n > ADJ_LAYER_MAX_MOVES) return adj_error_set(ADJ_ERR_ARG, "layer: %d operators at once, at most %d", n,
                                                    ADJ_LAYER_MAX_MOVES);
  for (int i = 0; i < n && !status; i++)
    if (ops[i] && in[i]) {
      status = first ? adj_op_begin_after(&prior, ops[i], direction, in[i], out[i])
                     : adj_op_begin(ops[i], direction, in[i], out[i]);
      begun[i] = !status, first = false;
    }
  for (int i = 0; i < n; i++) {
    int ended = begun[i] ? adj_op_end(ops[i]) : ADJ_SUCCESS;
    if (!status) status = ended;
  }
  return status ? status : prior;
}

int adj_layer_create_weighted(const char *name, adj_dtype dtype, const adj_decomposition *input,
                              adj_decomposition *output, const adj_layer_methods *methods, void *impl,
                              void (*free_impl)(void *), adj_decomposition *weight, adj_decomposition *bias,
                              adj_layer **layer) {
  int status = adj_layer_alloc_between(name, dtype, input, output, methods, impl, layer);
  if (status) free_impl(impl);
  if (!status) status = adj_layer_add_parameter(*layer, "weight", weight);
  if (!status && bias) status = adj_layer_add_parameter(*layer, "bias", bias);
  status = *layer ? adj_layer_agree(input, status) : status;
  if (status) adj_layer_destroy(layer);
  return status;
}

/* Battery cases for padding modes (pad_layer.h) and average pooling without
 * the padding in its divisor (pool.h ADJ_POOL_AVG_EXCLUDE_PAD): the
 * dot-product test of each (both linear, so the Jacobian is the map itself)
 * in both dtypes, for zeros, reflect, replicate and circular padding in 1-D,
 * 2-D and 3-D, on spatial partitions with permuted ranks, inactive ranks and
 * uneven cuts, where boundary workers hold narrow or empty blocks. */
#include <stdio.h>
#include <string.h>

#include "adjoin/pool_layer.h"
#include "adjoin/pad_layer.h"
#include "adjoin/layer_dottest.h"
#include "battery.h"
#include "error_impl.h"
#include "layer_cases.h"

typedef struct adj_pad_spec {
  int ndim;
  int64_t shape[5];
  int parts[5];
  const char *ranks;
  bool uneven;
  int64_t padding[3][2]; /* < every extent, so every mode applies */
} adj_pad_spec;

static const adj_pad_spec adj_pad_specs[] = {
    {4, {2, 3, 11, 9}, {1, 1, 2, 2}, "0123", false, {{2, 1}, {1, 2}}},
    {4, {2, 3, 11, 9}, {1, 1, 2, 2}, "3120", true, {{3, 0}, {4, 4}}},
    {4, {2, 2, 7, 6}, {1, 2, 1, 1}, "10", false, {{1, 1}, {5, 2}}},
    {4, {1, 2, 9, 8}, {1, 1, 3, 1}, "213", false, {{8, 7}, {0, 1}}},
    {4, {1, 2, 9, 8}, {1, 1, 1, 4}, "3210", true, {{2, 2}, {7, 6}}},
    {3, {2, 2, 17}, {1, 1, 3}, "012", true, {{16, 9}}},
    {3, {2, 2, 17}, {1, 1, 4}, "0123", false, {{5, 0}}},
    {5, {1, 2, 5, 4, 3}, {1, 1, 2, 1, 2}, "0213", false, {{1, 2}, {3, 0}, {2, 2}}},
    {4, {1, 2, 12, 10}, {1, 1, 5, 1}, "43210", true, {{4, 11}, {1, 1}}},
    {4, {2, 2, 11, 9}, {1, 2, 3, 1}, "012345", false, {{2, 2}, {2, 2}}},
    {4, {1, 1, 16, 7}, {1, 1, 7, 1}, "6543210", true, {{15, 3}, {0, 6}}},
    {4, {2, 2, 9, 9}, {2, 1, 2, 2}, "01234567", false, {{3, 3}, {1, 4}}},
};

/* params: [0] row of adj_pad_specs, [1] padding mode; [2] 1: average pooling
 * with kernel 2 * padding + 1 over the spec's padding instead. */
static int adj_run_pad(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  const adj_pad_spec *s = &adj_pad_specs[c->params[0]];
  adj_decomposition *input = NULL;
  adj_layer *layer = NULL;
  int status = adj_case_layout(comm, s->ndim, s->shape, s->parts, s->ranks, s->uneven, &input);
  if (!status && c->params[2]) {
    adj_window_geometry w = {.spatial_dims = s->ndim - 2};
    for (int d = 0; d < w.spatial_dims; d++) {
      int64_t p = s->padding[d][0] < 2 ? s->padding[d][0] : 2;
      w.kernel[d] = 2 * p + 1, w.stride[d] = 1 + d, w.padding_left[d] = w.padding_right[d] = p;
    }
    adj_pool_layer_config pool = {.dtype = c->dtype, .kind = ADJ_POOL_AVG_EXCLUDE_PAD, .input = input, .window = w};
    status = adj_pool_layer_create(&pool, &layer);
  } else if (!status) {
    adj_pad_layer_config pad = {.dtype = c->dtype, .input = input, .spatial_dims = s->ndim - 2,
                                .mode = (adj_padding_mode)c->params[1]};
    memcpy(pad.padding, s->padding, sizeof pad.padding);
    status = adj_pad_layer_create(&pad, &layer);
  }
  if (!status) status = adj_dottest_layer(layer, c->seed + 71, r);
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&input);
  return status;
}

/* One case of spec `row`: mode `mode`, or average pooling when `pool`. */
static int adj_battery_add_pad_case(adj_battery *b, size_t row, int mode, bool pool) {
  const adj_pad_spec *s = &adj_pad_specs[row];
  char grid[24], padding[48];
  adj_battery_format_ints(grid, sizeof grid, s->ndim, s->parts);
  adj_battery_format_int64s(padding, sizeof padding, 2 * (s->ndim - 2), &s->padding[0][0]);
  adj_battery_case c = {.params = {(int64_t)row, mode, pool}, .is_layer = 1, .run = adj_run_pad};
  snprintf(c.op, sizeof c.op, pool ? "avg_pool_nopad" : "pad");
  snprintf(c.partitions, sizeof c.partitions, "%s %s@%s%s pad %s", pool ? "avg" : adj_padding_mode_name(mode), grid,
           s->ranks, s->uneven ? ":q" : "", padding);
  adj_battery_format_int64s(c.shape, sizeof c.shape, s->ndim, s->shape);
  c.ranks = adj_battery_ranks_needed(s->ranks);
  return adj_battery_add_both_dtypes(b, &c);
}

int adj_battery_add_pad(adj_battery *b) {
  for (size_t row = 0; row < sizeof adj_pad_specs / sizeof adj_pad_specs[0]; row++) {
    for (int mode = ADJ_PAD_ZEROS; mode <= ADJ_PAD_CIRCULAR; mode++)
      ADJ_CALL(adj_battery_add_pad_case(b, row, mode, false));
    ADJ_CALL(adj_battery_add_pad_case(b, row, ADJ_PAD_ZEROS, true));
  }
  return ADJ_SUCCESS;
}

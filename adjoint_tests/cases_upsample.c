/* Battery cases for upsampling (upsample_layer.h): the dot-product test of
 * the interpolation (linear, so its Jacobian is itself) in both dtypes, for
 * nearest and linear modes with and without align_corners, by size and by
 * scale factor, up and down, in 1-D, 2-D and 3-D, on partitions over
 * channels and space with permuted ranks, inactive ranks and uneven cuts. */
#include <stdio.h>
#include <string.h>

#include "adjoin/upsample_layer.h"
#include "adjoin/layer_dottest.h"
#include "battery.h"
#include "error_impl.h"
#include "layer_cases.h"

typedef struct adj_upsample_spec {
  int ndim;
  int64_t shape[5];
  int parts[5];
  const char *ranks;
  bool uneven;
  int64_t size[3];
  double scale[3];
} adj_upsample_spec;

static const adj_upsample_spec adj_upsample_specs[] = {
    {4, {2, 3, 11, 9}, {1, 1, 2, 2}, "0123", false, {0}, {2, 2}},
    {4, {2, 3, 11, 9}, {1, 1, 2, 2}, "3120", true, {0}, {1.5, 2.5}},
    {4, {2, 2, 7, 6}, {1, 2, 1, 1}, "10", false, {13, 5}, {0}},
    {4, {1, 2, 9, 8}, {1, 1, 3, 1}, "213", false, {4, 17}, {0}},
    {4, {1, 2, 9, 8}, {1, 1, 1, 4}, "3210", true, {0}, {3, 3}},
    {3, {2, 2, 17}, {1, 1, 3}, "012", true, {0}, {2.5}},
    {3, {2, 2, 17}, {1, 1, 4}, "0123", false, {6}, {0}},
    {5, {1, 2, 5, 4, 3}, {1, 1, 2, 1, 2}, "0213", false, {0}, {2, 2, 2}},
    {4, {1, 2, 12, 10}, {1, 1, 5, 1}, "43210", true, {0}, {2, 2}},
    {4, {2, 2, 11, 9}, {1, 2, 3, 1}, "012345", false, {20, 16}, {0}},
    {4, {1, 1, 16, 7}, {1, 1, 7, 1}, "6543210", true, {0}, {2, 3}},
    {4, {2, 2, 9, 9}, {2, 1, 2, 2}, "01234567", false, {0}, {2, 2}},
};

typedef struct adj_upsample_mode {
  const char *name;
  adj_interp_mode mode;
  bool align_corners;
} adj_upsample_mode;

static const adj_upsample_mode adj_upsample_modes[] = {
    {"nearest", ADJ_INTERP_NEAREST, false},
    {"linear", ADJ_INTERP_LINEAR, false},
    {"linear-ac", ADJ_INTERP_LINEAR, true},
};

/* params: [0] row of adj_upsample_specs, [1] row of adj_upsample_modes. */
static int adj_run_upsample(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  const adj_upsample_spec *s = &adj_upsample_specs[c->params[0]];
  const adj_upsample_mode *m = &adj_upsample_modes[c->params[1]];
  adj_decomposition *input = NULL;
  adj_layer *layer = NULL;
  int status = adj_case_layout(comm, s->ndim, s->shape, s->parts, s->ranks, s->uneven, &input);
  adj_upsample_layer_config config = {.dtype = c->dtype, .input = input, .spatial_dims = s->ndim - 2,
                                      .mode = m->mode, .align_corners = m->align_corners};
  memcpy(config.size, s->size, sizeof config.size);
  memcpy(config.scale_factor, s->scale, sizeof config.scale_factor);
  if (!status) status = adj_upsample_layer_create(&config, &layer);
  if (!status) status = adj_dottest_layer(layer, c->seed + 67, r);
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&input);
  return status;
}

int adj_battery_add_upsample(adj_battery *b) {
  for (size_t row = 0; row < sizeof adj_upsample_specs / sizeof adj_upsample_specs[0]; row++) {
    const adj_upsample_spec *s = &adj_upsample_specs[row];
    char grid[24], target[40];
    adj_battery_format_ints(grid, sizeof grid, s->ndim, s->parts);
    if (s->size[0]) adj_battery_format_int64s(target, sizeof target, s->ndim - 2, s->size);
    else snprintf(target, sizeof target, "x%g", s->scale[0]);
    for (size_t m = 0; m < sizeof adj_upsample_modes / sizeof adj_upsample_modes[0]; m++) {
      adj_battery_case c = {.params = {(int64_t)row, (int64_t)m}, .is_layer = 1, .run = adj_run_upsample};
      snprintf(c.op, sizeof c.op, "upsample");
      snprintf(c.partitions, sizeof c.partitions, "%s %s@%s%s -> %s", adj_upsample_modes[m].name, grid, s->ranks,
               s->uneven ? ":q" : "", target);
      adj_battery_format_int64s(c.shape, sizeof c.shape, s->ndim, s->shape);
      c.ranks = adj_battery_ranks_needed(s->ranks);
      ADJ_CALL(adj_battery_add_both_dtypes(b, &c));
    }
  }
  return ADJ_SUCCESS;
}

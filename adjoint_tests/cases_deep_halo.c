/* Battery cases for the deep halo layer (deep_halo_layer.h): the Jacobian
 * dot-product test of runs of convolution, pooling and activation layers
 * fused over one halo exchange, in both dtypes, on spatial (and batch)
 * partitions with permuted ranks, inactive ranks and uneven cuts that leave
 * workers with empty blocks.  The runs: LeNet-5's two convolution blocks,
 * three 3x3 convolutions with tanh, and a strided convolution, an average
 * pool and a dilated convolution. */
#include <stdio.h>
#include <string.h>

#include "adjoin/conv_layer.h"
#include "adjoin/deep_halo_layer.h"
#include "adjoin/pointwise_layer.h"
#include "adjoin/pool_layer.h"
#include "adjoin/layer_dottest.h"
#include "battery.h"
#include "error_impl.h"
#include "layer_cases.h"

enum { ADJ_DEEP_CASE_STAGES = 6 };

typedef struct adj_deep_case_run {
  const char *name;
  int64_t channels, height, width;
  int count;
  adj_deep_case_stage stages[ADJ_DEEP_CASE_STAGES];
} adj_deep_case_run;

static const adj_deep_case_run adj_deep_runs[] = {
    {"lenet", 1, 28, 28, 6,
     {{'c', 6, 5, 1, 1, 2}, {'m', 0, 2, 2, 1, 0}, {'r', 0, 1, 1, 1, 0}, {'c', 16, 5, 1, 1, 0}, {'m', 0, 2, 2, 1, 0},
      {'r', 0, 1, 1, 1, 0}}},
    {"3x3x3", 2, 19, 13, 5,
     {{'c', 3, 3, 1, 1, 1}, {'t', 0, 1, 1, 1, 0}, {'c', 4, 3, 1, 1, 1}, {'t', 0, 1, 1, 1, 0}, {'c', 2, 3, 1, 1, 1}}},
    {"strided", 2, 17, 15, 4,
     {{'c', 3, 3, 2, 1, 1}, {'a', 0, 3, 1, 1, 1}, {'c', 2, 2, 1, 2, 0}, {'r', 0, 1, 1, 1, 0}}},
};

typedef struct adj_deep_grid {
  int parts[4]; /* (N, C, H, W); C stays 1 */
  const char *ranks;
  bool uneven;
} adj_deep_grid;

static const adj_deep_grid adj_deep_grids[] = {
    {{1, 1, 1, 1}, "0", false},        {{1, 1, 2, 1}, "10", false},       {{1, 1, 1, 2}, "01", true},
    {{1, 1, 3, 1}, "021", false},      {{1, 1, 2, 2}, "3120", false},     {{1, 1, 2, 2}, "0123", true},
    {{2, 1, 2, 1}, "1302", false},     {{1, 1, 5, 1}, "43210", true},     {{1, 1, 3, 2}, "012345", false},
    {{1, 1, 7, 1}, "6543210", true},   {{2, 1, 2, 2}, "01234567", false}, {{1, 1, 2, 3}, "513024", false},
};

int adj_deep_case_stage_create(const adj_deep_case_stage *s, adj_dtype dtype, const adj_decomposition *in,
                               adj_layer **layer) {
  adj_window_geometry w = {.spatial_dims = 2, .kernel = {s->k, s->k}, .stride = {s->s, s->s},
                           .dilation = {s->d, s->d}, .padding_left = {s->pad, s->pad},
                           .padding_right = {s->pad, s->pad}};
  const adj_partition *p = adj_decomposition_partition(in);
  if (s->kind == 'c') {
    int ranks[8];
    for (int i = 0; i < adj_partition_size(p); i++) ranks[i] = adj_partition_rank_of_index(p, i);
    adj_conv_layer_config c = {.comm = adj_partition_base_comm(p), .dtype = dtype, .window = w,
                               .out_channels = s->channels, .input = in, .work_ranks = ranks, .output_ranks = ranks};
    return adj_conv_layer_create(&c, layer);
  }
  if (s->kind == 'm' || s->kind == 'a') {
    adj_pool_layer_config c = {.dtype = dtype, .kind = s->kind == 'm' ? ADJ_POOL_MAX : ADJ_POOL_AVG, .input = in,
                               .window = w};
    return adj_pool_layer_create(&c, layer);
  }
  adj_activation_layer_config c = {.dtype = dtype, .input = in,
                                   .activation = {s->kind == 'r' ? ADJ_RELU : ADJ_TANH, 0}};
  return adj_activation_layer_create(&c, layer);
}

/* params: [0] run, [1] grid; [2] batch. */
static int adj_run_deep_halo(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  const adj_deep_case_run *run = &adj_deep_runs[c->params[0]];
  const adj_deep_grid *g = &adj_deep_grids[c->params[1]];
  const int64_t shape[4] = {c->params[2], run->channels, run->height, run->width};
  adj_decomposition *input = NULL;
  adj_layer *layers[ADJ_DEEP_CASE_STAGES] = {NULL}, *fused = NULL;
  int status = adj_case_layout(comm, 4, shape, g->parts, g->ranks, g->uneven, &input);
  const adj_decomposition *in = input;
  for (int j = 0; !status && j < run->count; j++) {
    status = adj_deep_case_stage_create(&run->stages[j], c->dtype, in, &layers[j]);
    if (!status) in = adj_layer_output_layout(layers[j]);
  }
  if (!status)
    status = adj_deep_halo_layer_create(&(adj_deep_halo_config){.count = run->count, .layers = layers}, &fused);
  for (int j = 0; j < run->count; j++) adj_layer_destroy(&layers[j]);
  if (!status) status = adj_dottest_layer(fused, c->seed + 169, r);
  adj_layer_destroy(&fused);
  adj_decomposition_destroy(&input);
  return status;
}

int adj_battery_add_deep_halo(adj_battery *b) {
  for (size_t run = 0; run < sizeof adj_deep_runs / sizeof adj_deep_runs[0]; run++)
    for (size_t grid = 0; grid < sizeof adj_deep_grids / sizeof adj_deep_grids[0]; grid++) {
      const adj_deep_grid *g = &adj_deep_grids[grid];
      int64_t batch = g->parts[0] > 1 ? 3 : 2;
      adj_battery_case c = {.params = {(int64_t)run, (int64_t)grid, batch}, .is_layer = 1, .run = adj_run_deep_halo};
      char parts[24];
      adj_battery_format_ints(parts, sizeof parts, 4, g->parts);
      snprintf(c.op, sizeof c.op, "deep_halo");
      snprintf(c.partitions, sizeof c.partitions, "%s %s@%s%s", adj_deep_runs[run].name, parts, g->ranks,
               g->uneven ? ":q" : "");
      const int64_t shape[4] = {batch, adj_deep_runs[run].channels, adj_deep_runs[run].height,
                                adj_deep_runs[run].width};
      adj_battery_format_int64s(c.shape, sizeof c.shape, 4, shape);
      c.ranks = adj_battery_ranks_needed(g->ranks);
      ADJ_CALL(adj_battery_add_both_dtypes(b, &c));
    }
  return ADJ_SUCCESS;
}

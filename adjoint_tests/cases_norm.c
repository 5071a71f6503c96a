/* Battery cases for batch normalisation (batchnorm_layer.h): the Jacobian
 * dot-product test of adj_dottest_layer (input, gamma and beta perturbed at
 * once) in training and evaluation, with and without affine parameters and
 * running statistics, in both dtypes.  Layouts split batch, channels and
 * space in 1-D, 2-D and 3-D, permute their ranks, leave ranks inactive and
 * cut unevenly with empty blocks (channel groups without values, workers
 * without channels); a few need 5 to 8 ranks. */
#include <stdio.h>

#include "adjoin/batchnorm_layer.h"
#include "adjoin/layer_dottest.h"
#include "battery.h"
#include "error_impl.h"
#include "layer_cases.h"

typedef struct adj_norm_spec {
  int ndim;
  int64_t shape[5];
  int parts[5];
  const char *ranks;
  bool uneven;
} adj_norm_spec;

static const adj_norm_spec adj_norm_specs[] = {
    {2, {9, 5}, {3, 1}, "012", false},
    {2, {9, 5}, {1, 2}, "10", false},
    {2, {7, 6}, {2, 2}, "3120", true},
    {3, {4, 6, 11}, {2, 3, 1}, "012345", true},
    {4, {4, 5, 7, 6}, {1, 1, 2, 2}, "0123", false},
    {4, {4, 5, 7, 6}, {2, 2, 1, 1}, "3210", true},
    {4, {2, 3, 6, 5}, {1, 1, 1, 3}, "123", false},
    {4, {3, 3, 9, 4}, {1, 1, 5, 1}, "43210", false},
    {4, {3, 4, 5, 6}, {1, 2, 3, 1}, "521403", false},
    {4, {4, 5, 7, 6}, {2, 2, 2, 1}, "76543210", true},
    {5, {3, 4, 5, 3, 4}, {1, 1, 2, 1, 2}, "0213", false},
    {5, {2, 3, 4, 4, 3}, {1, 1, 7, 1, 1}, "6543210", false},
};

typedef struct adj_norm_mode {
  const char *name;
  bool training, no_affine, no_running_stats;
} adj_norm_mode;

static const adj_norm_mode adj_norm_modes[] = {
    {"train", true, false, false},
    {"train-noaffine", true, true, false},
    {"eval", false, false, false},
    {"eval-untracked", false, false, true},
};

/* params: [0] row of adj_norm_specs, [1] row of adj_norm_modes. */
static int adj_run_batchnorm(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  const adj_norm_spec *s = &adj_norm_specs[c->params[0]];
  const adj_norm_mode *m = &adj_norm_modes[c->params[1]];
  adj_decomposition *input = NULL;
  adj_layer *layer = NULL;
  int status = adj_case_layout(comm, s->ndim, s->shape, s->parts, s->ranks, s->uneven, &input);
  if (!status)
    status = adj_batchnorm_layer_create(
        &(adj_batchnorm_layer_config){.dtype = c->dtype, .input = input, .num_features = s->shape[1], .eps = 1e-5,
                                      .momentum = 0.1, .no_affine = m->no_affine,
                                      .no_running_stats = m->no_running_stats},
        &layer);
  if (!status) status = adj_batchnorm_layer_set_training(layer, m->training);
  /* Evaluation after one training step, so the running statistics differ
   * from their initial (0, 1). */
  if (!status && !m->training) {
    adj_tensor x, y;
    status = adj_layer_create_input(layer, &x);
    if (!status) status = adj_layer_create_output(layer, &y);
    if (!status) {
      for (int64_t i = 0; i < adj_tensor_volume(&x); i++) adj_tensor_set(&x, i, (double)(i % 7) - 2.5);
      adj_batchnorm_layer_set_training(layer, true);
      status = adj_layer_forward(layer, &x, &y);
      adj_batchnorm_layer_set_training(layer, false);
    }
    adj_tensor_destroy(&x), adj_tensor_destroy(&y);
  }
  if (!status) status = adj_dottest_layer(layer, c->seed + 53, r);
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&input);
  return status;
}

int adj_battery_add_norm(adj_battery *b) {
  for (size_t row = 0; row < sizeof adj_norm_specs / sizeof adj_norm_specs[0]; row++) {
    const adj_norm_spec *s = &adj_norm_specs[row];
    char grid[24];
    adj_battery_format_ints(grid, sizeof grid, s->ndim, s->parts);
    for (size_t m = 0; m < sizeof adj_norm_modes / sizeof adj_norm_modes[0]; m++) {
      adj_battery_case c = {.params = {(int64_t)row, (int64_t)m}, .is_layer = 1, .run = adj_run_batchnorm};
      snprintf(c.op, sizeof c.op, "batchnorm");
      snprintf(c.partitions, sizeof c.partitions, "%s@%s%s %s", grid, s->ranks, s->uneven ? ":q" : "",
               adj_norm_modes[m].name);
      adj_battery_format_int64s(c.shape, sizeof c.shape, s->ndim, s->shape);
      c.ranks = adj_battery_ranks_needed(s->ranks);
      ADJ_CALL(adj_battery_add_both_dtypes(b, &c));
    }
  }
  return ADJ_SUCCESS;
}

/* Battery cases for the losses of loss_layers.h: the Jacobian dot-product test of
 * adj_dottest_layer for every loss that takes a point drawn from [-1, 1) (BCE
 * and Poisson NLL with a linear input need positive inputs: t327 tests them at
 * chosen points) and every reduction, in both dtypes, on layouts that split
 * batch and classes unevenly, leave ranks inactive, permute them, and put the
 * reduced output on a rank that may hold no input. */
#include <stdio.h>

#include "adjoin/loss_layers.h"
#include "adjoin/layer_dottest.h"
#include "battery.h"
#include "error_impl.h"
#include "layer_cases.h"

typedef struct adj_loss_layout {
  int64_t shape[2];
  int parts[2];
  const char *ranks;
  bool uneven;
  int root;
} adj_loss_layout;

static const adj_loss_layout adj_loss_layouts[] = {
    {{7, 5}, {2, 2}, "3120", true, 0},
    {{6, 4}, {3, 1}, "012", false, 3},
    {{5, 6}, {1, 1}, "2", false, 1},
    {{9, 7}, {5, 1}, "43210", true, 4},
};

typedef struct adj_loss_spec {
  const char *name;
  adj_loss_kind kind;
  bool log_target;
} adj_loss_spec;

static const adj_loss_spec adj_loss_specs[] = {
    {"l1", ADJ_LOSS_L1, false},       {"mse", ADJ_LOSS_MSE, false},  {"bce_logits", ADJ_LOSS_BCE_WITH_LOGITS, false},
    {"kl_div", ADJ_LOSS_KL_DIV, false}, {"kl_div_log", ADJ_LOSS_KL_DIV, true}, {"poisson", ADJ_LOSS_POISSON_NLL, false},
    {"nll", ADJ_LOSS_NLL, false},
};

static const char *const adj_reduction_names[] = {"mean", "sum", "none", "batchmean"};

/* A target in the loss's domain, varied by rank and element. */
static double adj_loss_case_target(const adj_loss_spec *s, int rank, int64_t i) {
  double u = (double)((i * 7 + 3 * rank + 1) % 11) / 10.0; /* [0, 1] */
  switch (s->kind) {
  case ADJ_LOSS_L1:
  case ADJ_LOSS_MSE: return 2 * u - 1;
  case ADJ_LOSS_KL_DIV: return s->log_target ? -3 * u : u;
  case ADJ_LOSS_POISSON_NLL: return (double)((i + rank) % 5);
  default: return u;
  }
}

static int adj_loss_case_targets(const adj_loss_spec *s, adj_layer *layer) {
  int rank;
  MPI_Comm_rank(adj_layer_comm(layer), &rank);
  int64_t rows = adj_layer_input_shape(layer)[0], classes = adj_layer_input_shape(layer)[1];
  if (s->kind == ADJ_LOSS_NLL) {
    int64_t labels[16] = {0};
    int64_t total = adj_decomposition_global_shape(adj_layer_input_layout(layer))[1];
    for (int64_t i = 0; i < rows && i < 16; i++) labels[i] = (i * 3 + rank) % total;
    (void)classes;
    return adj_loss_layer_set_labels(layer, labels, rows);
  }
  adj_tensor t;
  ADJ_CALL(adj_layer_create_input(layer, &t));
  for (int64_t i = 0; i < adj_tensor_volume(&t); i++) adj_tensor_set(&t, i, adj_loss_case_target(s, rank, i));
  int status = adj_loss_layer_set_target(layer, &t);
  adj_tensor_destroy(&t);
  return status;
}

/* params: [0] layout row, [1] loss row, [2] reduction. */
static int adj_run_loss(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  const adj_loss_layout *g = &adj_loss_layouts[c->params[0]];
  const adj_loss_spec *s = &adj_loss_specs[c->params[1]];
  adj_decomposition *input = NULL;
  adj_layer *layer = NULL;
  int status = adj_case_layout(comm, 2, g->shape, g->parts, g->ranks, g->uneven, &input);
  if (!status)
    status = adj_loss_layer_create(&(adj_loss_layer_config){.dtype = c->dtype, .kind = s->kind,
                                                      .reduction = (adj_loss_reduction)c->params[2],
                                                      .input = input, .root = g->root,
                                                      .log_target = s->log_target},
                                   &layer);
  if (!status) status = adj_loss_case_targets(s, layer);
  if (!status) status = adj_dottest_layer(layer, c->seed + 59, r);
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&input);
  return status;
}

int adj_battery_add_losses(adj_battery *b) {
  for (size_t row = 0; row < sizeof adj_loss_layouts / sizeof adj_loss_layouts[0]; row++) {
    const adj_loss_layout *g = &adj_loss_layouts[row];
    for (size_t k = 0; k < sizeof adj_loss_specs / sizeof adj_loss_specs[0]; k++) {
      const adj_loss_spec *s = &adj_loss_specs[k];
      for (int red = ADJ_LOSS_MEAN; red <= ADJ_LOSS_BATCHMEAN; red++) {
        if (red == ADJ_LOSS_BATCHMEAN && s->kind != ADJ_LOSS_KL_DIV) continue;
        if (red == ADJ_LOSS_NONE && s->kind == ADJ_LOSS_NLL && g->parts[1] > 1) continue;
        adj_battery_case c = {.params = {(int64_t)row, (int64_t)k, red}, .is_layer = 1, .run = adj_run_loss};
        char grid[24];
        adj_battery_format_ints(grid, sizeof grid, 2, g->parts);
        snprintf(c.op, sizeof c.op, "loss");
        snprintf(c.partitions, sizeof c.partitions, "%s %s %s@%s%s root %d", s->name, adj_reduction_names[red], grid,
                 g->ranks, g->uneven ? ":q" : "", g->root);
        adj_battery_format_int64s(c.shape, sizeof c.shape, 2, g->shape);
        int needed = adj_battery_ranks_needed(g->ranks);
        c.ranks = needed > g->root + 1 ? needed : g->root + 1;
        ADJ_CALL(adj_battery_add_both_dtypes(b, &c));
      }
    }
  }
  return ADJ_SUCCESS;
}

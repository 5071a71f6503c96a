/* Collective safety of the newer layers, as t409 for LeNet-5: a failure
 * injected on one rank (internal/fault_impl.h) in the forward, jvp and
 * backward of every stage, and at every "local" site (a local step before a
 * collective), ends in the same ADJ_ERR_MEM and message naming the site on
 * every rank, never a hang (the test's timeout), and a clean pass succeeds
 * afterwards.  Each site fails once on rank 0 and once on the last rank
 * (fault_check.h).  The layers, in:
 *   - the encoder-decoder (networks/encdec.net: conv, batch norm, ReLU, max pool,
 *     upsample, flatten, repartition, affine, softmax cross-entropy),
 *     sequential (every other rank holds nothing) and on the spatial grids
 *     Nx1 and 2x2 that fit;
 *   - LeNet-5 with deep halos (its conv blocks fused into one layer), plus
 *     the fused layer's local chain on rank 0;
 *   - the MLP of 1.5D affine layers (mlp.h with a grid);
 *   - the phantom and tensor-parallel layers (phantom_layer.h), alone;
 *   - the pad layer (pad_layer.h), reflect and circular, alone;
 *   - each loss of loss_layers.h alone, reduced by its mean, on a batch cut over
 *     every rank (at 4 and 5 ranks some blocks are empty).
 * An unknown or never-reached site fails the test, so it cannot pass
 * vacuously. */
#include <stdio.h>
#include <string.h>

#include "fault_check.h"
#include "net_check.h"

enum { BATCH = 2, ROWS = 3, COLS = 4 };

static const int64_t labels[4] = {7, 2, 9, 4};

/* A network ending in softmax cross-entropy, injected at every site. */
static void network_case(adj_test *t, adj_layer *net, const char *what) {
  if (!net) return;
  ADJ_TEST_OK(t, adj_network_init_uniform(net, 5));
  int64_t batch = adj_layer_input_shape(net)[0];
  ADJ_TEST_OK(t, adj_xent_layer_set_labels(adj_network_build_loss(net), labels, batch));
  fc_run r;
  if (fc_run_begin(t, &r, net)) fc_inject_stages(t, &r);
  adj_test_report(t, "%s on %d ranks: %d failure sites, each alike on every rank", what, t->size, r.sites);
  fc_run_end(&r);
}

static void encdec_case(adj_test *t, const char *layout) {
  adj_layer *net = NULL;
  ADJ_TEST_OK(t, nc_build_network("encdec", layout, &(adj_network_build_options){.dtype = ADJ_FLOAT64, .batch = BATCH},
                                  &net));
  char what[64];
  snprintf(what, sizeof what, "encdec %s", layout);
  network_case(t, net, what);
}

static void lenet_deep_halo_case(adj_test *t) {
  const char *layouts[NC_MAX_LAYOUTS];
  const char *layout = layouts[nc_layouts_fitting(t->size, layouts) - 1];
  adj_layer *net = NULL;
  adj_network_build_options o = {.dtype = ADJ_FLOAT64, .batch = BATCH, .deep_halos = true};
  ADJ_TEST_OK(t, nc_build_network("lenet", layout, &o, &net));
  if (!net) return;
  ADJ_TEST_OK(t, adj_network_init_uniform(net, 5));
  ADJ_TEST_OK(t, adj_xent_layer_set_labels(adj_network_build_loss(net), labels, BATCH));
  fc_run r;
  if (fc_run_begin(t, &r, net)) {
    fc_inject_stages(t, &r);
    /* The fused layer's local convolutions (on rank 0, which computes in
     * every layout): a failure inside the chain, after its exchange. */
    fc_inject_on(t, &r, "deep halo stage forward", 0);
    fc_inject_on(t, &r, "deep halo stage backward", 0);
    r.sites += 2;
  }
  adj_test_report(t, "lenet5 %s with deep halos on %d ranks: %d failure sites, each alike on every rank", layout,
                  t->size, r.sites);
  fc_run_end(&r);
}

static void mlp_grid_case(adj_test *t) {
  /* P_r x P_c over every rank: 2 x 2 at 4, else size x 1. */
  int grid_rows = t->size == 4 ? 2 : t->size, grid_cols = t->size == 4 ? 2 : 1;
  adj_layer *net = NULL;
  char grid[32];
  snprintf(grid, sizeof grid, "%dx%d", grid_rows, grid_cols);
  adj_network_build_options o = {.dtype = ADJ_FLOAT64, .batch = 4};
  ADJ_TEST_OK(t, nc_build_text("input 1 4 4\nfc out=12\nrelu\nfc out=10\nloss type=xent\n", grid, &o, &net));
  char what[64];
  snprintf(what, sizeof what, "mlp 16-12-10 on a %dx%d grid", grid_rows, grid_cols);
  network_case(t, net, what);
}

/* A layer alone (parameters drawn like a network's), injected at every site. */
static void lone_case(adj_test *t, adj_layer *layer, const char *how) {
  if (!layer) return;
  ADJ_TEST_OK(t, adj_network_init_uniform(layer, 5));
  fc_run r;
  if (fc_run_begin(t, &r, layer)) fc_inject_stages(t, &r);
  adj_test_report(t, "%s%s alone on %d ranks: %d failure sites, each alike on every rank", adj_layer_name(layer), how,
                  t->size, r.sites);
  fc_run_end(&r);
}

/* The input decomposition of a layer tested alone: shape over workers
 * (every rank).  *p holds its partition until lone_input_destroy. */
static adj_decomposition *lone_input(adj_test *t, int rank, const int *workers, const int64_t *shape,
                                     adj_partition **p) {
  adj_decomposition *input = NULL;
  *p = NULL;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, rank, workers, t->size, NULL, p));
  if (*p) ADJ_TEST_OK(t, adj_decomposition_create(*p, rank, shape, &input));
  return input;
}

static void lone_input_destroy(adj_partition **p, adj_decomposition **input) {
  adj_decomposition_destroy(input);
  adj_partition_destroy(p);
}

/* x (ROWS, 11) with the features over a 1 x size partition. */
static void phantom_cases(adj_test *t) {
  adj_partition *p;
  adj_decomposition *input = lone_input(t, 2, (const int[2]){1, t->size}, (const int64_t[2]){ROWS, 11}, &p);
  adj_phantom_layer_config c = {.dtype = ADJ_FLOAT64, .input = input, .in_features = 11, .out_features = 13,
                                .ghosts = 1, .allow_large_k = true};
  for (int tp = 0; tp < 2 && input; tp++) {
    adj_layer *layer = NULL;
    ADJ_TEST_OK(t, tp ? adj_tp_layer_create(&c, &layer) : adj_phantom_layer_create(&c, &layer));
    lone_case(t, layer, "");
  }
  lone_input_destroy(&p, &input);
}

/* Padding (1, 2, 6, 5) by (1, 2) rows and (2, 1) columns, the rows over
 * every rank: the boundary rows move between workers. */
static void pad_cases(adj_test *t) {
  adj_partition *p;
  adj_decomposition *input =
      lone_input(t, 4, (const int[4]){1, 1, t->size, 1}, (const int64_t[4]){1, 2, 6, 5}, &p);
  const adj_padding_mode modes[2] = {ADJ_PAD_REFLECT, ADJ_PAD_CIRCULAR};
  for (int m = 0; m < 2 && input; m++) {
    adj_layer *layer = NULL;
    ADJ_TEST_OK(t, adj_pad_layer_create(&(adj_pad_layer_config){.dtype = ADJ_FLOAT64, .input = input,
                                                                .spatial_dims = 2, .mode = modes[m],
                                                                .padding = {{1, 2}, {2, 1}}},
                                        &layer));
    lone_case(t, layer, "");
  }
  lone_input_destroy(&p, &input);
}

/* Each loss alone on (ROWS, COLS) with the batch over every rank. */
static void loss_cases(adj_test *t) {
  adj_partition *p;
  adj_decomposition *input = lone_input(t, 2, (const int[2]){t->size, 1}, (const int64_t[2]){ROWS, COLS}, &p);
  for (int kind = ADJ_LOSS_L1; kind <= ADJ_LOSS_NLL && input; kind++) {
    adj_layer *layer = NULL;
    ADJ_TEST_OK(t, adj_loss_layer_create(&(adj_loss_layer_config){.dtype = ADJ_FLOAT64, .kind = (adj_loss_kind)kind,
                                                            .reduction = ADJ_LOSS_MEAN, .input = input},
                                         &layer));
    if (!layer) continue;
    adj_tensor target;
    adj_box block = adj_decomposition_local_block(input);
    ADJ_TEST_OK(t, adj_layer_create_input(layer, &target));
    for (int64_t i = 0; i < adj_tensor_volume(&target); i++) adj_tensor_set(&target, i, 0.5); /* in every domain */
    int64_t rows[ROWS] = {0};
    for (int64_t i = 0; i < block.extent[0]; i++) rows[i] = (block.start[0] + i) % COLS;
    ADJ_TEST_OK(t, kind == ADJ_LOSS_NLL ? adj_loss_layer_set_labels(layer, rows, block.extent[0])
                                        : adj_loss_layer_set_target(layer, &target));
    adj_tensor_destroy(&target);
    lone_case(t, layer, " (mean)");
  }
  lone_input_destroy(&p, &input);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t414-failure-injection-more");
  encdec_case(&t, "sequential");
  if (t.size > 1) {
    char grid[16];
    snprintf(grid, sizeof grid, "%dx1", t.size);
    encdec_case(&t, grid);
  }
  if (t.size >= 4) encdec_case(&t, "2x2");
  lenet_deep_halo_case(&t);
  mlp_grid_case(&t);
  phantom_cases(&t);
  pad_cases(&t);
  loss_cases(&t);
  return adj_test_finish(&t);
}

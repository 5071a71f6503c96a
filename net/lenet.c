/* LeNet-5 from one builder for every layout (see include/adjoin/lenet.h and,
 * for the stage-by-stage builder, net_builder.h). */
#include <stdio.h>
#include <string.h>

#include "adjoin/affine15_layer.h"
#include "adjoin/conv_layer.h"
#include "adjoin/deep_halo_layer.h"
#include "adjoin/pointwise_layer.h"
#include "adjoin/pool_layer.h"
#include "adjoin/affine_layer.h"
#include "adjoin/lenet.h"
#include "adjoin/xent_layer.h"
#include "adjoin/network.h"
#include "error_impl.h"
#include "net_builder.h"

typedef struct lenet_layout {
  const char *name;
  int ranks;
  int conv_parts[2];  /* P_0 x P_1 of both convolutions and pools */
  int batch_parts;    /* P_b of the affine layers */
  int in_parts;       /* P_fi of C5 */
  int out_parts[3];   /* P_fo of C5, F6 and the output layer */
  int head15[2];      /* P_r x P_c of a 1.5D head (affine15_layer.h); 0 x 0: the DistDL affine layers */
  int conv_batch;     /* P_n of both convolutions and pools (the batch split); 0 means 1 */
} lenet_layout;

static const lenet_layout lenet_layouts[] = {
    {"sequential", 1, {1, 1}, 1, 1, {1, 1, 1}, {0, 0}, 1},
    {"dist2", 2, {2, 1}, 1, 2, {1, 2, 1}, {0, 0}, 1},
    {"dist4", 4, {2, 2}, 1, 2, {2, 2, 2}, {0, 0}, 1},
    {"dist8", 8, {2, 4}, 2, 2, {2, 2, 2}, {0, 0}, 1},
    {"hybrid4", 4, {2, 2}, 1, 1, {1, 1, 1}, {2, 2}, 1},
    {"hybrid4-batch", 4, {2, 1}, 1, 1, {1, 1, 1}, {2, 2}, 2},
};
enum { LENET_N_LAYOUTS = sizeof lenet_layouts / sizeof lenet_layouts[0] };

/* A named layout, or a grid "RxC": the integrated layout of the parallelism
 * spec with image rows over R and the batch over C in the convolutions and
 * pools, and 1.5D affine layers on R x C (hybrid4-batch is 2x2).  False for
 * anything else. */
static bool lenet_find(const char *name, lenet_layout *out) {
  for (int i = 0; name && i < LENET_N_LAYOUTS; i++)
    if (!strcmp(name, lenet_layouts[i].name)) return *out = lenet_layouts[i], true;
  int grid[2];
  if (!adj_builder_parse_grid(name, 10, 4096, grid)) return false;
  int rows = grid[0], cols = grid[1];
  *out = (lenet_layout){name, rows * cols, {rows, 1}, 1, 1, {1, 1, 1}, {rows, cols}, cols};
  return true;
}

int adj_lenet_layout_ranks(const char *layout) {
  lenet_layout l;
  return lenet_find(layout, &l) ? l.ranks : 0;
}

const char *adj_lenet_layout_names(void) {
  return "sequential, dist2, dist4, dist8, hybrid4, hybrid4-batch, RxC (a grid, R <= 10)";
}

/* ---- the builder's state ------------------------------------------------------------ */

typedef struct lenet_build {
  adj_builder base;
  const adj_lenet_config *config;
  lenet_layout layout;
} lenet_build;

/* ---- stages --------------------------------------------------------------------------- */

/* Convolution (5x5, given padding), ReLU, 2x2 max-pool of stride 2 — run as
 * convolution, pool, ReLU.  The two orders are the same function bit for bit
 * (max(relu(a), relu(b)) = relu(max(a, b)) exactly in floating point) and the
 * same gradient: the pool routes dy to the first largest input either way,
 * and where that input is <= 0 both orders pass zero (relu'(0) = 0).  Pooling
 * first gives the ReLU a quarter of the elements; at batch 256 conv1's ReLU
 * read and wrote 4.8 MB each way. */
static int lenet_conv_block(lenet_build *b, const char *name, int64_t out_channels, int64_t pad) {
  adj_layer *layer = NULL;
  adj_conv_layer_config cc = {.comm = b->config->comm, .dtype = b->config->dtype, .name = name,
                              .window = {.spatial_dims = 2, .kernel = {5, 5}, .padding_left = {pad, pad},
                                         .padding_right = {pad, pad}},
                              .out_channels = out_channels, .input = b->base.current};
  ADJ_CALL(adj_builder_push(&b->base, adj_conv_layer_create(&cc, &layer), &layer));
  adj_pool_layer_config pc = {.dtype = b->config->dtype, .kind = ADJ_POOL_MAX, .input = b->base.current,
                              .window = {.spatial_dims = 2, .kernel = {2, 2}, .stride = {2, 2}}};
  ADJ_CALL(adj_builder_push(&b->base, adj_pool_layer_create(&pc, &layer), &layer));
  return adj_builder_relu(&b->base);
}

static int lenet_affine(lenet_build *b, int64_t out_features, int out_parts) {
  adj_layer *layer = NULL;
  if (b->layout.head15[0]) {
    adj_affine15_layer_config ac = {.dtype = b->config->dtype, .input = b->base.current, .out_features = out_features};
    return adj_builder_push(&b->base, adj_affine15_layer_create(&ac, &layer), &layer);
  }
  adj_affine_layer_config ac = {.dtype = b->config->dtype, .input = b->base.current,
                                .in_features = adj_decomposition_global_shape(b->base.current)[1],
                                .out_features = out_features, .out_parts = out_parts};
  return adj_builder_push(&b->base, adj_affine_layer_create(&ac, &layer), &layer);
}

/* The pooled features (B, 16, 5, 5) become C5's input (B, 400) on P_b x P_fi:
 * repartitioned onto P_b x P_fi x 1 x 1, where each worker's channel range
 * flattens into one feature range (channels [a, b) are features [25a, 25b)),
 * so no worker gathers the whole block.  A last repartition is made only where
 * those ranges are not the head's balanced ones. */
static int lenet_flatten(lenet_build *b) {
  int64_t batch = b->config->batch;
  const lenet_layout *l = &b->layout;
  /* A 1.5D head takes (B, 400) with the batch over P_c and features over P_r. */
  const int head[2] = {l->head15[0] ? l->head15[1] : l->batch_parts, l->head15[0] ? l->head15[0] : l->in_parts};
  ADJ_CALL(adj_builder_glue(&b->base, 4, (const int[4]){head[0], head[1], 1, 1}, (const int64_t[4]){batch, 16, 5, 5}));
  adj_layer *layer = NULL;
  adj_flatten_layer_config fc = {.dtype = b->config->dtype, .input = b->base.current};
  ADJ_CALL(adj_builder_push(&b->base, adj_flatten_layer_create(&fc, &layer), &layer));
  return adj_builder_glue(&b->base, 2, head, (const int64_t[2]){batch, 400});
}

static int lenet_head(lenet_build *b) {
  const int *fo = b->layout.out_parts;
  ADJ_CALL(lenet_affine(b, 120, fo[0]));
  ADJ_CALL(adj_builder_relu(&b->base));
  ADJ_CALL(lenet_affine(b, 84, fo[1]));
  ADJ_CALL(adj_builder_relu(&b->base));
  ADJ_CALL(lenet_affine(b, 10, fo[2]));
  if (b->config->logits_only)
    return adj_builder_glue(&b->base, 2, (const int[2]){1, 1}, (const int64_t[2]){b->config->batch, 10});
  adj_layer *layer = NULL;
  adj_xent_layer_config lc = {.dtype = b->config->dtype, .input = b->base.current, .root = 0};
  return adj_builder_push(&b->base, adj_xent_layer_create(&lc, &layer), &layer);
}

/* Replaces stages first.. (the convolution blocks, all on the convolution
 * partition) by one deep halo layer: one exchange for the run. */
static int lenet_fuse(lenet_build *b, int first) {
  adj_builder *base = &b->base;
  adj_layer *fused = NULL;
  adj_deep_halo_config dc = {.name = "conv blocks (deep halo)", .count = base->n - first, .layers = &base->stages[first]};
  ADJ_CALL(adj_deep_halo_layer_create(&dc, &fused));
  for (int i = first; i < base->n; i++) adj_layer_destroy(&base->stages[i]);
  base->n = first;
  return adj_builder_push(base, ADJ_SUCCESS, &fused);
}

static int lenet_stages(lenet_build *b) {
  const lenet_layout *l = &b->layout;
  int64_t batch = b->config->batch;
  ADJ_CALL(adj_builder_start(&b->base, 4, (const int[4]){1, 1, 1, 1}, (const int64_t[4]){batch, 1, 28, 28}));
  const int conv_parts[4] = {l->conv_batch ? l->conv_batch : 1, 1, l->conv_parts[0], l->conv_parts[1]};
  ADJ_CALL(adj_builder_glue(&b->base, 4, conv_parts, (const int64_t[4]){batch, 1, 28, 28}));
  int first = b->base.n;
  ADJ_CALL(lenet_conv_block(b, "conv1", 6, 2));
  ADJ_CALL(lenet_conv_block(b, "conv2", 16, 0));
  if (b->config->deep_halos) ADJ_CALL(lenet_fuse(b, first));
  ADJ_CALL(lenet_flatten(b));
  return lenet_head(b);
}

/* ---- public --------------------------------------------------------------------------- */

/* Checks every rank can make from the shared arguments alone. */
static int lenet_check(const adj_lenet_config *c, lenet_layout *layout) {
  ADJ_CHECK(c, ADJ_ERR_ARG, "lenet: config is NULL");
  ADJ_CHECK(lenet_find(c->layout, layout), ADJ_ERR_ARG, "lenet: unknown layout '%s' (expected one of: %s)", c->layout ? c->layout : "(null)",
            adj_lenet_layout_names());
  int size;
  ADJ_CALL_MPI(MPI_Comm_size(c->comm, &size));
  ADJ_CHECK(size >= layout->ranks, ADJ_ERR_SIZE, "lenet: layout %s needs %d ranks but the communicator has %d",
            c->layout, layout->ranks, size);
  ADJ_CHECK(c->batch >= 1, ADJ_ERR_ARG, "lenet: batch %lld must be at least 1", (long long)c->batch);
  ADJ_CHECK(c->batch >= layout->batch_parts, ADJ_ERR_ARG, "lenet: layout %s splits the batch in %d, batch is %lld",
            c->layout, layout->batch_parts, (long long)c->batch);
  ADJ_CHECK(c->batch >= layout->head15[1], ADJ_ERR_ARG, "lenet: layout %s splits the batch in %d, batch is %lld",
            c->layout, layout->head15[1], (long long)c->batch);
  return ADJ_SUCCESS;
}

int adj_lenet_create(const adj_lenet_config *c, adj_layer **network) {
  ADJ_CHECK(c && network, ADJ_ERR_ARG, "LeNet-5: config and output network pointer are required");
  *network = NULL;
  lenet_build b = {.base = {.comm = c->comm, .dtype = c->dtype}, .config = c};
  ADJ_CALL(lenet_check(c, &b.layout));
  int status = lenet_stages(&b);
  char name[64];
  snprintf(name, sizeof name, "lenet5-%s", c->layout);
  return adj_builder_finish(&b.base, status, name, network);
}

adj_layer *adj_lenet_loss(adj_layer *network) {
  adj_layer *last = adj_network_layer(network, adj_network_depth(network) - 1);
  return last && !strcmp(adj_layer_name(last), "softmax_xent") ? last : NULL;
}

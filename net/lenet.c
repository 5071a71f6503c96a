/* LeNet-5 from one builder for every layout (see include/adjoin/lenet.h).
 *
 * The builder walks the network stage by stage keeping the current global
 * layout; each stage takes it as input and hands on its output layout, and
 * glue (a repartition layer) is inserted only where the next stage needs
 * another layout, so the sequential network is the same code with every
 * partition of extent 1 and no glue. */
#include <stdio.h>
#include <string.h>

#include "adjoin/affine15.h"
#include "adjoin/conv_layer.h"
#include "adjoin/deep_halo_layer.h"
#include "adjoin/layers.h"
#include "adjoin/lenet.h"
#include "adjoin/loss_layer.h"
#include "adjoin/net.h"
#include "error_impl.h"

typedef struct lenet_layout {
  const char *name;
  int ranks;
  int conv_parts[2];  /* P_0 x P_1 of both convolutions and pools */
  int batch_parts;    /* P_b of the affine layers */
  int in_parts;       /* P_fi of C5 */
  int out_parts[3];   /* P_fo of C5, F6 and the output layer */
  int head15[2];      /* P_r x P_c of a 1.5D head (affine15.h); 0 x 0: the DistDL affine layers */
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
enum { LENET_N_LAYOUTS = sizeof lenet_layouts / sizeof lenet_layouts[0], LENET_MAX_STAGES = 24 };

/* A named layout, or a grid "RxC": the integrated layout of the parallelism
 * spec with image rows over R and the batch over C in the convolutions and
 * pools, and 1.5D affine layers on R x C (hybrid4-batch is 2x2).  False for
 * anything else. */
static bool lenet_find(const char *name, lenet_layout *out) {
  for (int i = 0; name && i < LENET_N_LAYOUTS; i++)
    if (!strcmp(name, lenet_layouts[i].name)) return *out = lenet_layouts[i], true;
  int rows, cols;
  char tail;
  if (!name || sscanf(name, "%dx%d%c", &rows, &cols, &tail) != 2 || rows < 1 || cols < 1 || rows > 10 ||
      cols > 4096)
    return false;
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
  const adj_lenet_config *config;
  lenet_layout layout;
  adj_decomposition *current; /* owned reference: the layout the next stage takes */
  adj_layer *stages[LENET_MAX_STAGES];
  int n;
} lenet_build;

/* Appends a created stage (or passes its failure on) and moves `current` on
 * to its output layout.  The stage comes by address because the creation
 * call that fills it is an argument of the same call. */
static int lenet_push(lenet_build *b, int status, adj_layer **stage) {
  if (status) return status;
  adj_layer *layer = *stage;
  b->stages[b->n++] = layer;
  adj_decomposition_destroy(&b->current);
  b->current = adj_decomposition_reference((adj_decomposition *)adj_layer_output_layout(layer));
  return ADJ_SUCCESS;
}

/* True when both layouts hold the whole tensor on the same single worker, so
 * moving between them would be a copy to itself. */
static bool lenet_same_worker(const adj_decomposition *a, const adj_decomposition *b) {
  const adj_partition *pa = adj_decomposition_partition(a), *pb = adj_decomposition_partition(b);
  return adj_partition_size(pa) == 1 && adj_partition_size(pb) == 1 &&
         adj_partition_rank_of_index(pa, 0) == adj_partition_rank_of_index(pb, 0);
}

/* Moves the current tensor onto the layout (ndim, parts, shape), through a
 * repartition layer unless it is already there. */
static int lenet_glue(lenet_build *b, int ndim, const int *parts, const int64_t *shape) {
  adj_decomposition *target;
  ADJ_CALL(adj_decomposition_create_on_first_ranks(b->config->comm, ndim, parts, shape, &target));
  int status = ADJ_SUCCESS;
  if (lenet_same_worker(b->current, target)) {
    adj_decomposition_destroy(&b->current);
    b->current = adj_decomposition_reference(target);
  } else {
    adj_layer *layer = NULL;
    adj_repartition_layer_config rc = {.dtype = b->config->dtype, .input = b->current, .output = target};
    status = lenet_push(b, adj_repartition_layer_create(&rc, &layer), &layer);
  }
  adj_decomposition_destroy(&target);
  return status;
}

/* ---- stages --------------------------------------------------------------------------- */

static int lenet_relu(lenet_build *b) {
  adj_layer *layer = NULL;
  adj_activation_layer_config ac = {.dtype = b->config->dtype, .input = b->current, .activation = {ADJ_RELU, 0}};
  return lenet_push(b, adj_activation_layer_create(&ac, &layer), &layer);
}

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
                              .out_channels = out_channels, .input = b->current};
  ADJ_CALL(lenet_push(b, adj_conv_layer_create(&cc, &layer), &layer));
  adj_pool_layer_config pc = {.dtype = b->config->dtype, .kind = ADJ_POOL_MAX, .input = b->current,
                              .window = {.spatial_dims = 2, .kernel = {2, 2}, .stride = {2, 2}}};
  ADJ_CALL(lenet_push(b, adj_pool_layer_create(&pc, &layer), &layer));
  return lenet_relu(b);
}

static int lenet_affine(lenet_build *b, int64_t out_features, int out_parts) {
  adj_layer *layer = NULL;
  if (b->layout.head15[0]) {
    adj_affine15_layer_config ac = {.dtype = b->config->dtype, .input = b->current, .out_features = out_features};
    return lenet_push(b, adj_affine15_layer_create(&ac, &layer), &layer);
  }
  adj_affine_layer_config ac = {.dtype = b->config->dtype, .input = b->current,
                                .in_features = adj_decomposition_global_shape(b->current)[1],
                                .out_features = out_features, .out_parts = out_parts};
  return lenet_push(b, adj_affine_layer_create(&ac, &layer), &layer);
}

/* The pooled features (B, 16, 5, 5) become C5's input (B, 400) on P_b x P_fi:
 * gathered onto rank 0 (flatten needs an unsplit feature block), flattened,
 * spread again. */
static int lenet_flatten(lenet_build *b) {
  int64_t batch = b->config->batch;
  ADJ_CALL(lenet_glue(b, 4, (const int[4]){1, 1, 1, 1}, (const int64_t[4]){batch, 16, 5, 5}));
  adj_layer *layer = NULL;
  adj_flatten_layer_config fc = {.dtype = b->config->dtype, .input = b->current};
  ADJ_CALL(lenet_push(b, adj_flatten_layer_create(&fc, &layer), &layer));
  const lenet_layout *l = &b->layout;
  /* A 1.5D head takes (B, 400) with the batch over P_c and features over P_r. */
  if (l->head15[0])
    return lenet_glue(b, 2, (const int[2]){l->head15[1], l->head15[0]}, (const int64_t[2]){batch, 400});
  return lenet_glue(b, 2, (const int[2]){l->batch_parts, l->in_parts}, (const int64_t[2]){batch, 400});
}

static int lenet_head(lenet_build *b) {
  const int *fo = b->layout.out_parts;
  ADJ_CALL(lenet_affine(b, 120, fo[0]));
  ADJ_CALL(lenet_relu(b));
  ADJ_CALL(lenet_affine(b, 84, fo[1]));
  ADJ_CALL(lenet_relu(b));
  ADJ_CALL(lenet_affine(b, 10, fo[2]));
  if (b->config->logits_only)
    return lenet_glue(b, 2, (const int[2]){1, 1}, (const int64_t[2]){b->config->batch, 10});
  adj_layer *layer = NULL;
  adj_loss_layer_config lc = {.dtype = b->config->dtype, .input = b->current, .root = 0};
  return lenet_push(b, adj_xent_layer_create(&lc, &layer), &layer);
}

/* Replaces stages first.. (the convolution blocks, all on the convolution
 * partition) by one deep halo layer: one exchange for the run. */
static int lenet_fuse(lenet_build *b, int first) {
  adj_layer *fused = NULL;
  adj_deep_halo_config dc = {.name = "conv blocks (deep halo)", .count = b->n - first, .layers = &b->stages[first]};
  ADJ_CALL(adj_deep_halo_layer_create(&dc, &fused));
  for (int i = first; i < b->n; i++) adj_layer_destroy(&b->stages[i]);
  b->n = first;
  return lenet_push(b, ADJ_SUCCESS, &fused);
}

static int lenet_stages(lenet_build *b) {
  const lenet_layout *l = &b->layout;
  int64_t batch = b->config->batch;
  ADJ_CALL(adj_decomposition_create_on_first_ranks(b->config->comm, 4, (const int[4]){1, 1, 1, 1},
                                                   (const int64_t[4]){batch, 1, 28, 28}, &b->current));
  const int conv_parts[4] = {l->conv_batch ? l->conv_batch : 1, 1, l->conv_parts[0], l->conv_parts[1]};
  ADJ_CALL(lenet_glue(b, 4, conv_parts, (const int64_t[4]){batch, 1, 28, 28}));
  int first = b->n;
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
  lenet_build b = {.config = c};
  ADJ_CALL(lenet_check(c, &b.layout));
  int status = lenet_stages(&b);
  char name[64];
  snprintf(name, sizeof name, "lenet5-%s", c->layout);
  if (!status) status = adj_network_create(name, b.n, b.stages, network);
  for (int i = 0; i < b.n; i++) adj_layer_destroy(&b.stages[i]);
  adj_decomposition_destroy(&b.current);
  return status;
}

adj_layer *adj_lenet_loss(adj_layer *network) {
  adj_layer *last = adj_network_layer(network, adj_network_depth(network) - 1);
  return last && !strcmp(adj_layer_name(last), "softmax_xent") ? last : NULL;
}

/* ---- initialisation ------------------------------------------------------------------- */

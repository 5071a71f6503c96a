/* The encoder-decoder classifier (see include/adjoin/encdec.h), built stage by
 * stage on one spatial layout (net_builder.h). */
#include <stdio.h>
#include <string.h>

#include "adjoin/conv_layer.h"
#include "adjoin/encdec.h"
#include "adjoin/pointwise_layer.h"
#include "adjoin/pool_layer.h"
#include "adjoin/affine_layer.h"
#include "adjoin/xent_layer.h"
#include "adjoin/batchnorm_layer.h"
#include "adjoin/upsample_layer.h"
#include "error_impl.h"
#include "net_builder.h"

enum { ENCDEC_MAX_PARTS = 7, ENCDEC_SIDE = 28, ENCDEC_CLASSES = 10 };

/* The spatial grid of a layout; false for an unknown one. */
static bool encdec_grid(const char *layout, int parts[2]) {
  if (layout && !strcmp(layout, "sequential")) return parts[0] = parts[1] = 1, true;
  return adj_builder_parse_grid(layout, ENCDEC_MAX_PARTS, ENCDEC_MAX_PARTS, parts);
}

int adj_encdec_layout_ranks(const char *layout) {
  int parts[2];
  return encdec_grid(layout, parts) ? parts[0] * parts[1] : 0;
}

/* Without bias: the batch norm after it subtracts any per-channel constant,
 * so a bias would get a gradient of rounding noise only, which Adam scales up
 * to full-size steps (PyTorch models drop it for the same reason). */
static int encdec_conv(adj_builder *b, const char *name, int64_t out_channels) {
  adj_layer *layer = NULL;
  adj_conv_layer_config cc = {.comm = b->comm, .dtype = b->dtype, .name = name,
                              .window = {.spatial_dims = 2, .kernel = {3, 3}, .padding_left = {1, 1},
                                         .padding_right = {1, 1}},
                              .out_channels = out_channels, .no_bias = true, .input = b->current};
  return adj_builder_push(b, adj_conv_layer_create(&cc, &layer), &layer);
}

/* PyTorch's BatchNorm2d defaults. */
static int encdec_batchnorm(adj_builder *b) {
  adj_layer *layer = NULL;
  adj_batchnorm_layer_config bc = {.dtype = b->dtype, .input = b->current, .eps = 1e-5, .momentum = 0.1,
                                   .num_features = adj_decomposition_global_shape(b->current)[1]};
  return adj_builder_push(b, adj_batchnorm_layer_create(&bc, &layer), &layer);
}

static int encdec_pool(adj_builder *b) {
  adj_layer *layer = NULL;
  adj_pool_layer_config pc = {.dtype = b->dtype, .kind = ADJ_POOL_MAX, .input = b->current,
                              .window = {.spatial_dims = 2, .kernel = {2, 2}, .stride = {2, 2}}};
  return adj_builder_push(b, adj_pool_layer_create(&pc, &layer), &layer);
}

/* Convolution and batch norm, then (pooled) max-pool and ReLU, or ReLU alone. */
static int encdec_block(adj_builder *b, const char *name, int64_t out_channels, bool pooled) {
  ADJ_CALL(encdec_conv(b, name, out_channels));
  ADJ_CALL(encdec_batchnorm(b));
  if (pooled) ADJ_CALL(encdec_pool(b));
  return adj_builder_relu(b);
}

static int encdec_upsample(adj_builder *b) {
  adj_layer *layer = NULL;
  adj_upsample_layer_config uc = {.dtype = b->dtype, .input = b->current, .spatial_dims = 2,
                                  .mode = ADJ_INTERP_NEAREST, .scale_factor = {2, 2}};
  return adj_builder_push(b, adj_upsample_layer_create(&uc, &layer), &layer);
}

/* The pooled (B, 16, 7, 7) features gathered onto rank 0, flattened, one
 * affine layer to the logits and the loss. */
static int encdec_head(adj_builder *b) {
  int64_t shape[4];
  memcpy(shape, adj_decomposition_global_shape(b->current), sizeof shape);
  ADJ_CALL(adj_builder_glue(b, 4, (const int[4]){1, 1, 1, 1}, shape));
  adj_layer *layer = NULL;
  adj_flatten_layer_config fc = {.dtype = b->dtype, .input = b->current};
  ADJ_CALL(adj_builder_push(b, adj_flatten_layer_create(&fc, &layer), &layer));
  adj_affine_layer_config ac = {.dtype = b->dtype, .input = b->current,
                                .in_features = adj_decomposition_global_shape(b->current)[1],
                                .out_features = ENCDEC_CLASSES};
  ADJ_CALL(adj_builder_push(b, adj_affine_layer_create(&ac, &layer), &layer));
  adj_xent_layer_config lc = {.dtype = b->dtype, .input = b->current, .root = 0};
  return adj_builder_push(b, adj_xent_layer_create(&lc, &layer), &layer);
}

static int encdec_stages(adj_builder *b, const int parts[2], int64_t batch) {
  const int64_t image[4] = {batch, 1, ENCDEC_SIDE, ENCDEC_SIDE};
  ADJ_CALL(adj_builder_start(b, 4, (const int[4]){1, 1, 1, 1}, image));
  ADJ_CALL(adj_builder_glue(b, 4, (const int[4]){1, 1, parts[0], parts[1]}, image));
  ADJ_CALL(encdec_block(b, "enc1", 16, true));
  ADJ_CALL(encdec_block(b, "enc2", 32, true));
  ADJ_CALL(encdec_upsample(b));
  ADJ_CALL(encdec_block(b, "dec", 16, false));
  ADJ_CALL(encdec_pool(b));
  return encdec_head(b);
}

/* Checks every rank can make from the shared arguments alone. */
static int encdec_check(const adj_encdec_config *c, int parts[2]) {
  ADJ_CHECK(encdec_grid(c->layout, parts), ADJ_ERR_ARG,
            "encdec: unknown layout '%s' (expected sequential or a spatial grid P0xP1 with P0, P1 in 1..%d)",
            c->layout ? c->layout : "(null)", ENCDEC_MAX_PARTS);
  int size;
  ADJ_CALL_MPI(MPI_Comm_size(c->comm, &size));
  ADJ_CHECK(size >= parts[0] * parts[1], ADJ_ERR_SIZE, "encdec: layout %s needs %d ranks but the communicator has %d",
            c->layout, parts[0] * parts[1], size);
  ADJ_CHECK(c->batch >= 1, ADJ_ERR_ARG, "encdec: batch %lld must be at least 1", (long long)c->batch);
  return ADJ_SUCCESS;
}

int adj_encdec_create(const adj_encdec_config *c, adj_layer **network) {
  ADJ_CHECK(c && network, ADJ_ERR_ARG, "encdec: config and output network pointer are required");
  *network = NULL;
  int parts[2];
  ADJ_CALL(encdec_check(c, parts));
  adj_builder b = {.comm = c->comm, .dtype = c->dtype};
  int status = encdec_stages(&b, parts, c->batch);
  char name[64];
  snprintf(name, sizeof name, "encdec-%s", c->layout);
  return adj_builder_finish(&b, status, name, network);
}

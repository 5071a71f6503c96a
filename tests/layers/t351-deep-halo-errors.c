/* t351: bad input to the deep halo layer fails on every rank with one clear
 * message naming the bad value: a run of 0 layers, no layer list, a layer of a
 * kind that cannot be fused (a repartition), a convolution whose channels are
 * split over P_co = 2 (not on the run's spatial partition), a layer on
 * another partition than the run's, a layer whose input is not the previous
 * layer's output, and a run whose geometry some worker cannot extend (a
 * worker whose outputs read only padding; 3 or more ranks). */
#include <stdio.h>

#include "dist_check.h"
#include "adjoin/repartition_layer.h"

static adj_layer *conv(adj_test *t, const adj_decomposition *in, int64_t out, int64_t k, int64_t pad, int co_parts) {
  adj_layer *layer = NULL;
  adj_conv_layer_config c = {.comm = MPI_COMM_WORLD, .dtype = ADJ_FLOAT64, .out_channels = out, .input = in,
                             .out_channel_parts = co_parts,
                             .window = {.spatial_dims = 2, .kernel = {k, k}, .padding_left = {pad, pad},
                                        .padding_right = {pad, pad}}};
  ADJ_TEST_OK(t, adj_conv_layer_create(&c, &layer));
  return layer;
}

static adj_layer *relu(adj_test *t, const adj_decomposition *in) {
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, adj_activation_layer_create(
                     &(adj_activation_layer_config){.dtype = ADJ_FLOAT64, .input = in, .activation = {ADJ_RELU, 0}},
                     &layer));
  return layer;
}

static void expect(adj_test *t, const char *label, int count, adj_layer *const *layers, const char *phrase) {
  adj_layer *fused = NULL;
  int status = adj_deep_halo_layer_create(&(adj_deep_halo_config){.count = count, .layers = layers}, &fused);
  dl_expect_error(t, label, status, &fused, phrase);
}

/* Errors every run size can show. */
static void check_shared(adj_test *t, const adj_decomposition *in) {
  adj_layer *c = conv(t, in, 3, 3, 1, 0), *move = NULL;
  const adj_decomposition *y = c ? adj_layer_output_layout(c) : in;
  ADJ_TEST_OK(t, adj_repartition_layer_create(
                     &(adj_repartition_layer_config){.dtype = ADJ_FLOAT64, .input = y, .output = y}, &move));
  adj_layer *run[2] = {c, move};
  expect(t, "a run of 0 layers", 0, run, "count is 0");
  expect(t, "a run of -2 layers", -2, run, "count is -2");
  expect(t, "no layer list", 2, NULL, "layers is NULL");
  expect(t, "a repartition layer", 2, run, "cannot be fused");
  adj_layer *r = relu(t, in);
  adj_layer *mismatched[2] = {c, r}; /* the ReLU takes conv's input, not its output */
  expect(t, "a layer not chained", 2, mismatched, "layer 1");
  adj_layer_destroy(&c), adj_layer_destroy(&move), adj_layer_destroy(&r);
}

/* One input row per worker and a 1x1 kernel with padding 3P over P >= 3
 * workers: 7P output rows, 7 per worker, and worker 0's read only padding.
 * One layer may do that (its output is the bias); a run cannot extend it. */
static void check_padding_only(adj_test *t) {
  int parts[4] = {1, 1, t->size, 1};
  adj_decomposition *in = dl_layout(t, 4, (const int64_t[4]){1, 1, t->size, 4}, parts, NULL, NULL);
  adj_layer *a = conv(t, in, 1, 1, 3 * t->size, 0);
  if (a) expect(t, "a worker reading only padding", 1, &a, "read only padding");
  adj_layer_destroy(&a);
  adj_decomposition_destroy(&in);
}

/* Needs two ranks: channels split over P_co = 2, and a ReLU on the same shape
 * as the run's but the transposed grid. */
static void check_partitions(adj_test *t) {
  const int64_t shape[4] = {1, 2, 8, 8};
  adj_decomposition *rows = dl_layout(t, 4, shape, (const int[4]){1, 1, 2, 1}, NULL, NULL);
  adj_decomposition *cols = dl_layout(t, 4, (const int64_t[4]){1, 3, 8, 8}, (const int[4]){1, 1, 1, 2}, NULL, NULL);
  adj_decomposition *one = dl_layout(t, 4, shape, (const int[4]){1, 1, 1, 1}, NULL, NULL);
  adj_layer *split = conv(t, one, 4, 3, 1, 2), *plain = conv(t, rows, 3, 3, 1, 0), *r = relu(t, cols);
  adj_layer *a[2] = {split, r}, *b[2] = {plain, r};
  expect(t, "channels split", 1, a, "layer 0 'conv layer' splits channels");
  expect(t, "another partition", 2, b, "layer 1 'relu' is not on the run's spatial partition");
  adj_layer_destroy(&split), adj_layer_destroy(&plain), adj_layer_destroy(&r);
  adj_decomposition_destroy(&rows), adj_decomposition_destroy(&cols), adj_decomposition_destroy(&one);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t351-deep-halo-errors");
  int parts[4] = {1, 1, t.size, 1};
  adj_decomposition *in = dl_layout(&t, 4, (const int64_t[4]){2, 2, 4 * t.size, 5}, parts, NULL, NULL);
  if (in) check_shared(&t, in);
  adj_decomposition_destroy(&in);
  if (t.size >= 3) check_padding_only(&t);
  if (t.size >= 2) check_partitions(&t);
  return adj_test_finish(&t);
}

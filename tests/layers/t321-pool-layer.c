/* t321: the distributed pooling layer, max and average, kernel 2-3, stride
 * 1-3, with padding and dilation, in 1-D, 2-D and 3-D: Jacobian dot-product
 * test, Taylor test, distributed against sequential (outputs, jvps, input
 * gradients), a pool chained onto a pool through the output layout, and bad
 * configurations.
 *
 * Partitions spread over channels and both spatial dimensions and, at 8
 * ranks, the batch; extents are prime so blocks are uneven; a second layout
 * leaves rank 0 inactive and a third cuts unevenly with empty blocks, so halos
 * reach past narrow neighbours. */
#include <stdio.h>
#include <string.h>

#include "dist_check.h"
#include "adjoin/pool.h"
#include "adjoin/pool_layer.h"

typedef struct pool_case {
  const char *name;
  adj_window_geometry window;
} pool_case;

static const pool_case cases_2d[] = {
    {"k2 s2", {.spatial_dims = 2, .kernel = {2, 2}, .stride = {2, 2}}},
    {"k3 s1 pad 1", {.spatial_dims = 2, .kernel = {3, 3}, .padding_left = {1, 1}, .padding_right = {1, 1}}},
    {"k3 s3", {.spatial_dims = 2, .kernel = {3, 3}, .stride = {3, 3}}},
    {"k(2,3) s(1,2)", {.spatial_dims = 2, .kernel = {2, 3}, .stride = {1, 2}}},
    {"k3 s2 d2 pad(1,0|0,2)",
     {.spatial_dims = 2, .kernel = {3, 3}, .stride = {2, 2}, .dilation = {2, 2}, .padding_left = {1, 0},
      .padding_right = {0, 2}}},
};

/* Partition shapes over (N, C, H, W) for 1..8 workers. */
static const int parts_2d[9][4] = {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 2, 1}, {1, 1, 1, 3}, {1, 1, 2, 2},
                                   {1, 1, 5, 1}, {1, 2, 3, 1}, {1, 1, 7, 1}, {2, 1, 2, 2}};

typedef enum layout_kind { LAYOUT_ALL = 0, LAYOUT_INACTIVE = 1, LAYOUT_CUTS = 2 } layout_kind;
static const char *const layout_names[] = {"all ranks", "rank 0 inactive", "uneven cuts"};

static adj_decomposition *make_layout(adj_test *t, layout_kind kind, int rank, const int64_t *shape,
                                      const int (*table)[4]) {
  int workers = kind == LAYOUT_INACTIVE ? t->size - 1 : t->size, ranks[8], parts[ADJ_MAX_RANK];
  if (workers < 1) return NULL;
  for (int i = 0; i < rank; i++) parts[i] = i < 4 ? table[workers][i] : 1;
  for (int i = 0; i < workers; i++) ranks[i] = (i + 1) % t->size; /* rotated: rank 0 last or absent */
  int64_t storage[ADJ_MAX_RANK][9];
  const int64_t *cuts[ADJ_MAX_RANK] = {NULL};
  for (int i = 0; kind == LAYOUT_CUTS && i < rank; i++) {
    dl_quadratic_cuts(shape[i], parts[i], storage[i]);
    cuts[i] = storage[i];
  }
  return dl_layout(t, rank, shape, parts, ranks, cuts);
}

static int pool_create(adj_pool_kind kind, const adj_window_geometry *w, const adj_decomposition *input,
                       adj_layer **layer) {
  return adj_pool_layer_create(
      &(adj_pool_layer_config){.dtype = ADJ_FLOAT64, .kind = kind, .input = input, .window = *w}, layer);
}

/* Dot test, Taylor test and the sequential twin for one kind, kernel and layout. */
static void check_pool(adj_test *t, adj_pool_kind kind, const pool_case *c, adj_decomposition *layout,
                       adj_decomposition *root, const char *where, bool taylor) {
  adj_layer *dist = NULL, *seq = NULL;
  ADJ_TEST_OK(t, pool_create(kind, &c->window, layout, &dist));
  ADJ_TEST_OK(t, pool_create(kind, &c->window, root, &seq));
  if (dist && seq) {
    char label[160];
    snprintf(label, sizeof label, "%s %s %s", kind == ADJ_POOL_MAX ? "max" : "avg", c->name, where);
    dl_dottest(t, label, dist);
    /* Max pooling is a selection (linear on the piece around a point without
     * ties); average pooling is linear. */
    if (taylor) dl_taylor(t, label, dist, kind == ADJ_POOL_MAX ? DL_TAYLOR_PIECEWISE : DL_TAYLOR_LINEAR);
    dl_compare(t, label, dist, seq, 21u);
  }
  adj_layer_destroy(&dist);
  adj_layer_destroy(&seq);
}

static void test_pool_2d(adj_test *t) {
  static const int64_t shape[4] = {2, 3, 11, 9};
  adj_decomposition *root = dl_self_layout(t, 4, shape);
  for (int k = LAYOUT_ALL; k <= LAYOUT_CUTS; k++) {
    adj_decomposition *layout = make_layout(t, (layout_kind)k, 4, shape, parts_2d);
    if (!layout) continue;
    char where[96], text[48];
    snprintf(where, sizeof where, "[2,3,11,9] %s (%s)",
             adj_partition_format(adj_decomposition_partition(layout), text, sizeof text), layout_names[k]);
    /* Every kernel on the full layout; two kernels cover the others. */
    size_t n = k == LAYOUT_ALL ? sizeof cases_2d / sizeof cases_2d[0] : 2;
    for (size_t i = 0; i < n; i++) {
      const pool_case *c = &cases_2d[k == LAYOUT_ALL ? i : (i + (size_t)k) % 5];
      /* The Taylor test checks jvp against forward, which the layout does not
       * change; it runs once per kernel (time on the 2-core machine). */
      check_pool(t, ADJ_POOL_MAX, c, layout, root, where, k == LAYOUT_ALL);
      check_pool(t, ADJ_POOL_AVG, c, layout, root, where, k == LAYOUT_ALL);
    }
    adj_decomposition_destroy(&layout);
  }
  adj_decomposition_destroy(&root);
}

/* 1-D and 3-D: one kernel each, every worker on the spatial dimensions. */
static void test_pool_other_dims(adj_test *t) {
  static const int parts_1d[9][4] = {{1, 1, 1}, {1, 1, 1}, {1, 1, 2}, {1, 1, 3}, {1, 1, 4},
                                     {1, 1, 5}, {1, 1, 6}, {1, 1, 7}, {1, 2, 4}};
  static const int parts_3d[9][4] = {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 2, 1}, {1, 1, 1, 3}, {1, 1, 2, 2},
                                     {1, 1, 5, 1}, {1, 1, 3, 2}, {1, 1, 7, 1}, {1, 1, 2, 2}};
  static const pool_case c1 = {"1d k3 s2 pad 1", {.spatial_dims = 1, .kernel = {3}, .stride = {2},
                                                  .padding_left = {1}, .padding_right = {1}}};
  static const pool_case c3 = {"3d k2 s(1,2,2)", {.spatial_dims = 3, .kernel = {2, 2, 2}, .stride = {1, 2, 2}}};
  static const int64_t shape1[3] = {2, 3, 17}, shape3[5] = {2, 2, 9, 7, 4};
  const struct { const pool_case *c; int rank; const int64_t *shape; const int (*parts)[4]; } runs[] = {
      {&c1, 3, shape1, parts_1d}, {&c3, 5, shape3, parts_3d}};
  for (int r = 0; r < 2; r++) {
    adj_decomposition *root = dl_self_layout(t, runs[r].rank, runs[r].shape);
    adj_decomposition *layout = make_layout(t, LAYOUT_ALL, runs[r].rank, runs[r].shape, runs[r].parts);
    char where[96], text[48];
    snprintf(where, sizeof where, "on %s", adj_partition_format(adj_decomposition_partition(layout), text, sizeof text));
    check_pool(t, ADJ_POOL_MAX, runs[r].c, layout, root, where, true);
    check_pool(t, ADJ_POOL_AVG, runs[r].c, layout, root, where, true);
    adj_decomposition_destroy(&layout);
    adj_decomposition_destroy(&root);
  }
}

/* A pool whose input is the previous pool's output layout (balanced over the
 * output, not the input): the chain must line up and stay correct. */
static void test_chain(adj_test *t) {
  static const int64_t shape[4] = {2, 2, 13, 11};
  adj_decomposition *layout = make_layout(t, LAYOUT_ALL, 4, shape, parts_2d);
  adj_decomposition *root = dl_self_layout(t, 4, shape);
  adj_layer *first = NULL, *second = NULL, *seq_first = NULL, *seq_second = NULL;
  ADJ_TEST_OK(t, pool_create(ADJ_POOL_MAX, &cases_2d[1].window, layout, &first));
  ADJ_TEST_OK(t, pool_create(ADJ_POOL_MAX, &cases_2d[1].window, root, &seq_first));
  if (first && seq_first) {
    ADJ_TEST_OK(t, pool_create(ADJ_POOL_AVG, &cases_2d[0].window, adj_layer_output_layout(first),
                               &second));
    ADJ_TEST_OK(t, pool_create(ADJ_POOL_AVG, &cases_2d[0].window,
                               adj_layer_output_layout(seq_first), &seq_second));
  }
  if (second && seq_second) {
    const int64_t *in = adj_layer_input_shape(second), *out = adj_layer_output_shape(first);
    ADJ_TEST_CHECK(t, !memcmp(in, out, 4 * sizeof *in), "chain: first output block and second input block differ");
    dl_dottest(t, "chain max k3 pad 1 -> avg k2 s2, [2,2,13,11]", second);
    dl_compare(t, "chain max k3 pad 1 -> avg k2 s2, [2,2,13,11]", second, seq_second, 23u);
  }
  adj_layer_destroy(&first), adj_layer_destroy(&second), adj_layer_destroy(&seq_first);
  adj_layer_destroy(&seq_second);
  adj_decomposition_destroy(&layout), adj_decomposition_destroy(&root);
}

static void test_errors(adj_test *t) {
  static const int64_t shape[4] = {2, 3, 4, 3};
  adj_decomposition *layout = make_layout(t, LAYOUT_ALL, 4, shape, parts_2d);
  adj_layer *layer = NULL;
  adj_window_geometry big = {.spatial_dims = 2, .kernel = {3, 5}};
  int status = pool_create(ADJ_POOL_MAX, &big, layout, &layer);
  dl_expect_error(t, "kernel 5 on width 3", status, &layer, "padded input is only 3");
  adj_window_geometry one_d = {.spatial_dims = 1, .kernel = {2}};
  status = pool_create(ADJ_POOL_AVG, &one_d, layout, &layer);
  dl_expect_error(t, "1-D window on a rank-4 input", status, &layer, "needs 3");
  adj_window_geometry padded = {.spatial_dims = 2, .kernel = {2, 2}, .padding_left = {2, 0}};
  status = pool_create(ADJ_POOL_MAX, &padded, layout, &layer);
  dl_expect_error(t, "max window of padding only", status, &layer, "covers only padding");
  status = pool_create((adj_pool_kind)5, &cases_2d[0].window, layout, &layer);
  dl_expect_error(t, "pooling kind 5", status, &layer, "unknown pooling kind 5");
  adj_decomposition_destroy(&layout);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t321-pool-layer");
  if (t.size > 8) return adj_test_skip(&t, "the partitions are written for 1 to 8 ranks");
  adj_test_report(&t, "t321 on %d ranks (float64)", t.size);
  test_pool_2d(&t);
  test_pool_other_dims(&t);
  test_chain(&t);
  test_errors(&t);
  return adj_test_finish(&t);
}

/* t328: distributed upsampling (upsample_layer.h): nearest, linear, bilinear
 * and trilinear, align_corners on and off, by size and by scale factor,
 * upsampling and downsampling:
 *   - the sequential layer against PyTorch's F.interpolate on fixed inputs
 *     (tools/pytorch/upsample_twin.py wrote data/t328-upsample-torch.txt): outputs
 *     and input gradients, both dtypes;
 *   - the dot-product test (the adjoint is exact), the Taylor test (linear:
 *     round-off) and distributed against sequential, on partitions over
 *     channels and space at 1-8 ranks, one with rank 0 inactive and one cut
 *     unevenly with empty blocks, in float64 and float32;
 *   - bad configurations: a scale factor <= 0, both or neither of size and
 *     scale factor, align_corners with nearest. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dist_check.h"

typedef struct up_case {
  int rank;
  int64_t shape[5];
  adj_interp_mode mode;
  bool align_corners;
  int64_t size[3];
  double scale[3];
} up_case;

/* The table of tools/pytorch/upsample_twin.py, in its order. */
static const up_case torch_cases[] = {
    {4, {1, 2, 4, 5}, ADJ_INTERP_NEAREST, false, {7, 8}, {0}},
    {4, {1, 2, 4, 5}, ADJ_INTERP_NEAREST, false, {0}, {2, 3}},
    {4, {1, 2, 4, 5}, ADJ_INTERP_LINEAR, false, {7, 9}, {0}},
    {4, {1, 2, 4, 5}, ADJ_INTERP_LINEAR, true, {7, 9}, {0}},
    {4, {1, 2, 4, 5}, ADJ_INTERP_LINEAR, false, {0}, {2.5, 1.5}},
    {4, {1, 2, 6, 5}, ADJ_INTERP_LINEAR, false, {3, 2}, {0}},
    {3, {2, 1, 5}, ADJ_INTERP_LINEAR, false, {0}, {3}},
    {3, {2, 1, 5}, ADJ_INTERP_LINEAR, true, {11}, {0}},
    {5, {1, 1, 3, 4, 2}, ADJ_INTERP_LINEAR, false, {0}, {2, 2, 2}},
    {5, {1, 1, 3, 4, 2}, ADJ_INTERP_NEAREST, false, {5, 6, 3}, {0}},
};

static int up_create(const void *spec, adj_dtype dtype, const adj_decomposition *input, adj_layer **layer) {
  const up_case *c = spec;
  adj_upsample_layer_config config = {.dtype = dtype, .input = input, .spatial_dims = c->rank - 2, .mode = c->mode,
                                      .align_corners = c->align_corners};
  memcpy(config.size, c->size, sizeof config.size);
  memcpy(config.scale_factor, c->scale, sizeof config.scale_factor);
  return adj_upsample_layer_create(&config, layer);
}

static void up_format(char *buf, size_t size, const up_case *c) {
  static const char *const linear[3] = {"linear", "bilinear", "trilinear"};
  int sd = c->rank - 2;
  int used = snprintf(buf, size, "%s%s %s", c->mode == ADJ_INTERP_NEAREST ? "nearest" : linear[sd - 1],
                      c->align_corners ? " ac" : "", c->size[0] ? "size" : "scale");
  for (int d = 0; d < sd && used < (int)size; d++)
    used += c->size[0] ? snprintf(buf + used, size - (size_t)used, " %lld", (long long)c->size[d])
                       : snprintf(buf + used, size - (size_t)used, " %g", c->scale[d]);
}

/* ---- PyTorch's numbers ------------------------------------------------------------------ */

static const void *torch_case_at(int index, int *rank, const int64_t **shape, char *what) {
  const up_case *c = &torch_cases[index];
  *rank = c->rank, *shape = c->shape;
  up_format(what, 96, c);
  return c;
}

/* The longest sum of the cases: trilinear upsampling by 2 in 3 dimensions,
 * where a gradient entry gathers 4 x 4 x 4 outputs. */
enum { UP_TORCH_TERMS = 64 };

static void test_torch(adj_test *t, const char *path) {
  dl_torch_table table = {"interpolations", (int)(sizeof torch_cases / sizeof torch_cases[0]), torch_case_at,
                          up_create, UP_TORCH_TERMS};
  dl_check_torch(t, path, &table);
}

/* ---- distributed ------------------------------------------------------------------------ */

static const up_case dist_cases[] = {
    {4, {2, 3, 11, 9}, ADJ_INTERP_LINEAR, false, {0}, {2, 2}},
    {4, {2, 3, 11, 9}, ADJ_INTERP_LINEAR, true, {8, 5}, {0}},
    {4, {2, 3, 11, 9}, ADJ_INTERP_NEAREST, false, {17, 20}, {0}},
    {4, {2, 3, 11, 9}, ADJ_INTERP_LINEAR, false, {0}, {1.5, 2.5}},
    {3, {2, 2, 17}, ADJ_INTERP_LINEAR, false, {0}, {2.5}},
    {5, {1, 2, 5, 4, 3}, ADJ_INTERP_LINEAR, false, {0}, {2, 2, 2}},
};

/* Partitions over (N, C, D1, D2, D3) per worker count 1..8. */
static const int parts_by_size[9][5] = {{1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, {1, 1, 2, 1, 1}, {1, 1, 1, 3, 1},
                                        {1, 1, 2, 2, 1}, {1, 1, 5, 1, 1}, {1, 2, 3, 1, 1}, {1, 1, 7, 1, 1},
                                        {2, 1, 2, 2, 1}};


static void test_distributed(adj_test *t) {
  for (size_t k = 0; k < sizeof dist_cases / sizeof dist_cases[0]; k++) {
    char what[80];
    up_format(what, sizeof what, &dist_cases[k]);
    dl_check_layouts(t, what, dist_cases[k].rank, dist_cases[k].shape, parts_by_size, up_create, &dist_cases[k],
                     DL_TAYLOR_LINEAR, 41u);
  }
}

/* ---- errors ----------------------------------------------------------------------------- */

static void test_errors(adj_test *t) {
  static const int64_t shape[4] = {2, 3, 6, 5};
  adj_decomposition *layout = dl_size_layout(t, DL_LAYOUT_ALL, 4, shape, parts_by_size);
  adj_layer *layer = NULL;
  up_case c = {4, {2, 3, 6, 5}, ADJ_INTERP_LINEAR, false, {0}, {2, 0}};
  dl_expect_error(t, "scale factor 0", up_create(&c, ADJ_FLOAT64, layout, &layer), &layer,
                  "scale factor 0 in spatial dimension 1 must be > 0");
  c.scale[1] = -1.5;
  dl_expect_error(t, "scale factor -1.5", up_create(&c, ADJ_FLOAT64, layout, &layer), &layer,
                  "scale factor -1.5 in spatial dimension 1 must be > 0");
  c.size[0] = 4, c.size[1] = 4;
  dl_expect_error(t, "size and scale", up_create(&c, ADJ_FLOAT64, layout, &layer), &layer, "both are set");
  c = (up_case){4, {2, 3, 6, 5}, ADJ_INTERP_LINEAR, false, {0}, {0}};
  dl_expect_error(t, "neither size nor scale", up_create(&c, ADJ_FLOAT64, layout, &layer), &layer,
                  "neither is set");
  c = (up_case){4, {2, 3, 6, 5}, ADJ_INTERP_NEAREST, true, {8, 8}, {0}};
  dl_expect_error(t, "nearest with align_corners", up_create(&c, ADJ_FLOAT64, layout, &layer), &layer,
                  "align_corners is for the linear modes");
  c = (up_case){3, {2, 3, 6}, ADJ_INTERP_LINEAR, false, {12}, {0}};
  dl_expect_error(t, "1-D on a rank-4 input", up_create(&c, ADJ_FLOAT64, layout, &layer), &layer, "need 3");
  c = (up_case){4, {2, 3, 6, 5}, ADJ_INTERP_LINEAR, false, {0}, {0.1, 1}};
  dl_expect_error(t, "scale 0.1 of 6 entries", up_create(&c, ADJ_FLOAT64, layout, &layer), &layer,
                  "maps 6 inputs to 0 outputs");
  adj_decomposition_destroy(&layout);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t328-upsample-layer");
  if (t.size > 8) return adj_test_skip(&t, "the partitions are written for 1 to 8 ranks");
  if (argc < 2) return adj_test_skip(&t, "usage: t328-upsample-layer PYTORCH_REFERENCE_FILE");
  adj_test_report(&t, "t328 on %d ranks", t.size);
  test_torch(&t, argv[1]);
  test_distributed(&t);
  test_errors(&t);
  return adj_test_finish(&t);
}

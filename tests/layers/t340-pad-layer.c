/* t340: distributed padding (pad_layer.h): zeros, reflect, replicate and
 * circular, in 1-3 spatial dimensions:
 *   - the sequential layer against a naive reference written here (each output
 *     entry's source found by bouncing or wrapping its index) and against
 *     PyTorch's F.pad on fixed inputs (tools/pytorch/pad_twin.py wrote
 *     data/t340-pad-torch.txt): outputs and input gradients, both dtypes;
 *   - the dot-product test (the adjoint adds the padding's gradients back into
 *     the entries it copies), the Taylor test (linear: round-off) and
 *     distributed against sequential, on spatial partitions at 1-8 ranks, one
 *     with rank 0 inactive and one cut unevenly so the boundary workers hold
 *     nothing and their padding comes from workers further in (reflect padding
 *     wider than several blocks, circular from the far end);
 *   - bad configurations on every rank: an unknown mode, reflect padding not
 *     below the extent, circular padding above it, negative padding, a rank
 *     that does not match, an unknown mode name. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dist_check.h"

typedef struct pad_case {
  int rank;
  int64_t shape[5];
  adj_padding_mode mode;
  int64_t padding[3][2];
} pad_case;

/* The table of tools/pytorch/pad_twin.py's PAD_CASES, in its order ("constant" is zeros). */
static const pad_case torch_cases[] = {
    {3, {2, 1, 5}, ADJ_PAD_REFLECT, {{2, 3}}},
    {3, {2, 1, 5}, ADJ_PAD_REPLICATE, {{4, 1}}},
    {3, {2, 1, 5}, ADJ_PAD_CIRCULAR, {{5, 2}}},
    {3, {2, 1, 5}, ADJ_PAD_ZEROS, {{1, 2}}},
    {4, {1, 2, 4, 5}, ADJ_PAD_REFLECT, {{3, 1}, {2, 4}}},
    {4, {1, 2, 4, 5}, ADJ_PAD_REPLICATE, {{2, 2}, {0, 3}}},
    {4, {1, 2, 4, 5}, ADJ_PAD_CIRCULAR, {{4, 1}, {3, 5}}},
    {4, {1, 2, 4, 5}, ADJ_PAD_ZEROS, {{1, 0}, {2, 1}}},
    {5, {1, 1, 3, 4, 2}, ADJ_PAD_REFLECT, {{2, 1}, {1, 3}, {1, 1}}},
    {5, {1, 1, 3, 4, 2}, ADJ_PAD_REPLICATE, {{1, 2}, {2, 0}, {3, 1}}},
    {5, {1, 1, 3, 4, 2}, ADJ_PAD_CIRCULAR, {{3, 2}, {1, 4}, {2, 2}}},
};

/* Distributed cases: reflect wider than most blocks, circular as wide as the
 * extent, one-sided padding, every mode in 1, 2 and 3 dimensions, and zeros
 * large enough for a thread team. */
static const pad_case dist_cases[] = {
    {4, {2, 3, 11, 9}, ADJ_PAD_REFLECT, {{2, 1}, {1, 2}}},
    {4, {2, 3, 11, 9}, ADJ_PAD_REPLICATE, {{3, 0}, {2, 2}}},
    {4, {2, 3, 11, 9}, ADJ_PAD_CIRCULAR, {{2, 3}, {4, 1}}},
    {4, {2, 3, 11, 9}, ADJ_PAD_ZEROS, {{1, 1}, {2, 0}}},
    {3, {2, 2, 13}, ADJ_PAD_REFLECT, {{9, 12}}},
    {3, {2, 2, 13}, ADJ_PAD_CIRCULAR, {{13, 5}}},
    {3, {2, 2, 13}, ADJ_PAD_REPLICATE, {{0, 6}}},
    {5, {1, 2, 5, 4, 3}, ADJ_PAD_REFLECT, {{1, 1}, {2, 0}, {1, 2}}},
    {5, {1, 2, 5, 4, 3}, ADJ_PAD_CIRCULAR, {{2, 1}, {0, 3}, {3, 3}}},
    /* Zero padding's rows over a thread team (>= 2^16 elements on one rank). */
    {4, {4, 8, 60, 40}, ADJ_PAD_ZEROS, {{2, 1}, {1, 3}}},
};

/* Partitions over (N, C, D1, D2, D3) per worker count 1..8: space cut as much
 * as the shapes allow, so most workers are boundary workers of some side. */
static const int parts_by_size[9][5] = {{1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, {1, 1, 2, 1, 1}, {1, 1, 1, 3, 1},
                                        {1, 1, 2, 2, 1}, {1, 1, 5, 1, 1}, {1, 1, 3, 2, 1}, {1, 1, 7, 1, 1},
                                        {2, 1, 2, 2, 1}};

static const char *const mode_names[] = {"zeros", "reflect", "replicate", "circular"};

static int pad_create(const void *spec, adj_dtype dtype, const adj_decomposition *input, adj_layer **layer) {
  const pad_case *c = spec;
  adj_pad_layer_config config = {.dtype = dtype, .input = input, .spatial_dims = c->rank - 2, .mode = c->mode};
  memcpy(config.padding, c->padding, sizeof config.padding);
  return adj_pad_layer_create(&config, layer);
}

static void pad_format(char *buf, size_t size, const pad_case *c) {
  int used = snprintf(buf, size, "%s%dd pad", mode_names[c->mode], c->rank - 2);
  for (int d = 0; d < c->rank - 2 && used < (int)size; d++)
    used += snprintf(buf + used, size - (size_t)used, " %lld:%lld", (long long)c->padding[d][0],
                     (long long)c->padding[d][1]);
}

/* ---- the naive reference ---------------------------------------------------------------- */

/* The input index output position q reads, or -1 for a zero. */
static int64_t naive_source(adj_padding_mode mode, int64_t n, int64_t left, int64_t q) {
  int64_t i = q - left;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case ADJ_PAD_ZEROS: return -1;
    case ADJ_PAD_REPLICATE: return i < 0 ? 0 : n - 1;
    case ADJ_PAD_CIRCULAR:
      while (i < 0) i += n;
      while (i >= n) i -= n;
      return i;
    default: /* reflect: bounce off the edges, which are not repeated */
      while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
      return i;
  }
}

/* y = pad(x), or with `adjoint` dx += pad^T dy (dx cleared first): every
 * output entry's source by its multi-index. */
static void naive_pad(const pad_case *c, const adj_tensor *in, adj_tensor *out, bool adjoint) {
  const adj_tensor *x = adjoint ? out : in, *y = adjoint ? in : out;
  if (adjoint) adj_tensor_zero(out);
  for (int64_t o = 0; o < adj_tensor_volume(y); o++) {
    int64_t rest = o, src = 0, stride = 1;
    bool zero = false;
    for (int i = c->rank - 1; i >= 0; i--) {
      int64_t q = rest % y->shape[i];
      rest /= y->shape[i];
      int64_t s = i < 2 ? q : naive_source(c->mode, x->shape[i], c->padding[i - 2][0], q);
      zero |= s < 0;
      src += s * stride;
      stride *= x->shape[i];
    }
    if (zero) {
      if (!adjoint) adj_tensor_set(out, o, 0);
    } else if (adjoint) {
      adj_tensor_set(out, src, adj_tensor_get(out, src) + adj_tensor_get(in, o));
    } else {
      adj_tensor_set(out, o, adj_tensor_get(in, src));
    }
  }
}

/* The most copies of one input entry the padding makes, which its gradient
 * sums, multiplied over the spatial dimensions: reflect and circular padding
 * is no wider than the extent on either side, so each side copies an entry at
 * most once; replicate copies an edge entry once per padded position; zeros
 * copies nothing. */
static int64_t pad_copies(const pad_case *c) {
  int64_t copies = 1;
  for (int i = 2; i < c->rank; i++) {
    int64_t left = c->padding[i - 2][0], right = c->padding[i - 2][1];
    if (c->mode == ADJ_PAD_REPLICATE) copies *= 1 + left + right;
    else if (c->mode != ADJ_PAD_ZEROS) copies *= 1 + (left > 0) + (right > 0);
  }
  return copies;
}

static double max_diff(const adj_tensor *a, const adj_tensor *b) {
  double e = 0;
  for (int64_t i = 0; i < adj_tensor_volume(a); i++) e = fmax(e, fabs(adj_tensor_get(a, i) - adj_tensor_get(b, i)));
  return e;
}

/* The sequential layer's forward and backward against naive_pad on random data. */
static void check_naive_case(adj_test *t, const pad_case *c, adj_dtype dtype, double *worst) {
  adj_decomposition *root = dl_self_layout(t, c->rank, c->shape);
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, pad_create(c, dtype, root, &layer));
  if (layer) {
    dl_data g;
    dl_data_make(layer, 29u, &g);
    adj_tensor y, ref_y, dx, ref_dx;
    adj_layer_create_output(layer, &y), adj_layer_create_output(layer, &ref_y);
    adj_layer_create_input(layer, &dx), adj_layer_create_input(layer, &ref_dx);
    ADJ_TEST_OK(t, adj_layer_forward(layer, &g.x, &y));
    ADJ_TEST_OK(t, adj_layer_backward(layer, &g.dy, &dx));
    naive_pad(c, &g.x, &ref_y, false);
    naive_pad(c, &g.dy, &ref_dx, true);
    double ey = max_diff(&y, &ref_y), eg = max_diff(&dx, &ref_dx);
    char label[96];
    pad_format(label, sizeof label, c);
    /* Copies are exact; gradients sum at most a few terms in another order. */
    double tol = adj_test_random_sum_tolerance(dtype, (double)pad_copies(c));
    ADJ_TEST_CHECK(t, ey == 0 && eg < tol, "%s %s: against the naive reference y %.3e, grad %.3e", label,
                   adj_dtype_name(dtype), ey, eg);
    worst[dtype] = fmax(worst[dtype], fmax(ey, eg));
    adj_tensor_destroy(&y), adj_tensor_destroy(&ref_y), adj_tensor_destroy(&dx), adj_tensor_destroy(&ref_dx);
    dl_data_free(&g);
  }
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&root);
}

static void test_naive(adj_test *t) {
  double worst[2] = {0, 0};
  int n = 0;
  for (int dt = 0; dt < 2; dt++) {
    for (size_t k = 0; k < sizeof torch_cases / sizeof torch_cases[0]; k++, n++)
      check_naive_case(t, &torch_cases[k], (adj_dtype)dt, worst);
    for (size_t k = 0; k < sizeof dist_cases / sizeof dist_cases[0]; k++, n++)
      check_naive_case(t, &dist_cases[k], (adj_dtype)dt, worst);
  }
  adj_test_report(t, "  against the naive reference: %d paddings, max error float32 %.1e, float64 %.1e", n,
                  worst[0], worst[1]);
}

/* ---- PyTorch's numbers ------------------------------------------------------------------ */

static const void *torch_case_at(int index, int *rank, const int64_t **shape, char *what) {
  const pad_case *c = &torch_cases[index];
  *rank = c->rank, *shape = c->shape;
  pad_format(what, 96, c);
  return c;
}

static void test_torch(adj_test *t, const char *path) {
  dl_torch_table table = {"paddings", (int)(sizeof torch_cases / sizeof torch_cases[0]), torch_case_at, pad_create, 1};
  for (int k = 0; k < table.count; k++)
    table.reduction_length = fmax(table.reduction_length, (double)pad_copies(&torch_cases[k]));
  dl_check_torch(t, path, &table);
}

/* ---- distributed ------------------------------------------------------------------------ */

static void test_distributed(adj_test *t) {
  for (size_t k = 0; k < sizeof dist_cases / sizeof dist_cases[0]; k++) {
    char what[80];
    pad_format(what, sizeof what, &dist_cases[k]);
    dl_check_layouts(t, what, dist_cases[k].rank, dist_cases[k].shape, parts_by_size, pad_create, &dist_cases[k],
                     DL_TAYLOR_LINEAR, 43u);
  }
}

/* ---- a convolution with a padding mode ---------------------------------------------------- */

/* Conv takes the batch whole and the channels evenly cut: space only. */
static const int conv_parts_by_size[9][5] = {{1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, {1, 1, 2, 1, 1}, {1, 1, 1, 3, 1},
                                             {1, 1, 2, 2, 1}, {1, 1, 5, 1, 1}, {1, 1, 3, 2, 1}, {1, 1, 7, 1, 1},
                                             {1, 1, 2, 4, 1}};

/* PyTorch's Conv2d(padding_mode=mode): the pad layer, then a 3x3 convolution
 * (stride 2 in the first dimension) without padding, as one network. */
static int padded_conv_create(const void *spec, adj_dtype dtype, const adj_decomposition *input, adj_layer **net) {
  adj_layer *layers[2] = {NULL, NULL};
  int status = pad_create(spec, dtype, input, &layers[0]);
  adj_conv_layer_config conv = {.comm = adj_partition_base_comm(adj_decomposition_partition(input)),
                                .dtype = dtype, .out_channels = 4,
                                .window = {.spatial_dims = 2, .kernel = {3, 3}, .stride = {2, 1}}};
  if (!status) conv.input = adj_layer_output_layout(layers[0]);
  if (!status) status = adj_conv_layer_create(&conv, &layers[1]);
  if (!status) status = adj_network_create("padded_conv", 2, layers, net);
  adj_layer_destroy(&layers[0]), adj_layer_destroy(&layers[1]);
  return status;
}

static void test_padded_conv(adj_test *t) {
  for (int mode = ADJ_PAD_REFLECT; mode <= ADJ_PAD_CIRCULAR; mode++) {
    pad_case c = {4, {2, 3, 11, 9}, (adj_padding_mode)mode, {{1, 1}, {2, 1}}};
    char what[64];
    snprintf(what, sizeof what, "conv3x3 padding_mode=%s", mode_names[mode]);
    dl_check_layouts(t, what, c.rank, c.shape, conv_parts_by_size, padded_conv_create, &c, DL_TAYLOR_SMOOTH, 59u);
  }
}

/* ---- what moves ------------------------------------------------------------------------- */

/* Messages and bytes all workers sent in one forward of mode on (2, 3, 13)
 * cut over every rank, padding 2:2. */
static void count_traffic(adj_test *t, adj_padding_mode mode, uint64_t *messages, uint64_t *bytes, uint64_t *interior) {
  static const int64_t shape[3] = {2, 3, 13};
  const int parts[3] = {1, 1, t->size};
  adj_decomposition *layout = dl_layout(t, 3, shape, parts, NULL, NULL);
  pad_case c = {3, {2, 3, 13}, mode, {{2, 2}}};
  adj_layer *layer = NULL;
  adj_op_counters n = {0};
  if (layout) ADJ_TEST_OK(t, pad_create(&c, ADJ_FLOAT64, layout, &layer));
  if (layer) {
    adj_tensor x, y;
    adj_layer_create_input(layer, &x), adj_layer_create_output(layer, &y);
    ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &y));
    ADJ_TEST_OK(t, adj_pad_layer_counters(layer, &n));
    adj_tensor_destroy(&x), adj_tensor_destroy(&y);
  }
  bool inner = t->rank > 0 && t->rank < t->size - 1;
  uint64_t mine[3] = {n.messages_sent + n.messages_received, n.bytes_sent, 0}, all[3];
  mine[2] = inner ? mine[0] : 0;
  MPI_Allreduce(mine, all, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  *messages = all[0], *bytes = all[1], *interior = all[2];
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&layout);
}

/* Blocks of 13 over at most 4 workers hold 3 or more rows, so reflect and
 * replicate pad from the boundary workers' own rows: nothing moves.  Circular
 * moves the last 2 rows to worker 0 and the first 2 to the last worker (2 x 3
 * x 2 doubles each), one message sent and one received per side; interior
 * workers take part in none. */
static void test_traffic(adj_test *t) {
  if (t->size > 4) return;
  for (int mode = ADJ_PAD_REFLECT; mode <= ADJ_PAD_CIRCULAR; mode++) {
    uint64_t messages, bytes, interior;
    count_traffic(t, (adj_padding_mode)mode, &messages, &bytes, &interior);
    bool moves = mode == ADJ_PAD_CIRCULAR && t->size > 1;
    uint64_t want_messages = moves ? 4 : 0, want_bytes = moves ? 2 * 2 * 3 * 2 * 8 : 0;
    adj_test_report(t, "  %-9s pad 2:2 of 13 on %d workers: %llu messages, %llu bytes sent, %llu on interior workers",
                    mode_names[mode], t->size, (unsigned long long)messages, (unsigned long long)bytes,
                    (unsigned long long)interior);
    ADJ_TEST_CHECK(t, messages == want_messages && bytes == want_bytes && interior == 0,
                   "%s: %llu messages and %llu bytes, expected %llu and %llu, %llu on interior workers",
                   mode_names[mode], (unsigned long long)messages, (unsigned long long)bytes,
                   (unsigned long long)want_messages, (unsigned long long)want_bytes, (unsigned long long)interior);
  }
}

/* ---- errors ----------------------------------------------------------------------------- */

static void test_errors(adj_test *t) {
  static const int64_t shape[4] = {2, 3, 6, 5};
  adj_decomposition *layout = dl_size_layout(t, DL_LAYOUT_ALL, 4, shape, parts_by_size);
  adj_layer *layer = NULL;
  pad_case c = {4, {2, 3, 6, 5}, (adj_padding_mode)7, {{1, 1}, {1, 1}}};
  dl_expect_error(t, "mode 7", pad_create(&c, ADJ_FLOAT64, layout, &layer), &layer, "unknown padding mode 7");
  c = (pad_case){4, {2, 3, 6, 5}, ADJ_PAD_REFLECT, {{6, 1}, {1, 1}}};
  dl_expect_error(t, "reflect 6 of 6", pad_create(&c, ADJ_FLOAT64, layout, &layer), &layer,
                  "reflect left padding 6 in spatial dimension 0 must be < the extent 6");
  c = (pad_case){4, {2, 3, 6, 5}, ADJ_PAD_REFLECT, {{1, 1}, {0, 5}}};
  dl_expect_error(t, "reflect 5 of 5", pad_create(&c, ADJ_FLOAT64, layout, &layer), &layer,
                  "reflect right padding 5 in spatial dimension 1 must be < the extent 5");
  c = (pad_case){4, {2, 3, 6, 5}, ADJ_PAD_CIRCULAR, {{7, 0}, {0, 0}}};
  dl_expect_error(t, "circular 7 of 6", pad_create(&c, ADJ_FLOAT64, layout, &layer), &layer,
                  "circular left padding 7 in spatial dimension 0 must be <= the extent 6");
  c = (pad_case){4, {2, 3, 6, 5}, ADJ_PAD_ZEROS, {{0, 0}, {-2, 0}}};
  dl_expect_error(t, "padding -2", pad_create(&c, ADJ_FLOAT64, layout, &layer), &layer,
                  "left padding -2 in spatial dimension 1 must be >= 0");
  c = (pad_case){3, {2, 3, 6}, ADJ_PAD_REPLICATE, {{1, 1}}};
  dl_expect_error(t, "1-D on a rank-4 input", pad_create(&c, ADJ_FLOAT64, layout, &layer), &layer, "need 3");
  adj_padding_mode mode = ADJ_PAD_ZEROS;
  adj_test_expect_error(t, "mode name 'symmetric'", adj_padding_mode_parse("symmetric", &mode), ADJ_ERR_ARG,
                        "unknown mode 'symmetric'");
  adj_op_counters counters;
  adj_test_expect_error(t, "counters of no layer", adj_pad_layer_counters(NULL, &counters), ADJ_ERR_ARG,
                        "(NULL) is not a pad layer");
  ADJ_TEST_OK(t, adj_padding_mode_parse("circular", &mode));
  ADJ_TEST_CHECK(t, mode == ADJ_PAD_CIRCULAR && !strcmp(adj_padding_mode_name(mode), "circular"),
                 "'circular' parses to mode %d", (int)mode);
  adj_decomposition_destroy(&layout);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t340-pad-layer");
  if (t.size > 8) return adj_test_skip(&t, "the partitions are written for 1 to 8 ranks");
  if (argc < 2) return adj_test_skip(&t, "usage: t340-pad-layer PYTORCH_REFERENCE_FILE");
  adj_test_report(&t, "t340 on %d ranks", t.size);
  test_naive(&t);
  test_torch(&t, argv[1]);
  test_distributed(&t);
  test_padded_conv(&t);
  test_traffic(&t);
  test_errors(&t);
  return adj_test_finish(&t);
}

/* t326: distributed batch normalisation (batchnorm_layer.h), 1-D, 2-D and 3-D, in
 * float32 and float64, training and evaluation, affine on and off, running
 * statistics on and off:
 *   - the sequential layer against PyTorch (tools/pytorch/batchnorm_twin.py wrote
 *     data/t326-batchnorm-torch.txt: outputs, input and parameter gradients,
 *     running statistics, evaluation outputs) and against a naive float64
 *     reference written here
 *     (output, running mean and unbiased running variance after one step);
 *   - the Jacobian dot-product test and the Taylor test;
 *   - distributed against sequential (outputs, jvps, input and parameter
 *     gradients; dl_tolerance) and the running statistics of
 *     every worker against the sequential twin's;
 *   - float32 data with a large offset (mean 1e4, spread 1): the variance
 *     must survive (a float32 sum of squares would lose every digit);
 *   - bad configurations: momentum outside [0, 1], eps <= 0, a channel count
 *     that does not match, too few values per channel.
 * Partitions split batch, channels and space at 1-8 ranks; a second layout
 * leaves rank 0 inactive and a third cuts unevenly with empty blocks. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dist_check.h"

/* Partition shapes over (N, C, D1, D2, D3) per worker count 1..8. */
static const int parts_by_size[9][5] = {{1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, {1, 2, 1, 1, 1}, {1, 1, 3, 1, 1},
                                        {2, 2, 1, 1, 1}, {1, 1, 5, 1, 1}, {1, 2, 3, 1, 1}, {1, 1, 1, 7, 1},
                                        {2, 2, 2, 1, 1}};

typedef struct bn_mode {
  const char *name;
  bool training, no_affine, no_running_stats;
} bn_mode;

static const bn_mode modes[] = {
    {"train", true, false, false},
    {"train no-affine", true, true, false},
    {"eval", false, false, false},
    {"eval untracked", false, false, true},
};

static int bn_create(adj_dtype dtype, const adj_decomposition *input, const bn_mode *m, double momentum,
                     adj_layer **layer) {
  int status = adj_batchnorm_layer_create(
      &(adj_batchnorm_layer_config){.dtype = dtype, .input = input,
                                    .num_features = adj_decomposition_global_shape(input)[1], .eps = 1e-5,
                                    .momentum = momentum, .no_affine = m->no_affine,
                                    .no_running_stats = m->no_running_stats},
      layer);
  if (!status) status = adj_batchnorm_layer_set_training(*layer, m->training);
  return status;
}

/* Evaluation needs running statistics other than (0, 1) to mean something:
 * the same fixed per-channel values on every worker (block of the global). */
static void bn_set_running(adj_layer *layer) {
  adj_tensor mean, var;
  if (adj_batchnorm_layer_running_stats(layer, &mean, &var)) return;
  int64_t start = adj_decomposition_local_block(adj_layer_input_layout(layer)).start[1];
  for (int64_t j = 0; j < adj_tensor_volume(&mean); j++) {
    adj_tensor_set(&mean, j, 0.1 * (double)(start + j) - 0.2);
    adj_tensor_set(&var, j, 0.5 + 0.25 * (double)(start + j));
  }
}

/* ---- against the naive reference -------------------------------------------------------- */

/* y, running mean and running var of one training forward from (0, 1), in
 * float64, straight from the definitions. */
static void bn_naive(const adj_tensor *x, const adj_tensor *gamma, const adj_tensor *beta, double eps,
                     double momentum, adj_tensor *y, double *rm, double *rv) {
  int64_t n = x->shape[0], c = x->shape[1], s = adj_tensor_volume(x) / (n * c), m = n * s;
  for (int64_t j = 0; j < c; j++) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; i++)
      for (int64_t k = 0; k < s; k++) mean += adj_tensor_get(x, (i * c + j) * s + k);
    mean /= (double)m;
    for (int64_t i = 0; i < n; i++)
      for (int64_t k = 0; k < s; k++) var += pow(adj_tensor_get(x, (i * c + j) * s + k) - mean, 2);
    double biased = var / (double)m, unbiased = var / (double)(m - 1);
    double g = gamma ? adj_tensor_get(gamma, j) : 1, b = beta ? adj_tensor_get(beta, j) : 0;
    for (int64_t i = 0; i < n; i++)
      for (int64_t k = 0; k < s; k++) {
        int64_t e = (i * c + j) * s + k;
        adj_tensor_set(y, e, g * (adj_tensor_get(x, e) - mean) / sqrt(biased + eps) + b);
      }
    rm[j] = momentum * mean;
    rv[j] = (1 - momentum) + momentum * unbiased;
  }
}

static double bn_rel(double a, double b) { return fabs(a - b) / fmax(1, fabs(b)); }

/* Batch statistics and their gradients sum the `count` entries of a channel
 * (data drawn at random, or as good as).  Computed another way (PyTorch),
 * inputs offset by `offset` from an O(1) spread also lose their own rounding,
 * eps times the offset, which normalisation scales up by offset / spread. */
static double bn_tolerance(adj_dtype dtype, int64_t count, double offset) {
  return adj_test_random_sum_tolerance(dtype, (double)count) + adj_test_sum_tolerance(dtype, 1) * fabs(offset);
}

/* The sequential layer (on every rank, MPI_COMM_SELF) against bn_naive on
 * random data with an offset and scale per channel. */
static void test_reference(adj_test *t, adj_dtype dtype, int rank, const int64_t *shape, double offset) {
  adj_decomposition *root = dl_self_layout(t, rank, shape);
  adj_layer *layer = NULL;
  static const bn_mode train = {"train", true, false, false};
  ADJ_TEST_OK(t, bn_create(dtype, root, &train, 0.3, &layer));
  if (!layer) {
    adj_decomposition_destroy(&root);
    return;
  }
  adj_tensor x, y, y64;
  adj_layer_create_input(layer, &x), adj_layer_create_output(layer, &y);
  adj_tensor_create(&y64, ADJ_FLOAT64, rank, shape);
  adj_rng *rng;
  adj_rng_create(99u, &rng);
  adj_rng_fill_uniform(rng, &x, -1, 1);
  int64_t c = shape[1], per = adj_tensor_volume(&x) / (shape[0] * c);
  for (int64_t e = 0; e < adj_tensor_volume(&x); e++) {
    int64_t j = (e / per) % c;
    adj_tensor_set(&x, e, offset * (double)(j + 1) + (0.5 + (double)j) * adj_tensor_get(&x, e));
  }
  adj_parameter *g = adj_layer_parameter(layer, 0), *b = adj_layer_parameter(layer, 1);
  adj_rng_fill_uniform(rng, &g->value, 0.5, 1.5);
  adj_rng_fill_uniform(rng, &b->value, -1, 1);
  adj_rng_destroy(&rng);
  double rm[16], rv[16];
  bn_naive(&x, &g->value, &b->value, 1e-5, 0.3, &y64, rm, rv);
  ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &y));
  double err_y = 0, err_m = 0, err_v = 0;
  for (int64_t e = 0; e < adj_tensor_volume(&y); e++)
    err_y = fmax(err_y, bn_rel(adj_tensor_get(&y, e), adj_tensor_get(&y64, e)));
  adj_tensor mean, var;
  ADJ_TEST_OK(t, adj_batchnorm_layer_running_stats(layer, &mean, &var));
  for (int64_t j = 0; j < c; j++) {
    err_m = fmax(err_m, fabs(adj_tensor_get(&mean, j) - rm[j]) / fmax(1e-300, fabs(rm[j])));
    err_v = fmax(err_v, fabs(adj_tensor_get(&var, j) - rv[j]) / fabs(rv[j]));
  }
  /* float32 outputs carry float32 rounding of O(1) values; the statistics are
   * float64 from float32 inputs, so they keep float64 accuracy.  The naive
   * reference sums the data as it comes and the layer around each channel's
   * first value, so their means differ by float64 roundings of values the
   * size of the channel's offset (up to c times `offset`), which the
   * normalisation scales by the offset over the spread (at least 0.5). */
  int64_t count = shape[0] * per;
  double tol_y = bn_tolerance(dtype, count, offset * (double)c / 0.5), tol_stats = bn_tolerance(ADJ_FLOAT64, count, 0);
  char dims[48];
  snprintf(dims, sizeof dims, "%dd %s offset %g", rank == 2 ? 1 : rank - 2, adj_dtype_name(dtype), offset);
  adj_test_report(t, "  naive reference %-30s y %.1e, running mean %.1e, running var (unbiased) %.1e", dims, err_y,
                  err_m, err_v);
  ADJ_TEST_CHECK(t, err_y < tol_y && err_m < tol_stats && err_v < tol_stats,
                 "%s: sequential batch norm differs from the naive reference: y %.3e, mean %.3e, var %.3e", dims,
                 err_y, err_m, err_v);
  ADJ_TEST_CHECK(t, adj_batchnorm_layer_batches_tracked(layer) == 1, "%s: batches tracked %lld, not 1", dims,
                 (long long)adj_batchnorm_layer_batches_tracked(layer));
  adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&y64);
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&root);
}

/* ---- PyTorch's numbers ------------------------------------------------------------------ */

/* The table of tools/pytorch/batchnorm_twin.py, in its order: input shapes and offsets. */
static const struct {
  int rank;
  int64_t shape[5];
  double offset;
} torch_cases[] = {
    {2, {4, 3}, 0}, {3, {3, 2, 5}, 0}, {4, {2, 3, 4, 3}, 0}, {4, {2, 3, 4, 3}, 1000}, {5, {2, 2, 3, 2, 3}, 0},
};
enum { TORCH_CASES = (int)(sizeof torch_cases / sizeof torch_cases[0]) };

static bool read_doubles(FILE *f, int64_t n, double *v) {
  for (int64_t i = 0; i < n; i++)
    if (fscanf(f, "%lf", &v[i]) != 1) return false;
  return true;
}

/* Differences of t's entries from ref, relative to max(1, |ref|). */
static double diff_from(const adj_tensor *t, const double *ref) {
  double worst = 0;
  for (int64_t i = 0; i < adj_tensor_volume(t); i++) worst = fmax(worst, bn_rel(adj_tensor_get(t, i), ref[i]));
  return worst;
}

/* One training forward and backward, then an evaluation forward, of the
 * sequential layer against PyTorch's (y, dx, dgamma, dbeta, running mean and
 * var, evaluation y). */
static void check_torch_case(adj_test *t, int k, const double *ref, adj_dtype dtype, double *worst) {
  int64_t n = 1, c = torch_cases[k].shape[1];
  for (int d = 0; d < torch_cases[k].rank; d++) n *= torch_cases[k].shape[d];
  adj_decomposition *root = dl_self_layout(t, torch_cases[k].rank, torch_cases[k].shape);
  adj_layer *layer = NULL;
  static const bn_mode train = {"train", true, false, false};
  ADJ_TEST_OK(t, bn_create(dtype, root, &train, 0.3, &layer));
  if (layer) {
    adj_tensor x, y, dy, dx, mean, var;
    adj_layer_create_input(layer, &x), adj_layer_create_input(layer, &dx);
    adj_layer_create_output(layer, &y), adj_layer_create_output(layer, &dy);
    for (int64_t i = 0; i < n; i++) adj_tensor_set(&x, i, torch_cases[k].offset + (double)((7 * i + 3) % 13) / 13.0);
    for (int64_t j = 0; j < n; j++) adj_tensor_set(&dy, j, (double)((5 * j + 1) % 11) / 11.0 - 0.5);
    adj_parameter *g = adj_layer_parameter(layer, 0), *b = adj_layer_parameter(layer, 1);
    for (int64_t j = 0; j < c; j++)
      adj_tensor_set(&g->value, j, 0.5 + (double)j / 4), adj_tensor_set(&b->value, j, (double)j / 8 - 0.25);
    adj_layer_zero_grad(layer);
    ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &y));
    ADJ_TEST_OK(t, adj_layer_backward(layer, &dy, &dx));
    ADJ_TEST_OK(t, adj_batchnorm_layer_running_stats(layer, &mean, &var));
    double e[7] = {diff_from(&y, ref), diff_from(&dx, ref + n), diff_from(&g->grad, ref + 2 * n),
                   diff_from(&b->grad, ref + 2 * n + c), diff_from(&mean, ref + 2 * n + 2 * c),
                   diff_from(&var, ref + 2 * n + 3 * c), 0};
    ADJ_TEST_OK(t, adj_batchnorm_layer_set_training(layer, false));
    ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &y));
    e[6] = diff_from(&y, ref + 2 * n + 4 * c);
    double tol = bn_tolerance(dtype, n / c, torch_cases[k].offset), most = 0;
    for (int i = 0; i < 7; i++) most = fmax(most, e[i]);
    /* float32 cannot hold the offset-1000 input to better than 6e-5 of its
     * spread, so that case is compared in float64 only. */
    if (!(dtype == ADJ_FLOAT32 && torch_cases[k].offset > 0)) {
      ADJ_TEST_CHECK(t, most < tol,
                     "case %d %s: against PyTorch y %.2e, dx %.2e, dgamma %.2e, dbeta %.2e, running mean %.2e, "
                     "running var %.2e, eval y %.2e",
                     k, adj_dtype_name(dtype), e[0], e[1], e[2], e[3], e[4], e[5], e[6]);
      worst[dtype] = fmax(worst[dtype], most);
    }
    adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&dy), adj_tensor_destroy(&dx);
  }
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&root);
}

static void test_torch(adj_test *t, const char *path) {
  FILE *f = dl_open_reference(t, path);
  if (!f) return;
  static double ref[2048];
  int cases = 0, ch;
  double worst[2] = {0, 0};
  while ((ch = fgetc(f)) == '#')
    while ((ch = fgetc(f)) != '\n' && ch != EOF) continue;
  if (ch != EOF) ungetc(ch, f);
  int k;
  long long ny, nx;
  while (fscanf(f, "%d %lld", &k, &ny) == 2) {
    bool ok = k >= 0 && k < TORCH_CASES && ny > 0 && ny <= 256 && read_doubles(f, ny, ref) &&
              fscanf(f, "%lld", &nx) == 1 && nx == ny;
    int64_t c = ok ? torch_cases[k].shape[1] : 0;
    ok = ok && read_doubles(f, ny + 4 * c + ny, ref + ny);
    ADJ_TEST_CHECK(t, ok, "bad reference line for case %d", k);
    if (!ok) break;
    for (int dt = 0; dt < 2; dt++) check_torch_case(t, k, ref, (adj_dtype)dt, worst);
    cases++;
  }
  fclose(f);
  adj_test_report(t, "  against PyTorch: %d cases (y, dx, dgamma, dbeta, running stats, eval y), max rel err float32 "
                     "%.1e, float64 %.1e",
                  cases, worst[0], worst[1]);
  ADJ_TEST_CHECK(t, cases == TORCH_CASES, "%d reference cases, expected %d", cases, TORCH_CASES);
}

/* ---- distributed ------------------------------------------------------------------------ */

/* max over ranks of the difference between this worker's running statistics
 * and the same channels of the sequential twin's. */
static double bn_running_diff(adj_layer *dist, adj_layer *seq) {
  adj_tensor dm, dv, sm, sv;
  double diff = 0, worst = 0;
  if (!adj_batchnorm_layer_running_stats(dist, &dm, &dv) && !adj_batchnorm_layer_running_stats(seq, &sm, &sv)) {
    int64_t start = adj_decomposition_local_block(adj_layer_input_layout(dist)).start[1];
    for (int64_t j = 0; j < adj_tensor_volume(&dm); j++)
      diff = fmax(diff, fmax(bn_rel(adj_tensor_get(&dm, j), adj_tensor_get(&sm, start + j)),
                             bn_rel(adj_tensor_get(&dv, j), adj_tensor_get(&sv, start + j))));
  }
  MPI_Allreduce(&diff, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

static void check_layout(adj_test *t, adj_dtype dtype, const bn_mode *m, adj_decomposition *layout,
                         adj_decomposition *root, const char *where, bool taylor) {
  adj_layer *dist = NULL, *seq = NULL;
  ADJ_TEST_OK(t, bn_create(dtype, layout, m, 0.1, &dist));
  ADJ_TEST_OK(t, bn_create(dtype, root, m, 0.1, &seq));
  if (dist && seq) {
    char label[160];
    snprintf(label, sizeof label, "bn %s %s %s", m->name, adj_dtype_name(dtype), where);
    if (!m->training) bn_set_running(dist), bn_set_running(seq);
    dl_dottest(t, label, dist);
    if (taylor) dl_taylor(t, label, dist, DL_TAYLOR_SMOOTH);
    /* The tests above ran training forwards on dist only: restart both twins
     * from the same running statistics, so after dl_compare's one forward
     * each they must agree too. */
    bn_set_running(dist), bn_set_running(seq);
    dl_compare(t, label, dist, seq, 31u);
    double running = bn_running_diff(dist, seq);
    adj_test_report(t, "  %-52s running stats dist vs seq %.1e", label, running);
    ADJ_TEST_CHECK(t, running <= dl_tolerance(dist), "%s: running statistics differ by %.3e",
                   label, running);
  }
  adj_layer_destroy(&dist);
  adj_layer_destroy(&seq);
}

/* Every mode in float64, training in float32 (the other modes share its
 * code paths), on the given layouts. */
static void test_distributed(adj_test *t, int rank, const int64_t *shape, int first, int last) {
  adj_decomposition *root = dl_self_layout(t, rank, shape);
  for (int k = first; k <= last; k++) {
    adj_decomposition *layout = dl_size_layout(t, (dl_layout_kind)k, rank, shape, parts_by_size);
    if (!layout) continue;
    char where[96], text[48];
    snprintf(where, sizeof where, "%dd %s (%s)", rank == 2 ? 1 : rank - 2,
             adj_partition_format(adj_decomposition_partition(layout), text, sizeof text), dl_layout_names[k]);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
      /* The Taylor test checks jvp against forward, which the layout does
       * not change: once per mode, on the first layout. */
      check_layout(t, ADJ_FLOAT64, &modes[i], layout, root, where, k == first);
    check_layout(t, ADJ_FLOAT32, &modes[0], layout, root, where, false);
    adj_decomposition_destroy(&layout);
  }
  adj_decomposition_destroy(&root);
}

/* ---- errors ----------------------------------------------------------------------------- */

static void test_errors(adj_test *t) {
  static const int64_t shape[4] = {3, 4, 5, 2};
  adj_decomposition *layout = dl_size_layout(t, DL_LAYOUT_ALL, 4, shape, parts_by_size);
  adj_batchnorm_layer_config base = {.dtype = ADJ_FLOAT64, .input = layout, .num_features = 4, .eps = 1e-5,
                                     .momentum = 0.1};
  adj_layer *layer = NULL;
  adj_batchnorm_layer_config c = base;
  c.momentum = -0.25;
  dl_expect_error(t, "momentum -0.25", adj_batchnorm_layer_create(&c, &layer), &layer, "momentum is -0.25");
  c.momentum = 1.5;
  dl_expect_error(t, "momentum 1.5", adj_batchnorm_layer_create(&c, &layer), &layer, "momentum is 1.5");
  c = base, c.eps = 0;
  dl_expect_error(t, "eps 0", adj_batchnorm_layer_create(&c, &layer), &layer, "eps is 0");
  c.eps = -1e-3;
  dl_expect_error(t, "eps -0.001", adj_batchnorm_layer_create(&c, &layer), &layer, "eps is -0.001");
  c = base, c.num_features = 3;
  dl_expect_error(t, "num_features 3 for 4 channels", adj_batchnorm_layer_create(&c, &layer), &layer,
                  "num_features is 3 but the input has 4 channels");
  adj_decomposition *tiny = dl_self_layout(t, 2, (const int64_t[2]){1, 4});
  c = base, c.input = tiny;
  dl_expect_error(t, "one value per channel", adj_batchnorm_layer_create(&c, &layer), &layer,
                  "1 value(s) per channel");
  adj_decomposition_destroy(&tiny);
  adj_decomposition_destroy(&layout);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t326-batchnorm-layer");
  if (t.size > 8) return adj_test_skip(&t, "the partitions are written for 1 to 8 ranks");
  if (argc < 2) return adj_test_skip(&t, "usage: t326-batchnorm-layer PYTORCH_REFERENCE_FILE");
  adj_test_report(&t, "t326 on %d ranks", t.size);
  test_torch(&t, argv[1]);
  static const int64_t s1[2] = {9, 5}, s2[4] = {4, 5, 7, 6}, s3[5] = {3, 4, 5, 3, 4};
  for (int dt = 0; dt < 2; dt++) {
    test_reference(&t, (adj_dtype)dt, 4, s2, 0);
    test_reference(&t, (adj_dtype)dt, 4, s2, 1e4);
  }
  test_reference(&t, ADJ_FLOAT64, 2, s1, 3);
  test_reference(&t, ADJ_FLOAT64, 5, s3, 3);
  test_distributed(&t, 4, s2, DL_LAYOUT_ALL, DL_LAYOUT_CUTS);
  test_distributed(&t, 2, s1, DL_LAYOUT_CUTS, DL_LAYOUT_CUTS);
  test_distributed(&t, 5, s3, DL_LAYOUT_INACTIVE, DL_LAYOUT_INACTIVE);
  test_errors(&t);
  return adj_test_finish(&t);
}

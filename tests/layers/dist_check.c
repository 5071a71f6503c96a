#include <stdio.h>
#include "dist_check.h"

#include <math.h>
#include <string.h>

adj_decomposition *dl_layout(adj_test *t, int rank, const int64_t *shape, const int *parts, const int *ranks,
                             const int64_t *const *cuts) {
  int n = 1;
  for (int i = 0; i < rank; i++) n *= parts[i];
  adj_partition *p = NULL;
  adj_decomposition *d = NULL;
  ADJ_TEST_OK(t, adj_partition_create(MPI_COMM_WORLD, rank, parts, n, ranks, &p));
  if (p) ADJ_TEST_OK(t, adj_decomposition_create_explicit(p, rank, shape, cuts, &d));
  adj_partition_destroy(&p);
  return d;
}

void dl_quadratic_cuts(int64_t n, int parts, int64_t *cuts) {
  for (int p = 0; p <= parts; p++) cuts[p] = n * p * p / ((int64_t)parts * parts);
}

const char *const dl_layout_names[3] = {"all ranks", "rank 0 inactive", "uneven cuts"};

adj_decomposition *dl_size_layout(adj_test *t, dl_layout_kind kind, int rank, const int64_t *shape,
                                  const int (*table)[5]) {
  int workers = kind == DL_LAYOUT_INACTIVE ? t->size - 1 : t->size, ranks[8], parts[5];
  if (workers < 1 || workers > 8 || rank > 5) return NULL;
  for (int i = 0; i < rank; i++) parts[i] = table[workers][i];
  for (int i = rank; i < 5; i++) parts[rank - 1] *= table[workers][i];
  for (int i = 0; i < workers; i++) ranks[i] = (i + 1) % t->size;
  int64_t storage[5][9];
  const int64_t *cuts[5] = {NULL};
  for (int i = 0; kind == DL_LAYOUT_CUTS && i < rank; i++) {
    dl_quadratic_cuts(shape[i], parts[i], storage[i]);
    cuts[i] = storage[i];
  }
  return dl_layout(t, rank, shape, parts, ranks, cuts);
}

adj_decomposition *dl_self_layout(adj_test *t, int rank, const int64_t *shape) {
  static const int ones[ADJ_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1};
  adj_partition *p = NULL;
  adj_decomposition *d = NULL;
  ADJ_TEST_OK(t, adj_partition_create(MPI_COMM_SELF, rank, ones, 1, NULL, &p));
  if (p) ADJ_TEST_OK(t, adj_decomposition_create(p, rank, shape, &d));
  adj_partition_destroy(&p);
  return d;
}

void dl_dottest(adj_test *t, const char *label, adj_layer *layer) {
  adj_dottest_result r = {0};
  int status = adj_dottest_layer(layer, 20261122u, &r);
  double tol = adj_dottest_tolerance(adj_layer_dtype(layer), 1);
  adj_test_report(t, "  %-52s dot test rel err %.2e  (|J v| %.3e, |J^T u| %.3e)", label, r.relative_error, r.norm_Fx,
                  r.norm_Fty);
  /* A zero Jacobian would pass trivially, so both sides must be non-zero. */
  ADJ_TEST_CHECK(t, status == 0 && r.relative_error < tol && r.norm_Fx > 0 && r.norm_Fty > 0,
                 "%s: dot test status %s (%s), <Jv,u> = %.17g, <v,J^T u> = %.17g, rel err %.3e", label,
                 adj_status_name(status), adj_last_error(), r.range_inner, r.domain_inner, r.relative_error);
}

/* ---- Taylor ------------------------------------------------------------------------------ */

enum { DL_TAYLOR_STEPS = 5 }; /* h0, h0/2, ..., h0/16 */

/* sqrt of the global output volume: the size |J v| has when entries are O(1). */
static double dl_output_scale(adj_layer *layer) {
  const adj_decomposition *out = adj_layer_output_layout(layer);
  adj_box whole = adj_box_whole(adj_decomposition_rank(out), adj_decomposition_global_shape(out));
  return sqrt((double)adj_box_volume(&whole));
}

void dl_taylor(adj_test *t, const char *label, adj_layer *layer, dl_taylor_kind kind) {
  /* Smooth maps need h large enough for the h^2 term to dominate round-off;
   * piecewise-linear ones need h small enough not to cross a kink. */
  double h0 = kind == DL_TAYLOR_SMOOTH ? 1e-2 : 1e-5;
  double rem[DL_TAYLOR_STEPS], orders[DL_TAYLOR_STEPS - 1];
  int status = adj_taylor_test_layer(layer, 7u, h0, DL_TAYLOR_STEPS, rem, orders);
  ADJ_TEST_CHECK(t, status == 0, "%s: Taylor test failed: %s", label, adj_last_error());
  if (status) return;
  char line[400];
  int used = snprintf(line, sizeof line, "  %-44s Taylor r(h)", label);
  for (int i = 0; i < DL_TAYLOR_STEPS; i++) used += snprintf(line + used, sizeof line - (size_t)used, " %.2e", rem[i]);
  if (kind == DL_TAYLOR_SMOOTH) {
    double lo = 99, hi = -99;
    for (int i = 0; i + 1 < DL_TAYLOR_STEPS; i++) lo = fmin(lo, orders[i]), hi = fmax(hi, orders[i]);
    adj_test_report(t, "%s  orders %.3f..%.3f", line, lo, hi);
    ADJ_TEST_CHECK(t, lo > 1.9 && hi < 2.1 && rem[0] > 0, "%s: Taylor orders %.3f..%.3f, not 2", label, lo, hi);
    return;
  }
  /* Linear (on the piece): the remainder is round-off, far below h |J v|; a
   * wrong jvp or a crossed kink leaves O(h) and fails by many decades.  The
   * round-off is a few roundings of each O(1) entry (sqrt(M) over the
   * output), not a long sum, so r(h) / (h sqrt(M)) stays below a multiple of
   * eps / h at the smallest h. */
  double worst = 0, h = h0, scale = dl_output_scale(layer);
  for (int i = 0; i < DL_TAYLOR_STEPS; i++, h /= 2) worst = fmax(worst, rem[i] / (h * scale));
  double tolerance = adj_test_sum_tolerance(adj_layer_dtype(layer), 1) / (h0 / 16);
  adj_test_report(t, "%s  max r(h)/(h sqrt(M)) %.1e", line, worst);
  ADJ_TEST_CHECK(t, worst < tolerance, "%s: remainder %.3e of h sqrt(M) on a linear piece (tolerance %.1e)", label,
                 worst, tolerance);
}

/* ---- distributed against sequential ----------------------------------------------------- */

/* The sequential twin runs on MPI_COMM_SELF on every rank, on global data that
 * every rank draws identically from the seed; each rank then compares its own
 * blocks of the distributed results with the same boxes of the sequential
 * ones.  Only the final figure is reduced, so the comparison adds no blocking
 * collective (slow on an oversubscribed machine, docs/design.md section 5). */

static adj_tensor dl_random(adj_rng *rng, adj_dtype dtype, const adj_decomposition *d) {
  adj_tensor x;
  adj_tensor_create(&x, dtype, adj_decomposition_rank(d), adj_decomposition_global_shape(d));
  adj_rng_fill_uniform(rng, &x, -1, 1);
  return x;
}

void dl_data_make(adj_layer *layer, uint64_t seed, dl_data *g) {
  adj_dtype dtype = adj_layer_dtype(layer);
  adj_rng *rng;
  adj_rng_create(seed, &rng);
  g->x = dl_random(rng, dtype, adj_layer_input_layout(layer));
  g->dx = dl_random(rng, dtype, adj_layer_input_layout(layer));
  g->dy = dl_random(rng, dtype, adj_layer_output_layout(layer));
  g->n_params = adj_layer_parameter_count(layer);
  for (int i = 0; i < g->n_params; i++) {
    g->params[i] = dl_random(rng, dtype, adj_layer_parameter(layer, i)->layout);
    g->tangents[i] = dl_random(rng, dtype, adj_layer_parameter(layer, i)->layout);
  }
  adj_rng_destroy(&rng);
}

void dl_data_free(dl_data *g) {
  adj_tensor_destroy(&g->x), adj_tensor_destroy(&g->dx), adj_tensor_destroy(&g->dy);
  for (int i = 0; i < g->n_params; i++) adj_tensor_destroy(&g->params[i]), adj_tensor_destroy(&g->tangents[i]);
}

/* local = this worker's block (under layout d) of the global tensor. */
void dl_take_block(const adj_decomposition *d, const adj_tensor *global, adj_tensor *local) {
  adj_box block = adj_decomposition_local_block(d);
  adj_tensor_pack(global, &block, local->data);
}

/* Loads the data (this worker's blocks of it), runs forward, jvp, backward. */
void dl_run(adj_test *t, adj_layer *layer, const dl_data *g, dl_results *r) {
  const adj_decomposition *in = adj_layer_input_layout(layer), *out = adj_layer_output_layout(layer);
  adj_tensor x, dx, dy;
  adj_layer_create_input(layer, &x), adj_layer_create_input(layer, &dx), adj_layer_create_input(layer, &r->dx);
  adj_layer_create_output(layer, &dy), adj_layer_create_output(layer, &r->y), adj_layer_create_output(layer, &r->jy);
  dl_take_block(in, &g->x, &x), dl_take_block(in, &g->dx, &dx), dl_take_block(out, &g->dy, &dy);
  for (int i = 0; i < g->n_params; i++) {
    adj_parameter *p = adj_layer_parameter(layer, i);
    dl_take_block(p->layout, &g->params[i], &p->value);
    dl_take_block(p->layout, &g->tangents[i], &p->tangent);
  }
  adj_layer_zero_grad(layer);
  ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &r->y));
  ADJ_TEST_OK(t, adj_layer_jvp(layer, &dx, &r->jy));
  ADJ_TEST_OK(t, adj_layer_backward(layer, &dy, &r->dx));
  adj_tensor_destroy(&x), adj_tensor_destroy(&dx), adj_tensor_destroy(&dy);
}

void dl_results_free(dl_results *r) {
  adj_tensor_destroy(&r->y), adj_tensor_destroy(&r->jy), adj_tensor_destroy(&r->dx);
}

/* max |local - block of global| / max(1, max |global|): the distributed block
 * against the same box of the whole sequential result. */
double dl_block_diff(const adj_decomposition *d, const adj_tensor *local, const adj_tensor *global) {
  adj_tensor block;
  adj_tensor_create(&block, local->dtype, local->rank, local->shape);
  dl_take_block(d, global, &block);
  double diff = 0, scale = 1;
  for (int64_t i = 0; i < adj_tensor_volume(&block); i++)
    diff = fmax(diff, fabs(adj_tensor_get(local, i) - adj_tensor_get(&block, i)));
  for (int64_t i = 0; i < adj_tensor_volume(global); i++) scale = fmax(scale, fabs(adj_tensor_get(global, i)));
  adj_tensor_destroy(&block);
  return diff / scale;
}

static bool dl_any(const adj_tensor *a) {
  for (int64_t i = 0; i < adj_tensor_volume(a); i++)
    if (adj_tensor_get(a, i) != 0) return true;
  return false;
}

/* Differences of output, jvp, input gradient and parameter gradients on this
 * rank; nonzero tells whether every sequential result is non-trivial. */
static void dl_differences(adj_layer *dist, adj_layer *seq, const dl_results *rd, const dl_results *rs,
                           double *diffs, bool *nonzero) {
  const adj_decomposition *in = adj_layer_input_layout(dist), *out = adj_layer_output_layout(dist);
  diffs[0] = dl_block_diff(out, &rd->y, &rs->y);
  diffs[1] = dl_block_diff(out, &rd->jy, &rs->jy);
  diffs[2] = dl_block_diff(in, &rd->dx, &rs->dx);
  diffs[3] = 0;
  *nonzero = dl_any(&rs->y) && dl_any(&rs->jy) && dl_any(&rs->dx);
  for (int i = 0; i < adj_layer_parameter_count(seq); i++) {
    adj_parameter *pd = adj_layer_parameter(dist, i), *ps = adj_layer_parameter(seq, i);
    diffs[3] = fmax(diffs[3], dl_block_diff(pd->layout, &pd->grad, &ps->grad));
    *nonzero = *nonzero && dl_any(&ps->grad);
  }
}

double dl_tolerance(const adj_layer *dist) {
  const adj_partition *in = adj_decomposition_partition(adj_layer_input_layout(dist));
  const adj_partition *out = adj_decomposition_partition(adj_layer_output_layout(dist));
  int workers = adj_partition_size(in) > adj_partition_size(out) ? adj_partition_size(in) : adj_partition_size(out);
  return adj_test_sum_tolerance(adj_layer_dtype(dist), workers);
}

void dl_compare(adj_test *t, const char *label, adj_layer *dist, adj_layer *seq, uint64_t seed) {
  dl_compare_within(t, label, dist, seq, seed, dl_tolerance(dist));
}

void dl_compare_within(adj_test *t, const char *label, adj_layer *dist, adj_layer *seq, uint64_t seed,
                       double tolerance) {
  int n_params = adj_layer_parameter_count(seq);
  ADJ_TEST_CHECK(t, n_params == adj_layer_parameter_count(dist), "%s: twins have %d and %d parameters", label,
                 adj_layer_parameter_count(dist), n_params);
  if (n_params != adj_layer_parameter_count(dist)) return;
  dl_data g = {0};
  dl_results rd = {0}, rs = {0};
  dl_data_make(seq, seed, &g);
  dl_run(t, dist, &g, &rd);
  dl_run(t, seq, &g, &rs);
  double diffs[4], worst[4];
  bool nonzero;
  dl_differences(dist, seq, &rd, &rs, diffs, &nonzero);
  MPI_Request request;
  MPI_Iallreduce(diffs, worst, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &request);
  adj_wait_all(1, &request, ADJ_WAIT_YIELD);
  adj_test_report(t, "  %-52s dist vs seq: y %.1e, jvp %.1e, dx %.1e, grads %.1e (tolerance %.1e)", label, worst[0],
                  worst[1], worst[2], worst[3], tolerance);
  ADJ_TEST_CHECK(t, fmax(fmax(worst[0], worst[1]), fmax(worst[2], worst[3])) <= tolerance,
                 "%s: distributed differs from sequential: y %.3e, jvp %.3e, dx %.3e, grads %.3e", label, worst[0],
                 worst[1], worst[2], worst[3]);
  /* Two layers that both produce zeros would agree without showing anything. */
  ADJ_TEST_CHECK(t, nonzero, "%s: a sequential result is identically zero", label);
  dl_results_free(&rd), dl_results_free(&rs);
  dl_data_free(&g);
}

void dl_expect_error(adj_test *t, const char *label, int status, adj_layer **layer, const char *phrase) {
  adj_test_expect_error(t, label, status, ADJ_TEST_ANY_ERROR, phrase);
  ADJ_TEST_CHECK(t, !*layer, "%s: a failed create left a layer behind", label);
  adj_layer_destroy(layer);
}

FILE *dl_open_reference(adj_test *t, const char *path) {
  FILE *f = fopen(path, "r");
  ADJ_TEST_CHECK(t, f != NULL, "cannot open %s", path);
  return f;
}

bool dl_read_reference(adj_test *t, FILE *f, int cases, dl_reference *r) {
  char first[8];
  while (fscanf(f, "%7s", first) == 1) {
    if (first[0] == '#') {
      int ch;
      while ((ch = fgetc(f)) != '\n' && ch != EOF) continue;
      continue;
    }
    long long ny = 0, ng = 0;
    bool ok = sscanf(first, "%d", &r->index) == 1 && r->index >= 0 && r->index < cases &&
              fscanf(f, "%lld", &ny) == 1 && ny > 0 && ny <= DL_REFERENCE_MAX;
    for (long long j = 0; ok && j < ny; j++) ok = fscanf(f, "%lf", &r->y[j]) == 1;
    ok = ok && fscanf(f, "%lld", &ng) == 1 && ng > 0 && ng <= DL_REFERENCE_MAX;
    for (long long i = 0; ok && i < ng; i++) ok = fscanf(f, "%lf", &r->grad[i]) == 1;
    ADJ_TEST_CHECK(t, ok, "bad reference line for case %s", first);
    r->ny = ny, r->ng = ng;
    return ok;
  }
  return false;
}

void dl_check_layouts(adj_test *t, const char *what, int rank, const int64_t *shape, const int (*table)[5],
                      dl_create_fn create, const void *spec, dl_taylor_kind taylor, uint64_t seed) {
  adj_decomposition *root = dl_self_layout(t, rank, shape);
  for (int kind = DL_LAYOUT_ALL; kind <= DL_LAYOUT_CUTS; kind++) {
    adj_decomposition *layout = dl_size_layout(t, (dl_layout_kind)kind, rank, shape, table);
    if (!layout) continue;
    for (int dt = ADJ_FLOAT64; dt >= ADJ_FLOAT32; dt--) {
      if (dt == ADJ_FLOAT32 && kind != DL_LAYOUT_CUTS) continue; /* float32 once per case */
      adj_layer *dist = NULL, *seq = NULL;
      ADJ_TEST_OK(t, create(spec, (adj_dtype)dt, layout, &dist));
      ADJ_TEST_OK(t, create(spec, (adj_dtype)dt, root, &seq));
      if (dist && seq) {
        char label[200], text[48];
        snprintf(label, sizeof label, "%s %s %s (%s)", what, adj_dtype_name((adj_dtype)dt),
                 adj_partition_format(adj_decomposition_partition(layout), text, sizeof text), dl_layout_names[kind]);
        dl_dottest(t, label, dist);
        if (kind == DL_LAYOUT_ALL) dl_taylor(t, label, dist, taylor);
        dl_compare(t, label, dist, seq, seed);
      }
      adj_layer_destroy(&dist), adj_layer_destroy(&seq);
    }
    adj_decomposition_destroy(&layout);
  }
  adj_decomposition_destroy(&root);
}

void dl_check_reference(adj_test *t, const char *label, adj_layer *layer, const dl_reference *r, double tolerance,
                        double *worst) {
  adj_tensor x, y, dy, dx;
  adj_layer_create_input(layer, &x), adj_layer_create_input(layer, &dx);
  adj_layer_create_output(layer, &y), adj_layer_create_output(layer, &dy);
  bool sized = adj_tensor_volume(&y) == r->ny && adj_tensor_volume(&x) == r->ng;
  ADJ_TEST_CHECK(t, sized, "%s: %lld outputs and %lld inputs; PyTorch has %lld and %lld", label,
                 (long long)adj_tensor_volume(&y), (long long)adj_tensor_volume(&x), (long long)r->ny, (long long)r->ng);
  if (sized) {
    for (int64_t i = 0; i < r->ng; i++) adj_tensor_set(&x, i, (double)((7 * i + 3) % 13) / 13.0);
    for (int64_t j = 0; j < r->ny; j++) adj_tensor_set(&dy, j, (double)((5 * j + 1) % 11) / 11.0 - 0.5);
    ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &y));
    ADJ_TEST_OK(t, adj_layer_backward(layer, &dy, &dx));
    double ey = 0, eg = 0;
    for (int64_t j = 0; j < r->ny; j++) ey = fmax(ey, fabs(adj_tensor_get(&y, j) - r->y[j]));
    for (int64_t i = 0; i < r->ng; i++)
      eg = fmax(eg, fabs(adj_tensor_get(&dx, i) - r->grad[i]) / fmax(1, fabs(r->grad[i])));
    ADJ_TEST_CHECK(t, ey < tolerance && eg < tolerance, "%s: against PyTorch y %.3e, grad %.3e", label, ey, eg);
    *worst = fmax(*worst, fmax(ey, eg));
  }
  adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&dy), adj_tensor_destroy(&dx);
}

void dl_check_torch(adj_test *t, const char *path, const dl_torch_table *table) {
  FILE *f = dl_open_reference(t, path);
  if (!f) return;
  static dl_reference r;
  int cases = 0;
  double worst[2] = {0, 0};
  while (dl_read_reference(t, f, table->count, &r)) {
    for (int dt = 0; dt < 2; dt++) {
      int rank;
      const int64_t *shape;
      char what[96], label[112];
      const void *spec = table->case_at(r.index, &rank, &shape, what);
      snprintf(label, sizeof label, "%s %s", what, adj_dtype_name((adj_dtype)dt));
      adj_decomposition *root = dl_self_layout(t, rank, shape);
      adj_layer *layer = NULL;
      ADJ_TEST_OK(t, table->create(spec, (adj_dtype)dt, root, &layer));
      if (layer) dl_check_reference(t, label, layer, &r, adj_test_random_sum_tolerance((adj_dtype)dt, table->reduction_length),
                                       &worst[dt]);
      adj_layer_destroy(&layer);
      adj_decomposition_destroy(&root);
    }
    cases++;
  }
  fclose(f);
  adj_test_report(t, "  against PyTorch: %d %s, max error float32 %.1e, float64 %.1e", cases, table->noun, worst[0],
                  worst[1]);
  ADJ_TEST_CHECK(t, cases == table->count, "%d reference cases, expected %d", cases, table->count);
}

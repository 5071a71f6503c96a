/* t327: the losses of loss_layers.h (L1, MSE, BCE, BCE with logits, KL divergence
 * with and without a log target, Poisson NLL with log, linear and full
 * forms, NLL) and their reductions (mean, sum, none, batchmean):
 *   - against PyTorch on fixed inputs (tools/pytorch/losses_twin.py wrote
 *     data/t327-losses-torch.txt): value and input gradient, both dtypes;
 *   - distributed against sequential on layouts with unequal and empty
 *     blocks and inactive ranks: the global value on EVERY rank, the output,
 *     jvp and input gradient (float64, within a P-term sum's tolerance);
 *   - the Jacobian dot-product test and the Taylor test at points inside each
 *     loss's domain (the battery covers random points for the others);
 *   - bad input: BCE targets outside [0, 1] and inputs outside [0, 1],
 *     negative Poisson targets, labels out of range, batchmean for a loss
 *     other than KL, NLL 'none' with the classes split: the same error on
 *     every rank, naming the value. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dist_check.h"

enum { N = 7, C = 5 };

typedef struct loss_spec {
  const char *name; /* as in the PyTorch file */
  adj_loss_kind kind;
  bool log_target, linear, full;
} loss_spec;

static const loss_spec specs[] = {
    {"l1", ADJ_LOSS_L1, false, false, false},
    {"mse", ADJ_LOSS_MSE, false, false, false},
    {"bce", ADJ_LOSS_BCE, false, false, false},
    {"bce_with_logits", ADJ_LOSS_BCE_WITH_LOGITS, false, false, false},
    {"kl_div", ADJ_LOSS_KL_DIV, false, false, false},
    {"kl_div_log", ADJ_LOSS_KL_DIV, true, false, false},
    {"poisson_nll", ADJ_LOSS_POISSON_NLL, false, false, false},
    {"poisson_nll_full", ADJ_LOSS_POISSON_NLL, false, false, true},
    {"poisson_nll_linear", ADJ_LOSS_POISSON_NLL, false, true, false},
    {"nll", ADJ_LOSS_NLL, false, false, false},
};
enum { N_SPECS = (int)(sizeof specs / sizeof specs[0]) };
static const char *const reduction_names[] = {"mean", "sum", "none", "batchmean"};

/* The fixed inputs of tools/pytorch/losses_twin.py, by flat global index. */
static double fa(int64_t i) { return (double)((i * 7 + 3) % 13) / 13.0; }
static double fb(int64_t i) { return (double)((i * 5 + 1) % 11) / 11.0; }

static double input_at(const loss_spec *s, int64_t i) {
  switch (s->kind) {
  case ADJ_LOSS_L1:
  case ADJ_LOSS_MSE: return 4 * fa(i) - 2;
  case ADJ_LOSS_BCE: return 0.05 + 0.9 * fa(i);
  case ADJ_LOSS_BCE_WITH_LOGITS: return 8 * fa(i) - 4;
  case ADJ_LOSS_KL_DIV: return -3 * fa(i) - 0.1;
  case ADJ_LOSS_POISSON_NLL: return s->linear ? 0.1 + 3 * fa(i) : 2 * fa(i) - 1;
  default: return -3 * fa(i);
  }
}

static double target_at(const loss_spec *s, int64_t i) {
  switch (s->kind) {
  case ADJ_LOSS_L1:
  case ADJ_LOSS_MSE: return 4 * fb(i) - 2;
  case ADJ_LOSS_KL_DIV: return s->log_target ? -3 * fb(i) : fb(i);
  case ADJ_LOSS_POISSON_NLL: return floor(5 * fb(i));
  default: return fb(i);
  }
}

static int64_t label_at(int64_t row, int64_t classes) { return (2 * row + 1) % classes; }

static bool valid(const loss_spec *s, int red) {
  return red != ADJ_LOSS_BATCHMEAN || s->kind == ADJ_LOSS_KL_DIV;
}

static int loss_create(const loss_spec *s, int red, adj_dtype dtype, const adj_decomposition *input, int root,
                       adj_layer **layer) {
  return adj_loss_layer_create(&(adj_loss_layer_config){.dtype = dtype, .kind = s->kind,
                                                  .reduction = (adj_loss_reduction)red, .input = input,
                                                  .root = root, .log_target = s->log_target,
                                                  .poisson_linear_input = s->linear, .poisson_full = s->full},
                               layer);
}

/* Fills this worker's block of the global fixed input (x) and sets its target
 * or labels.  Collective (setting targets is). */
static int load_point(const loss_spec *s, adj_layer *layer, adj_tensor *x) {
  const adj_decomposition *d = adj_layer_input_layout(layer);
  adj_box block = adj_decomposition_local_block(d);
  const int64_t *global = adj_decomposition_global_shape(d);
  adj_tensor t;
  adj_layer_create_input(layer, x);
  adj_layer_create_input(layer, &t);
  int64_t labels[16] = {0};
  for (int64_t r = 0; r < block.extent[0]; r++) {
    labels[r] = label_at(block.start[0] + r, global[1]);
    for (int64_t c = 0; c < block.extent[1]; c++) {
      int64_t g = (block.start[0] + r) * global[1] + block.start[1] + c, e = r * block.extent[1] + c;
      adj_tensor_set(x, e, input_at(s, g));
      adj_tensor_set(&t, e, target_at(s, g));
    }
  }
  int status = s->kind == ADJ_LOSS_NLL ? adj_loss_layer_set_labels(layer, labels, block.extent[0])
                                       : adj_loss_layer_set_target(layer, &t);
  adj_tensor_destroy(&t);
  return status;
}

/* ---- PyTorch's numbers ------------------------------------------------------------------ */

static const loss_spec *spec_named(const char *name) {
  for (int k = 0; k < N_SPECS; k++)
    if (!strcmp(specs[k].name, name)) return &specs[k];
  return NULL;
}

static int reduction_named(const char *name) {
  for (int r = 0; r < 4; r++)
    if (!strcmp(reduction_names[r], name)) return r;
  return -1;
}

/* One line of the file: the sequential layer (3, 4) against PyTorch's value
 * and gradient (dy = 1 everywhere). */
static void check_torch_line(adj_test *t, adj_decomposition *root, const char *name, int red, double value,
                             const double *grad, adj_dtype dtype, double *worst) {
  const loss_spec *s = spec_named(name);
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, loss_create(s, red, dtype, root, 0, &layer));
  if (!layer) return;
  adj_tensor x, y, dy, dx;
  ADJ_TEST_OK(t, load_point(s, layer, &x));
  adj_layer_create_output(layer, &y), adj_layer_create_output(layer, &dy), adj_layer_create_input(layer, &dx);
  for (int64_t i = 0; i < adj_tensor_volume(&dy); i++) adj_tensor_set(&dy, i, 1);
  ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &y));
  ADJ_TEST_OK(t, adj_layer_backward(layer, &dy, &dx));
  double sum = 0, err_g = 0;
  for (int64_t i = 0; i < adj_tensor_volume(&y); i++) sum += adj_tensor_get(&y, i);
  for (int64_t i = 0; i < 12; i++) err_g = fmax(err_g, fabs(adj_tensor_get(&dx, i) - grad[i]) / fmax(1, fabs(grad[i])));
  double err_v = fabs(sum - value) / fmax(1, fabs(value));
  /* The value sums every entry's loss (the twin's inputs are 12 entries). */
  double tol = adj_test_sum_tolerance(dtype, (double)adj_tensor_volume(&x));
  ADJ_TEST_CHECK(t, err_v < tol && err_g < tol, "%s %s %s: against PyTorch value %.3e (%.17g vs %.17g), grad %.3e",
                 name, reduction_names[red], adj_dtype_name(dtype), err_v, sum, value, err_g);
  worst[dtype] = fmax(worst[dtype], fmax(err_v, err_g));
  adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&dy), adj_tensor_destroy(&dx);
  adj_layer_destroy(&layer);
}

static void test_torch(adj_test *t, const char *path) {
  FILE *f = dl_open_reference(t, path);
  if (!f) return;
  adj_decomposition *root = dl_self_layout(t, 2, (const int64_t[2]){3, 4});
  char line[2048];
  int lines = 0;
  double worst[2] = {0, 0};
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    char name[32], red[16];
    double value, grad[12];
    int used = 0, k = 0;
    if (sscanf(line, "%31s %15s %lf%n", name, red, &value, &used) != 3) continue;
    for (char *p = line + used; k < 12 && sscanf(p, "%lf%n", &grad[k], &used) == 1; p += used) k++;
    int r = reduction_named(red);
    ADJ_TEST_CHECK(t, k == 12 && r >= 0 && spec_named(name), "bad reference line: %s", line);
    if (k != 12 || r < 0 || !spec_named(name)) continue;
    for (int dt = 0; dt < 2; dt++) check_torch_line(t, root, name, r, value, grad, (adj_dtype)dt, worst);
    lines++;
  }
  fclose(f);
  adj_test_report(t, "  against PyTorch: %d loss/reduction pairs, max rel err float32 %.1e, float64 %.1e", lines,
                  worst[0], worst[1]);
  ADJ_TEST_CHECK(t, lines == 32, "%d reference lines, expected 32", lines);
  adj_decomposition_destroy(&root);
}

/* ---- distributed against sequential ------------------------------------------------------ */

/* Partitions of (N, C) per worker count. */
static const int parts_by_size[9][2] = {{1, 1}, {1, 1}, {1, 2}, {3, 1}, {2, 2}, {5, 1}, {3, 2}, {7, 1}, {4, 2}};

typedef enum layout_kind { LAYOUT_CUTS = 0, LAYOUT_INACTIVE = 1 } layout_kind;

static adj_decomposition *loss_layout(adj_test *t, layout_kind kind) {
  int workers = kind == LAYOUT_INACTIVE ? t->size - 1 : t->size, ranks[8];
  if (workers < 1) return NULL;
  const int *parts = parts_by_size[workers];
  for (int i = 0; i < workers; i++) ranks[i] = (i + 1) % t->size;
  int64_t storage[2][9];
  const int64_t *cuts[2] = {NULL, NULL};
  const int64_t shape[2] = {N, C};
  for (int i = 0; kind == LAYOUT_CUTS && i < 2; i++) {
    dl_quadratic_cuts(shape[i], parts[i], storage[i]);
    cuts[i] = storage[i];
  }
  return dl_layout(t, 2, shape, parts, ranks, cuts);
}

/* A perturbation or output gradient by global index, O(1). */
static double wiggle(int64_t i) { return (double)((i * 3 + 2) % 7) / 7.0 - 0.4; }

static void fill_wiggle(const adj_decomposition *d, adj_tensor *v) {
  adj_box block = adj_decomposition_local_block(d);
  const int64_t *global = adj_decomposition_global_shape(d);
  int64_t cols = adj_decomposition_rank(d) > 1 ? global[1] : 1, bc = block.rank > 1 ? block.extent[1] : 1;
  for (int64_t e = 0; e < adj_tensor_volume(v); e++) {
    int64_t r = e / bc, c = e % bc;
    adj_tensor_set(v, e, wiggle((block.start[0] + r) * cols + (block.rank > 1 ? block.start[1] : 0) + c));
  }
}

typedef struct loss_run {
  adj_tensor x, y, dx, jy, dy, gx;
  double value;
} loss_run;

static void run_layer(adj_test *t, const loss_spec *s, adj_layer *layer, loss_run *r) {
  ADJ_TEST_OK(t, load_point(s, layer, &r->x));
  adj_layer_create_output(layer, &r->y), adj_layer_create_output(layer, &r->jy);
  adj_layer_create_output(layer, &r->dy);
  adj_layer_create_input(layer, &r->dx), adj_layer_create_input(layer, &r->gx);
  fill_wiggle(adj_layer_input_layout(layer), &r->dx);
  fill_wiggle(adj_layer_output_layout(layer), &r->dy);
  ADJ_TEST_OK(t, adj_layer_forward(layer, &r->x, &r->y));
  r->value = adj_loss_layer_value(layer);
  ADJ_TEST_OK(t, adj_layer_jvp(layer, &r->dx, &r->jy));
  ADJ_TEST_OK(t, adj_layer_backward(layer, &r->dy, &r->gx));
}

static void free_run(loss_run *r) {
  adj_tensor_destroy(&r->x), adj_tensor_destroy(&r->y), adj_tensor_destroy(&r->dx);
  adj_tensor_destroy(&r->jy), adj_tensor_destroy(&r->dy), adj_tensor_destroy(&r->gx);
}

/* max |local - same box of the sequential whole| / max(1, |whole|). */
static double block_diff(const adj_decomposition *d, const adj_tensor *local, const adj_tensor *whole) {
  adj_box block = adj_decomposition_local_block(d);
  adj_tensor part;
  adj_tensor_create(&part, local->dtype, local->rank, local->shape);
  adj_tensor_pack(whole, &block, part.data);
  double diff = 0, scale = 1;
  for (int64_t i = 0; i < adj_tensor_volume(local); i++)
    diff = fmax(diff, fabs(adj_tensor_get(local, i) - adj_tensor_get(&part, i)));
  for (int64_t i = 0; i < adj_tensor_volume(whole); i++) scale = fmax(scale, fabs(adj_tensor_get(whole, i)));
  adj_tensor_destroy(&part);
  return diff / scale;
}

static void compare_loss(adj_test *t, const loss_spec *s, int red, adj_decomposition *layout, adj_decomposition *root,
                         const char *where, double *worst) {
  adj_layer *dist = NULL, *seq = NULL;
  int root_rank = t->size - 1;
  ADJ_TEST_OK(t, loss_create(s, red, ADJ_FLOAT64, layout, root_rank, &dist));
  ADJ_TEST_OK(t, loss_create(s, red, ADJ_FLOAT64, root, 0, &seq));
  if (!dist || !seq) {
    adj_layer_destroy(&dist), adj_layer_destroy(&seq);
    return;
  }
  loss_run rd = {0}, rs = {0};
  run_layer(t, s, dist, &rd);
  run_layer(t, s, seq, &rs);
  const adj_decomposition *out = adj_layer_output_layout(dist), *in = adj_layer_input_layout(dist);
  double d[4] = {fabs(rd.value - rs.value) / fmax(1, fabs(rs.value)), block_diff(out, &rd.y, &rs.y),
                 block_diff(out, &rd.jy, &rs.jy), block_diff(in, &rd.gx, &rs.gx)};
  /* The sequential twin is the reference for every rank's global value. */
  for (int i = 0; i < 4; i++) worst[i] = fmax(worst[i], d[i]);
  bool reduced = red != ADJ_LOSS_NONE;
  /* The entries are pointwise; the value adds the workers' partial sums. */
  double tol = adj_test_sum_tolerance(ADJ_FLOAT64, t->size);
  ADJ_TEST_CHECK(t, fmax(fmax(d[0], d[1]), fmax(d[2], d[3])) <= tol && (!reduced || rs.value != 0),
                 "%s %s %s: distributed differs: value %.3e (%.17g vs %.17g), y %.3e, jvp %.3e, dx %.3e", s->name,
                 reduction_names[red], where, d[0], rd.value, rs.value, d[1], d[2], d[3]);
  free_run(&rd), free_run(&rs);
  adj_layer_destroy(&dist), adj_layer_destroy(&seq);
}

static void test_distributed(adj_test *t) {
  adj_decomposition *root = dl_self_layout(t, 2, (const int64_t[2]){N, C});
  for (int k = LAYOUT_CUTS; k <= LAYOUT_INACTIVE; k++) {
    adj_decomposition *layout = loss_layout(t, (layout_kind)k);
    if (!layout) continue;
    char where[96], text[48];
    snprintf(where, sizeof where, "[%d,%d] on %s (%s)", N, C,
             adj_partition_format(adj_decomposition_partition(layout), text, sizeof text),
             k == LAYOUT_CUTS ? "uneven cuts" : "rank 0 inactive");
    double worst[4] = {0, 0, 0, 0};
    int cases = 0;
    bool classes_split = adj_partition_shape(adj_decomposition_partition(layout))[1] > 1;
    for (int i = 0; i < N_SPECS; i++)
      for (int red = 0; red < 4; red++) {
        if (!valid(&specs[i], red) || (specs[i].kind == ADJ_LOSS_NLL && red == ADJ_LOSS_NONE && classes_split))
          continue;
        compare_loss(t, &specs[i], red, layout, root, where, worst);
        cases++;
      }
    double all[4];
    MPI_Allreduce(worst, all, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    adj_test_report(t, "  %-44s %d losses x reductions: value on every rank %.1e, y %.1e, jvp %.1e, dx %.1e", where,
                    cases, all[0], all[1], all[2], all[3]);
    adj_decomposition_destroy(&layout);
  }
  adj_decomposition_destroy(&root);
}

/* ---- Jacobian checks at points in each loss's domain ------------------------------------ */

typedef struct loss_map {
  adj_layer *layer;
} loss_map;

static int map_forward(void *ctx, const adj_tensor *x, adj_tensor *y) {
  return adj_layer_jvp(((loss_map *)ctx)->layer, &x[0], &y[0]);
}

static int map_adjoint(void *ctx, const adj_tensor *y, adj_tensor *x) {
  return adj_layer_backward(((loss_map *)ctx)->layer, &y[0], &x[0]);
}

/* Dot test of the Jacobian at the fixed point, then the Taylor test of the
 * global value along a fixed direction (reduced losses). */
static void jacobian_checks(adj_test *t, const loss_spec *s, int red, adj_decomposition *layout, const char *where) {
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, loss_create(s, red, ADJ_FLOAT64, layout, 0, &layer));
  if (!layer) return;
  adj_tensor x, y, xh, v, jv, domain, range;
  ADJ_TEST_OK(t, load_point(s, layer, &x));
  adj_layer_create_output(layer, &y), adj_layer_create_output(layer, &jv);
  adj_layer_create_input(layer, &xh), adj_layer_create_input(layer, &v);
  fill_wiggle(adj_layer_input_layout(layer), &v);
  ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &y));
  domain = x, range = y;
  loss_map map = {layer};
  adj_dottest_problem p = {.comm = adj_layer_comm(layer), .n_domain = 1, .domain = &domain, .n_range = 1,
                           .range = &range, .forward = map_forward, .adjoint = map_adjoint, .ctx = &map};
  char label[160];
  snprintf(label, sizeof label, "%s %s %s", s->name, reduction_names[red], where);
  adj_dottest_result r = {0};
  int status = adj_dottest_run(&p, 61u, &r);
  adj_test_report(t, "  %-60s dot test rel err %.2e", label, r.relative_error);
  ADJ_TEST_CHECK(t, status == 0 && r.relative_error < adj_dottest_tolerance(ADJ_FLOAT64, 1) && r.norm_Fx > 0 &&
                        r.norm_Fty > 0,
                 "%s: dot test %s, rel err %.3e", label, adj_last_error(), r.relative_error);
  if (red != ADJ_LOSS_NONE) {
    /* The step keeps BCE's and the linear Poisson's inputs inside (0, 1) and
     * (0, inf): the direction is at most 0.6 and the inputs are >= 0.05. */
    double f0 = adj_loss_layer_value(layer), rem[4], h = 0.04;
    ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &y));
    ADJ_TEST_OK(t, adj_layer_jvp(layer, &v, &jv));
    double slope = adj_tensor_volume(&jv) ? adj_tensor_get(&jv, 0) : 0, total = 0;
    MPI_Allreduce(&slope, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int k = 0; k < 4; k++, h /= 2) {
      for (int64_t i = 0; i < adj_tensor_volume(&x); i++)
        adj_tensor_set(&xh, i, adj_tensor_get(&x, i) + h * adj_tensor_get(&v, i));
      ADJ_TEST_OK(t, adj_layer_forward(layer, &xh, &y));
      rem[k] = fabs(adj_loss_layer_value(layer) - f0 - h * total);
    }
    bool linear = s->kind == ADJ_LOSS_NLL || s->kind == ADJ_LOSS_L1 || (s->kind == ADJ_LOSS_KL_DIV);
    double order = log2(rem[2] / rem[3]);
    adj_test_report(t, "  %-60s Taylor r(h) %.2e %.2e %.2e %.2e%s%.3f", label, rem[0], rem[1], rem[2], rem[3],
                    linear ? "  (linear in x) " : "  order ", linear ? rem[3] : order);
    /* L1 (away from its kinks), KL and NLL are linear in x: round-off only,
     * that of a value summed over every entry. */
    const adj_decomposition *in = adj_layer_input_layout(layer);
    adj_box whole = adj_box_whole(adj_decomposition_rank(in), adj_decomposition_global_shape(in));
    double roundoff = adj_test_sum_tolerance(ADJ_FLOAT64, (double)adj_box_volume(&whole)) * fmax(1, fabs(f0));
    ADJ_TEST_CHECK(t, linear ? rem[0] < roundoff : (order > 1.8 && order < 2.2), "%s: Taylor remainders %.3e..%.3e",
                   label, rem[0], rem[3]);
  }
  adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&xh), adj_tensor_destroy(&v);
  adj_tensor_destroy(&jv);
  adj_layer_destroy(&layer);
}

static void test_jacobians(adj_test *t) {
  adj_decomposition *layout = loss_layout(t, LAYOUT_CUTS);
  char where[64], text[48];
  snprintf(where, sizeof where, "on %s", adj_partition_format(adj_decomposition_partition(layout), text, sizeof text));
  for (int i = 0; i < N_SPECS; i++) {
    jacobian_checks(t, &specs[i], ADJ_LOSS_MEAN, layout, where);
    if (specs[i].kind == ADJ_LOSS_BCE || specs[i].linear) jacobian_checks(t, &specs[i], ADJ_LOSS_NONE, layout, where);
  }
  adj_decomposition_destroy(&layout);
}

/* ---- errors ----------------------------------------------------------------------------- */

/* The last rank's first target element is `bad`; every rank must fail. */
static void expect_bad_target(adj_test *t, const loss_spec *s, adj_decomposition *layout, double bad,
                              const char *phrase) {
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, loss_create(s, ADJ_LOSS_MEAN, ADJ_FLOAT64, layout, 0, &layer));
  if (!layer) return;
  adj_tensor target;
  adj_layer_create_input(layer, &target);
  for (int64_t i = 0; i < adj_tensor_volume(&target); i++) adj_tensor_set(&target, i, 0.5);
  if (t->rank == t->size - 1 && adj_tensor_volume(&target)) adj_tensor_set(&target, 0, bad);
  int status = adj_loss_layer_set_target(layer, &target);
  const char *message = adj_last_error();
  adj_test_report(t, "  bad target %-30s -> %s: %s", s->name, adj_status_name(status), message);
  ADJ_TEST_CHECK(t, status != 0 && strstr(message, phrase), "%s: expected \"%s\", got %s", s->name, phrase, message);
  adj_tensor_destroy(&target);
  adj_layer_destroy(&layer);
}

static void test_errors(adj_test *t) {
  /* All ranks hold a block (so the last one has a bad value to show). */
  adj_decomposition *layout = dl_layout(t, 2, (const int64_t[2]){2 * t->size, 3}, (const int[2]){t->size, 1}, NULL,
                                        NULL);
  expect_bad_target(t, &specs[2], layout, 1.5, "target 1.5 (local element 0) is outside [0, 1]");
  expect_bad_target(t, &specs[3], layout, -0.25, "target -0.25 (local element 0) is outside [0, 1]");
  expect_bad_target(t, &specs[6], layout, -2, "target -2 (local element 0) is outside [0, inf) (counts)");
  expect_bad_target(t, &specs[4], layout, -0.5, "target -0.5 (local element 0) is outside [0, inf)");
  /* BCE input outside [0, 1] on the last rank: the forward fails everywhere. */
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, loss_create(&specs[2], ADJ_LOSS_SUM, ADJ_FLOAT64, layout, 0, &layer));
  if (layer) {
    adj_tensor x, y;
    adj_layer_create_input(layer, &x), adj_layer_create_output(layer, &y);
    for (int64_t i = 0; i < adj_tensor_volume(&x); i++) adj_tensor_set(&x, i, 0.5);
    if (t->rank == t->size - 1) adj_tensor_set(&x, 1, 1.25);
    int status = adj_layer_forward(layer, &x, &y);
    adj_test_report(t, "  BCE input 1.25 -> %s: %s", adj_status_name(status), adj_last_error());
    ADJ_TEST_CHECK(t, status != 0 && strstr(adj_last_error(), "input 1.25 (local element 1) is outside [0, 1]"),
                   "BCE input: %s", adj_last_error());
    adj_tensor_destroy(&x), adj_tensor_destroy(&y);
    adj_layer_destroy(&layer);
  }
  /* NLL labels out of range. */
  ADJ_TEST_OK(t, loss_create(&specs[9], ADJ_LOSS_MEAN, ADJ_FLOAT64, layout, 0, &layer));
  if (layer) {
    int64_t labels[2] = {1, t->rank == t->size - 1 ? 3 : 0};
    int status = adj_loss_layer_set_labels(layer, labels, 2);
    adj_test_report(t, "  NLL label 3 of 3 classes -> %s: %s", adj_status_name(status), adj_last_error());
    ADJ_TEST_CHECK(t, status != 0 && strstr(adj_last_error(), "label 3 of local sample 1 is outside [0, 3)"),
                   "NLL label: %s", adj_last_error());
    adj_layer_destroy(&layer);
  }
  int status = loss_create(&specs[1], ADJ_LOSS_BATCHMEAN, ADJ_FLOAT64, layout, 0, &layer);
  dl_expect_error(t, "mse batchmean", status, &layer, "batchmean is for KL divergence only, not mse");
  status = loss_create(&specs[1], ADJ_LOSS_MEAN, ADJ_FLOAT64, layout, t->size, &layer);
  dl_expect_error(t, "root outside", status, &layer, "is outside the communicator");
  adj_decomposition_destroy(&layout);
  if (t->size >= 2) {
    adj_decomposition *split = dl_layout(t, 2, (const int64_t[2]){4, 6}, (const int[2]){1, 2}, NULL, NULL);
    status = loss_create(&specs[9], ADJ_LOSS_NONE, ADJ_FLOAT64, split, 0, &layer);
    dl_expect_error(t, "nll none, classes split", status, &layer, "classes must not be split");
    adj_decomposition_destroy(&split);
  }
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t327-losses");
  if (t.size > 8) return adj_test_skip(&t, "the partitions are written for 1 to 8 ranks");
  if (argc < 2) return adj_test_skip(&t, "usage: t327-losses PYTORCH_REFERENCE_FILE");
  adj_test_report(&t, "t327 on %d ranks", t.size);
  test_torch(&t, argv[1]);
  test_distributed(&t);
  test_jacobians(&t);
  test_errors(&t);
  return adj_test_finish(&t);
}

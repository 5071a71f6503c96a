/* Pooling and convolution applied to the exchanged, trimmed local blocks, with
 * the geometry's local padding, reproduce the sequential result exactly: max
 * pooling (one-sided, strided, padded) and single-filter convolution (centred,
 * padded, dilated, strided) on 1-D, 2-D and NCHW tensors, with balanced and
 * explicit input cuts.  The kernels are small local references written here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "halo_common.h"

typedef enum { KERNEL_MAX_POOL, KERNEL_CONV } kernel_kind;

typedef struct kernel_case {
  halo_case layout;
  kernel_kind kind;
} kernel_case;

static const int64_t pool_cuts[] = {0, 6, 6, 13, 20}, conv_cuts[] = {0, 9, 11};

static const kernel_case kernel_cases[] = {
    {{"one worker max-pool 3x2 s=2 pad 1:0",
      2,
      {7, 9},
      {1, 1},
      {.size = {3, 2}, .stride = {2, 2}, .padding = {{1, 0}, {0, 1}}},
      {0}},
     KERNEL_MAX_POOL},
    {{"B5 max-pool k=2 s=2", 1, {20}, {6}, {.size = {2}, .stride = {2}}, {0}}, KERNEL_MAX_POOL},
    {{"B4 max-pool k=2 s=2", 1, {10}, {3}, {.size = {2}, .stride = {2}}, {0}}, KERNEL_MAX_POOL},
    {{"max-pool k=3 s=2 pad 1, cuts", 1, {20}, {4}, {.size = {3}, .stride = {2}, .padding = {{1, 1}}}, {pool_cuts}},
     KERNEL_MAX_POOL},
    {{"NCHW max-pool 2x2 s=2", 4, {2, 3, 13, 11}, {1, 1, 2, 2}, {.size = {1, 1, 2, 2}, .stride = {1, 1, 2, 2}}, {0}},
     KERNEL_MAX_POOL},
    {{"NCHW max-pool 3x3 s=2 pad 1",
      4,
      {1, 2, 15, 9},
      {1, 1, 3, 2},
      {.size = {1, 1, 3, 3}, .stride = {1, 1, 2, 2}, .padding = {{0, 0}, {0, 0}, {1, 1}, {1, 1}}},
      {0}},
     KERNEL_MAX_POOL},
    {{"B2 conv k=5 pad 2", 1, {11}, {3}, {.size = {5}, .padding = {{2, 2}}}, {0}}, KERNEL_CONV},
    {{"B3 conv k=5", 1, {11}, {3}, {.size = {5}}, {0}}, KERNEL_CONV},
    {{"conv k=3 d=2 pad 1:3", 1, {17}, {5}, {.size = {3}, .dilation = {2}, .padding = {{1, 3}}}, {0}}, KERNEL_CONV},
    {{"conv k=3 pad 1, cuts 0:9:11", 1, {11}, {2}, {.size = {3}, .padding = {{1, 1}}}, {conv_cuts}}, KERNEL_CONV},
    {{"2-D conv 5x3 pad 2,1", 2, {14, 10}, {2, 3}, {.size = {5, 3}, .padding = {{2, 2}, {1, 1}}}, {0}}, KERNEL_CONV},
    {{"NCHW conv 4x3 s=2 d=1,2 pad 1:2",
      4,
      {2, 2, 12, 13},
      {1, 1, 2, 2},
      {.size = {1, 1, 4, 3},
       .stride = {1, 1, 2, 1},
       .dilation = {1, 1, 1, 2},
       .padding = {{0, 0}, {0, 0}, {1, 2}, {2, 0}}},
      {0}},
     KERNEL_CONV},
    {{"NCHW conv 3x3 pad 1 on 7",
      4,
      {1, 1, 9, 16},
      {1, 1, 1, 7},
      {.size = {1, 1, 3, 3}, .padding = {{0, 0}, {0, 0}, {1, 1}, {1, 1}}},
      {0}},
     KERNEL_CONV},
};

/* A window over one tensor: kernel geometry plus padding, row-major extents. */
typedef struct window {
  int rank;
  int64_t in[ADJ_MAX_RANK], out[ADJ_MAX_RANK], pad[ADJ_MAX_RANK];
  const adj_halo_kernel *k;
} window;

static int64_t volume(int rank, const int64_t *shape) {
  int64_t v = 1;
  for (int i = 0; i < rank; i++) v *= shape[i];
  return v;
}

/* Deterministic integers in [-50, 50]: conv sums stay exact and max pooling
 * has no ordering to exploit. */
static double input_value(int64_t flat) { return (double)((flat * 2654435761u) % 101) - 50.0; }
static double weight_value(int64_t j) { return (double)(j % 7) - 3.0; }

/* One output entry: the window's entries, padding being 0 (conv) or -inf (max). */
static double window_apply(const window *w, kernel_kind kind, const double *x, const int64_t *o) {
  int64_t taps = volume(w->rank, w->k->size), j[ADJ_MAX_RANK];
  double acc = kind == KERNEL_MAX_POOL ? -INFINITY : 0.0;
  for (int64_t tap = 0; tap < taps; tap++) {
    int64_t rest = tap, flat = 0;
    bool inside = true;
    for (int d = w->rank - 1; d >= 0; d--) {
      j[d] = rest % w->k->size[d];
      rest /= w->k->size[d];
    }
    for (int d = 0; d < w->rank; d++) {
      int64_t at = o[d] * w->k->stride[d] - w->pad[d] + j[d] * w->k->dilation[d];
      inside = inside && at >= 0 && at < w->in[d];
      flat = flat * w->in[d] + at;
    }
    double v = inside ? x[flat] : (kind == KERNEL_MAX_POOL ? -INFINITY : 0.0);
    acc = kind == KERNEL_MAX_POOL ? fmax(acc, v) : acc + weight_value(tap) * v;
  }
  return acc;
}

/* Output extents of a window over `in` with left padding pad and right padding right. */
static void window_shape(window *w, const int64_t (*padding)[2]) {
  for (int d = 0; d < w->rank; d++) {
    int64_t span = w->k->dilation[d] * (w->k->size[d] - 1) + 1;
    int64_t padded = w->in[d] + padding[d][0] + padding[d][1];
    w->pad[d] = padding[d][0];
    w->out[d] = padded >= span ? (padded - span) / w->k->stride[d] + 1 : 0;
  }
}

static double *apply_kernel(const window *w, kernel_kind kind, const double *x) {
  int64_t n = volume(w->rank, w->out), o[ADJ_MAX_RANK];
  double *y = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i;
    for (int d = w->rank - 1; d >= 0; d--) {
      o[d] = rest % w->out[d];
      rest /= w->out[d];
    }
    y[i] = window_apply(w, kind, x, o);
  }
  return y;
}

/* The whole tensor on one worker: the sequential reference. */
static double *sequential(const kernel_case *kc, const adj_halo_geometry *g) {
  const halo_case *c = &kc->layout;
  window w = {.rank = c->rank, .k = adj_halo_geometry_kernel(g)};
  memcpy(w.in, c->shape, sizeof(int64_t) * (size_t)c->rank);
  window_shape(&w, w.k->padding);
  double *x = malloc(sizeof(double) * (size_t)volume(c->rank, c->shape));
  for (int64_t i = 0; i < volume(c->rank, c->shape); i++) x[i] = input_value(i);
  double *y = apply_kernel(&w, kc->kind, x);
  free(x);
  return y;
}

/* Exchange, trim to the kernel input, run the local kernel with local padding. */
static double *distributed(adj_test *t, const kernel_case *kc, const halo_setup *s, window *w) {
  adj_tensor x, input;
  ADJ_TEST_OK(t, adj_op_create_domain_tensor(s->op, &x));
  adj_box bulk = halo_global_bulk(&s->local);
  int64_t g[ADJ_MAX_RANK];
  for (int64_t i = 0; i < adj_tensor_volume(&x); i++) {
    halo_global_coords(&s->local, i, g);
    /* A halo entry left unfilled would dominate any max and any sum. */
    adj_tensor_set(&x, i, halo_in_box(&bulk, g) ? input_value(halo_flat(s->c->rank, s->c->shape, g)) : 1e6);
  }
  ADJ_TEST_OK(t, adj_op_forward(s->op, &x, &x));
  const adj_box *box = &s->local.kernel_input;
  ADJ_TEST_OK(t, adj_tensor_create(&input, ADJ_FLOAT64, box->rank, box->extent));
  adj_tensor_pack(&x, box, input.data);
  *w = (window){.rank = box->rank, .k = adj_halo_geometry_kernel(s->geometry)};
  memcpy(w->in, box->extent, sizeof(int64_t) * (size_t)box->rank);
  window_shape(w, s->local.padding);
  double *y = apply_kernel(w, kc->kind, input.data);
  adj_tensor_destroy(&input);
  adj_tensor_destroy(&x);
  return y;
}

/* Compares the local output with its block of the sequential output. */
static int64_t compare_block(const halo_setup *s, const window *w, const double *local, const double *global,
                             const int64_t *global_out) {
  int64_t n = volume(w->rank, w->out), wrong = 0, o[ADJ_MAX_RANK];
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i;
    for (int d = w->rank - 1; d >= 0; d--) {
      o[d] = s->local.output.start[d] + rest % w->out[d];
      rest /= w->out[d];
    }
    wrong += local[i] != global[halo_flat(w->rank, global_out, o)];
  }
  return wrong;
}

static void run_case(adj_test *t, const kernel_case *kc) {
  halo_setup s;
  char text[160];
  halo_case_describe(&kc->layout, text, sizeof text);
  int status = halo_setup_create(&kc->layout, ADJ_FLOAT64, &s);
  ADJ_TEST_CHECK(t, status == 0, "%s: setup failed: %s", text, adj_last_error());
  if (!status) {
    window w;
    double *local = distributed(t, kc, &s, &w); /* inactive ranks take part with nothing */
    if (s.index >= 0) {
      double *global = sequential(kc, s.geometry);
      int same = !memcmp(w.out, s.local.output.extent, sizeof(int64_t) * (size_t)w.rank);
      ADJ_TEST_CHECK(t, same, "%s: worker %d's local kernel yields the wrong output extent", text, s.index);
      int64_t wrong = same ? compare_block(&s, &w, local, global, adj_halo_geometry_output_shape(s.geometry)) : -1;
      ADJ_TEST_CHECK(t, wrong == 0, "%s: worker %d has %lld outputs differing from the sequential result", text,
                     s.index, (long long)wrong);
      free(global);
    }
    free(local);
    char out[64];
    adj_shape_format(out, sizeof out, kc->layout.rank, adj_halo_geometry_output_shape(s.geometry));
    adj_test_report(t, "%-34s on %d of %d ranks: output %s reproduced exactly", kc->layout.name, s.workers, t->size,
                    out);
  }
  halo_setup_destroy(&s);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t234-halo-kernels");
  for (size_t i = 0; i < sizeof kernel_cases / sizeof kernel_cases[0]; i++)
    if (halo_case_workers(&kernel_cases[i].layout) <= t.size) run_case(&t, &kernel_cases[i]);
  return adj_test_finish(&t);
}

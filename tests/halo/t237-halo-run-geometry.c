/* t237: the geometry of a run of kernels (adj_halo_geometry_create_run, deep
 * halos) against brute force.  For random 1-D runs of 1-4 windows (kernel,
 * stride, dilation, asymmetric padding) over 1..size workers, balanced and
 * with quadratic cuts (empty blocks), every worker is checked from the last
 * stage back by scanning every output of each stage's range and every tap of
 * its window: the last stage computes the balanced output block; each stage's
 * input (the previous stage's range, or the run's needed input) holds every
 * tap inside [0, n), and the stage's local window over that input and its
 * padding starts where the global window does and yields exactly its range;
 * bulk, halos and trims deliver the needed input.  A
 * one-kernel run equals adj_halo_geometry_create_for (which alone accepts
 * outputs that read only padding).  The run count and the
 * number of workers compared are printed. */
#include <string.h>

#include "harness.h"

enum { CASES = 400, MAX_STAGES = 4 };

typedef struct window {
  int64_t k, s, d, pl, pr;
} window;

static int64_t out_extent(const window *w, int64_t n) {
  int64_t padded = n + w->pl + w->pr, span = w->d * (w->k - 1) + 1;
  return padded < span ? -1 : (padded - span) / w->s + 1;
}

/* The hull [lo, hi) of the inputs outputs [a, b) read inside [0, n) (empty,
 * lo >= hi, when a stride skips every input the window spans). */
static void brute_hull(const window *w, int64_t n, int64_t a, int64_t b, int64_t *lo, int64_t *hi) {
  *lo = INT64_MAX, *hi = INT64_MIN;
  for (int64_t o = a; o < b; o++)
    for (int64_t t = 0; t < w->k; t++) {
      int64_t i = o * w->s - w->pl + t * w->d;
      if (i >= 0 && i < n) *lo = i < *lo ? i : *lo, *hi = i + 1 > *hi ? i + 1 : *hi;
    }
}

/* Stage outputs [a, b) computed locally from input [in0, in1) with `padding`:
 * every tap it reads inside [0, n) lies in the input, the local window starts
 * where the global one does (in0 - padding left = a s - pl) and yields
 * exactly b - a outputs. */
static bool stage_consistent(const window *w, int64_t n, int64_t a, int64_t b, const int64_t *in,
                             const int64_t *padding) {
  int64_t lo, hi;
  brute_hull(w, n, a, b, &lo, &hi);
  window local = *w;
  local.pl = padding[0], local.pr = padding[1];
  return (lo >= hi || (in[0] <= lo && hi <= in[1])) && in[0] >= 0 && in[1] <= n && in[0] - padding[0] == a * w->s - w->pl &&
         out_extent(&local, in[1] - in[0]) == b - a;
}

typedef struct run_case {
  int count, parts;
  int64_t n;
  window w[MAX_STAGES];
  bool cuts;
} run_case;

static bool draw(adj_rng *rng, int size, run_case *c) {
  *c = (run_case){.count = 1 + (int)adj_rng_below(rng, MAX_STAGES), .parts = 1 + (int)adj_rng_below(rng, (uint64_t)size),
                  .n = 4 + (int64_t)adj_rng_below(rng, 40), .cuts = adj_rng_below(rng, 3) == 0};
  int64_t n = c->n;
  for (int j = 0; j < c->count; j++) {
    window *w = &c->w[j];
    *w = (window){1 + (int64_t)adj_rng_below(rng, 5), 1 + (int64_t)adj_rng_below(rng, 2),
                  1 + (int64_t)adj_rng_below(rng, 2), (int64_t)adj_rng_below(rng, 3), (int64_t)adj_rng_below(rng, 3)};
    n = out_extent(w, n);
    if (n < 1) return false;
  }
  return true;
}

static adj_decomposition *layout(adj_test *t, const run_case *c) {
  adj_partition *p = NULL;
  adj_decomposition *d = NULL;
  int64_t cuts[9];
  for (int q = 0; q <= c->parts; q++) cuts[q] = c->n * q * q / ((int64_t)c->parts * c->parts);
  const int64_t *all[1] = {cuts};
  ADJ_TEST_OK(t, adj_partition_create(MPI_COMM_WORLD, 1, &c->parts, c->parts, NULL, &p));
  if (p) ADJ_TEST_OK(t, adj_decomposition_create_explicit(p, 1, &c->n, c->cuts ? all : NULL, &d));
  adj_partition_destroy(&p);
  return d;
}

/* Worker q of the run: the last stage's output is its balanced block, and
 * every stage is consistent with the range the stage before computes (the
 * run's needed input for the first); false (and a failed check) otherwise. */
static bool check_worker(adj_test *t, int index, const run_case *c, const adj_halo_geometry *g, int q) {
  int64_t extents[MAX_STAGES + 1] = {c->n};
  for (int j = 0; j < c->count; j++) extents[j + 1] = out_extent(&c->w[j], extents[j]);
  const adj_halo_dim *dim = adj_halo_geometry_dim(g, 0, q);
  int64_t a, e;
  adj_balanced_block(extents[c->count], c->parts, q, &a, &e);
  adj_halo_stage last = adj_halo_geometry_stage(g, c->count - 1, 0, q);
  bool ok = last.output[0] == a && last.output[1] == a + e && dim->output[0] == a && dim->output[1] == a + e;
  for (int j = c->count - 1; ok && e > 0 && j >= 0; j--) {
    adj_halo_stage st = adj_halo_geometry_stage(g, j, 0, q);
    adj_halo_stage before = j > 0 ? adj_halo_geometry_stage(g, j - 1, 0, q) : (adj_halo_stage){.output = {0}};
    const int64_t *in = j > 0 ? before.output : dim->needed;
    ok = stage_consistent(&c->w[j], extents[j], st.output[0], st.output[1], in, st.padding);
    ADJ_TEST_CHECK(t, ok, "case %d worker %d stage %d: outputs [%lld,%lld) from [%lld,%lld) with padding %lld:%lld "
                   "do not match the window", index, q, j, (long long)st.output[0], (long long)st.output[1],
                   (long long)in[0], (long long)in[1], (long long)st.padding[0], (long long)st.padding[1]);
  }
  /* The exchange delivers the needed range: bulk plus halos minus trims. */
  ok = ok && (e == 0 || (dim->bulk[0] - dim->halo[0] + dim->trim[0] == dim->needed[0] &&
                         dim->bulk[1] + dim->halo[1] - dim->trim[1] == dim->needed[1]));
  ADJ_TEST_CHECK(t, ok, "case %d worker %d: output [%lld,%lld) (balanced [%lld,%lld)), needed [%lld,%lld), halo "
                 "%lld:%lld, trim %lld:%lld", index, q, (long long)dim->output[0], (long long)dim->output[1],
                 (long long)a, (long long)(a + e), (long long)dim->needed[0], (long long)dim->needed[1],
                 (long long)dim->halo[0], (long long)dim->halo[1], (long long)dim->trim[0], (long long)dim->trim[1]);
  return ok;
}

static adj_halo_kernel kernel_of(const window *w) {
  return (adj_halo_kernel){.size = {w->k}, .stride = {w->s}, .dilation = {w->d}, .padding = {{w->pl, w->pr}}};
}

/* A one-kernel run is the one-kernel geometry where it is made. */
static void check_single(adj_test *t, int index, const adj_decomposition *d, const window *w) {
  adj_halo_kernel k = kernel_of(w);
  adj_halo_geometry *run = NULL, *one = NULL;
  int a = adj_halo_geometry_create_run(d, 1, &k, &run), b = adj_halo_geometry_create_for(d, &k, &one);
  /* The run alone refuses workers whose outputs read only padding. */
  ADJ_TEST_CHECK(t, b == 0 && (a == 0 || strstr(adj_last_error(), "read only padding")),
                 "case %d: one-kernel run status %d, geometry %d", index, a, b);
  for (int q = 0; run && one && q < adj_halo_geometry_parts(one)[0]; q++)
    ADJ_TEST_CHECK(t, !memcmp(adj_halo_geometry_dim(run, 0, q), adj_halo_geometry_dim(one, 0, q), sizeof(adj_halo_dim)),
                   "case %d worker %d: a one-kernel run differs from the one-kernel geometry", index, q);
  adj_halo_geometry_destroy(&run), adj_halo_geometry_destroy(&one);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t237-halo-run-geometry");
  adj_rng *rng;
  adj_rng_create(237, &rng);
  int runs = 0, workers = 0, unfusable = 0;
  for (int i = 0; i < CASES; i++) {
    run_case c;
    if (!draw(rng, t.size, &c)) continue;
    adj_decomposition *d = layout(&t, &c);
    if (!d) continue;
    adj_halo_kernel kernels[MAX_STAGES];
    for (int j = 0; j < c.count; j++) kernels[j] = kernel_of(&c.w[j]);
    adj_halo_geometry *g = NULL;
    int status = adj_halo_geometry_create_run(d, c.count, kernels, &g);
    /* Refused only where some worker's outputs read nothing but padding. */
    if (status) {
      unfusable++;
      ADJ_TEST_CHECK(&t, strstr(adj_last_error(), "read only padding") != NULL, "case %d: %s", i, adj_last_error());
    }
    for (int q = 0; g && q < c.parts; q++) workers += check_worker(&t, i, &c, g, q);
    runs += g != NULL;
    if (c.count == 1) check_single(&t, i, d, &c.w[0]);
    adj_halo_geometry_destroy(&g);
    adj_decomposition_destroy(&d);
  }
  adj_test_report(&t, "%d runs of 1-%d kernels, %d workers consistent with brute force, %d runs refused (padding-only outputs)",
                  runs, MAX_STAGES, workers, unfusable);
  ADJ_TEST_CHECK(&t, runs > CASES / 4, "only %d runs were drawn", runs);
  adj_rng_destroy(&rng);
  return adj_test_finish(&t);
}

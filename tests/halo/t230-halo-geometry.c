/* Halo geometry: the paper's figures B2-B5 exactly, explicit cuts (right trim,
 * empty blocks, halos wider than the adjacent block), local boxes and padding,
 * invariants over a sweep of kernels, and creation errors naming the values. */
#include <string.h>

#include "harness.h"

typedef struct expected_dim {
  int64_t bulk[2], output[2], needed[2], halo[2], trim[2];
} expected_dim;

static int pair_equal(const int64_t *a, const int64_t *b) { return a[0] == b[0] && a[1] == b[1]; }

static void check_dim(adj_test *t, const char *what, const adj_halo_geometry *g, int dim, int part,
                      const expected_dim *e) {
  const adj_halo_dim *d = adj_halo_geometry_dim(g, dim, part);
  int ok = pair_equal(d->bulk, e->bulk) && pair_equal(d->output, e->output) && pair_equal(d->needed, e->needed) &&
           pair_equal(d->halo, e->halo) && pair_equal(d->trim, e->trim);
  ADJ_TEST_CHECK(
      t, ok,
      "%s dim %d worker %d: bulk [%lld,%lld) output [%lld,%lld) needed [%lld,%lld) halo %lld:%lld trim "
      "%lld:%lld; expected bulk [%lld,%lld) output [%lld,%lld) needed [%lld,%lld) halo %lld:%lld trim %lld:%lld",
      what, dim, part, (long long)d->bulk[0], (long long)d->bulk[1], (long long)d->output[0], (long long)d->output[1],
      (long long)d->needed[0], (long long)d->needed[1], (long long)d->halo[0], (long long)d->halo[1],
      (long long)d->trim[0], (long long)d->trim[1], (long long)e->bulk[0], (long long)e->bulk[1],
      (long long)e->output[0], (long long)e->output[1], (long long)e->needed[0], (long long)e->needed[1],
      (long long)e->halo[0], (long long)e->halo[1], (long long)e->trim[0], (long long)e->trim[1]);
}

/* A 1-D geometry checked worker by worker against the table. */
static void check_1d(adj_test *t, const char *what, int64_t n, int parts, const int64_t *cuts, adj_halo_kernel k,
                     int64_t m, const expected_dim *e) {
  adj_halo_geometry *g = NULL;
  const int64_t *cut_list[1] = {cuts};
  ADJ_TEST_OK(t, adj_halo_geometry_create(1, &n, &parts, cuts ? cut_list : NULL, &k, &g));
  if (!g) return;
  ADJ_TEST_CHECK(t, adj_halo_geometry_output_shape(g)[0] == m, "%s: output extent %lld, expected %lld", what,
                 (long long)adj_halo_geometry_output_shape(g)[0], (long long)m);
  for (int p = 0; p < parts; p++) check_dim(t, what, g, 0, p, &e[p]);
  adj_test_report(t, "%s: n=%lld P=%d m=%lld matches", what, (long long)n, parts, (long long)m);
  adj_halo_geometry_destroy(&g);
}

static void check_paper_figures(adj_test *t) {
  static const expected_dim b2[] = {{{0, 4}, {0, 4}, {0, 6}, {0, 2}, {0, 0}},
                                    {{4, 8}, {4, 8}, {2, 10}, {2, 2}, {0, 0}},
                                    {{8, 11}, {8, 11}, {6, 11}, {2, 0}, {0, 0}}};
  check_1d(t, "B2 k=5 pad 2", 11, 3, NULL, (adj_halo_kernel){.size = {5}, .padding = {{2, 2}}}, 11, b2);
  static const expected_dim b3[] = {{{0, 4}, {0, 3}, {0, 7}, {0, 3}, {0, 0}},
                                    {{4, 8}, {3, 5}, {3, 9}, {1, 1}, {0, 0}},
                                    {{8, 11}, {5, 7}, {5, 11}, {3, 0}, {0, 0}}};
  check_1d(t, "B3 k=5 no pad", 11, 3, NULL, (adj_halo_kernel){.size = {5}}, 7, b3);
  static const expected_dim b4[] = {{{0, 4}, {0, 2}, {0, 4}, {0, 0}, {0, 0}},
                                    {{4, 7}, {2, 4}, {4, 8}, {0, 1}, {0, 0}},
                                    {{7, 10}, {4, 5}, {8, 10}, {0, 0}, {1, 0}}};
  check_1d(t, "B4 (n=10 as drawn) k=2 s=2", 10, 3, NULL, (adj_halo_kernel){.size = {2}, .stride = {2}}, 5, b4);
  /* The text's n=11: the last input entry is never read, so it is trimmed on the right. */
  static const expected_dim b4_text[] = {{{0, 4}, {0, 2}, {0, 4}, {0, 0}, {0, 0}},
                                         {{4, 8}, {2, 4}, {4, 8}, {0, 0}, {0, 0}},
                                         {{8, 11}, {4, 5}, {8, 10}, {0, 0}, {0, 1}}};
  check_1d(t, "B4 (n=11 as written) k=2 s=2", 11, 3, NULL, (adj_halo_kernel){.size = {2}, .stride = {2}}, 5, b4_text);
  static const expected_dim b5[] = {
      {{0, 4}, {0, 2}, {0, 4}, {0, 0}, {0, 0}},     {{4, 8}, {2, 4}, {4, 8}, {0, 0}, {0, 0}},
      {{8, 11}, {4, 6}, {8, 12}, {0, 1}, {0, 0}},   {{11, 14}, {6, 8}, {12, 16}, {0, 2}, {1, 0}},
      {{14, 17}, {8, 9}, {16, 18}, {0, 1}, {2, 0}}, {{17, 20}, {9, 10}, {18, 20}, {0, 0}, {1, 0}}};
  check_1d(t, "B5 k=2 s=2", 20, 6, NULL, (adj_halo_kernel){.size = {2}, .stride = {2}}, 10, b5);
}

static void check_explicit_cuts(adj_test *t) {
  /* Surplus on the right: worker 0 holds more input than its output reads. */
  static const int64_t right_cuts[] = {0, 9, 11};
  static const expected_dim right[] = {{{0, 9}, {0, 6}, {0, 7}, {0, 0}, {0, 2}},
                                       {{9, 11}, {6, 11}, {5, 11}, {4, 0}, {0, 0}}};
  check_1d(t, "cuts 0:9:11 k=3 pad 1", 11, 2, right_cuts, (adj_halo_kernel){.size = {3}, .padding = {{1, 1}}}, 11,
           right);
  /* An empty block: its neighbours' halos reach across it to the next worker. */
  static const int64_t empty_cuts[] = {0, 5, 5, 6, 12};
  static const expected_dim empty[] = {{{0, 5}, {0, 3}, {0, 5}, {0, 0}, {0, 0}},
                                       {{5, 5}, {3, 6}, {1, 8}, {4, 3}, {0, 0}},
                                       {{5, 6}, {6, 9}, {4, 11}, {1, 5}, {0, 0}},
                                       {{6, 12}, {9, 12}, {7, 12}, {0, 0}, {1, 0}}};
  check_1d(t, "cuts 0:5:5:6:12 k=5 pad 2", 12, 4, empty_cuts, (adj_halo_kernel){.size = {5}, .padding = {{2, 2}}}, 12,
           empty);
  /* Appendix B.2's 2x2 example: unequal blocks, one-sided halos of 2, 4 and 3. */
  static const int64_t rows[] = {0, 7, 12}, cols[] = {0, 8, 11};
  check_1d(t, "B.2 rows k=7 pad 3", 12, 2, rows, (adj_halo_kernel){.size = {7}, .padding = {{3, 3}}}, 12,
           (expected_dim[]){{{0, 7}, {0, 6}, {0, 9}, {0, 2}, {0, 0}}, {{7, 12}, {6, 12}, {3, 12}, {4, 0}, {0, 0}}});
  check_1d(t, "B.2 cols k=4 pad 1:2", 11, 2, cols, (adj_halo_kernel){.size = {4}, .padding = {{1, 2}}}, 11,
           (expected_dim[]){{{0, 8}, {0, 6}, {0, 8}, {0, 0}, {0, 0}}, {{8, 11}, {6, 11}, {5, 11}, {3, 0}, {0, 0}}});
}

/* Empty outputs and outputs that read only padding need nothing. */
static void check_degenerate(adj_test *t) {
  static const expected_dim idle[] = {{{0, 1}, {0, 1}, {0, 3}, {0, 2}, {0, 0}},
                                      {{1, 2}, {1, 2}, {1, 4}, {0, 2}, {0, 0}},
                                      {{2, 3}, {2, 2}, {2, 2}, {0, 0}, {0, 1}},
                                      {{3, 4}, {2, 2}, {3, 3}, {0, 0}, {0, 1}}};
  check_1d(t, "empty outputs n=4 P=4 k=3", 4, 4, NULL, (adj_halo_kernel){.size = {3}}, 2, idle);
  static const expected_dim pad_only[] = {{{0, 1}, {0, 2}, {0, 0}, {0, 0}, {0, 1}},
                                          {{1, 2}, {2, 4}, {0, 1}, {1, 0}, {0, 1}},
                                          {{2, 2}, {4, 6}, {1, 2}, {1, 0}, {0, 0}},
                                          {{2, 2}, {6, 8}, {2, 2}, {0, 0}, {0, 0}}};
  check_1d(t, "padding only n=2 P=4 k=1 pad 3", 2, 4, NULL, (adj_halo_kernel){.padding = {{3, 3}}}, 8, pad_only);
}

/* Boxes of the local tensor for B3 worker 1 and B4 worker 2, and the local
 * padding at global boundaries for B2. */
static void check_local_boxes(adj_test *t) {
  adj_halo_geometry *g = NULL;
  int64_t n = 11, n10 = 10;
  int parts = 3;
  adj_halo_local l;
  ADJ_TEST_OK(t, adj_halo_geometry_create(1, &n, &parts, NULL, &(adj_halo_kernel){.size = {5}}, &g));
  adj_halo_geometry_local(g, (int[]){1}, &l);
  ADJ_TEST_CHECK(t,
                 l.shape[0] == 6 && l.bulk.start[0] == 1 && l.bulk.extent[0] == 4 && l.kernel_input.start[0] == 0 &&
                     l.kernel_input.extent[0] == 6 && l.input.start[0] == 3 && l.output.start[0] == 3 &&
                     l.output.extent[0] == 2,
                 "B3 worker 1 local boxes wrong: shape %lld bulk %lld+%lld input %lld+%lld", (long long)l.shape[0],
                 (long long)l.bulk.start[0], (long long)l.bulk.extent[0], (long long)l.kernel_input.start[0],
                 (long long)l.kernel_input.extent[0]);
  adj_halo_geometry_local(g, NULL, &l);
  ADJ_TEST_CHECK(t, l.rank == 1 && l.shape[0] == 0, "inactive worker must have a zero-volume local tensor");
  adj_halo_geometry_destroy(&g);
  ADJ_TEST_OK(t, adj_halo_geometry_create(1, &n10, &parts, NULL, &(adj_halo_kernel){.size = {2}, .stride = {2}}, &g));
  adj_halo_geometry_local(g, (int[]){2}, &l);
  ADJ_TEST_CHECK(t, l.shape[0] == 3 && l.kernel_input.start[0] == 1 && l.kernel_input.extent[0] == 2,
                 "B4 worker 2 must trim one entry on the left: kernel input %lld+%lld",
                 (long long)l.kernel_input.start[0], (long long)l.kernel_input.extent[0]);
  adj_halo_geometry_destroy(&g);
  ADJ_TEST_OK(t,
              adj_halo_geometry_create(1, &n, &parts, NULL, &(adj_halo_kernel){.size = {5}, .padding = {{2, 2}}}, &g));
  for (int p = 0; p < 3; p++) {
    adj_halo_geometry_local(g, &p, &l);
    int64_t left = p == 0 ? 2 : 0, right = p == 2 ? 2 : 0;
    ADJ_TEST_CHECK(t, l.padding[0][0] == left && l.padding[0][1] == right, "B2 worker %d local padding %lld:%lld", p,
                   (long long)l.padding[0][0], (long long)l.padding[0][1]);
  }
  adj_halo_geometry_destroy(&g);
}

/* Dimensions are independent: a 3-D geometry equals its three 1-D ones. */
static void check_independence(adj_test *t) {
  int64_t shape[3] = {13, 7, 20};
  int parts[3] = {3, 2, 6};
  adj_halo_kernel k = {
      .size = {5, 3, 2}, .stride = {1, 2, 2}, .dilation = {2, 1, 1}, .padding = {{1, 3}, {0, 0}, {1, 0}}};
  adj_halo_geometry *g3 = NULL;
  ADJ_TEST_OK(t, adj_halo_geometry_create(3, shape, parts, NULL, &k, &g3));
  for (int i = 0; g3 && i < 3; i++) {
    adj_halo_kernel k1 = {.size = {k.size[i]},
                          .stride = {k.stride[i]},
                          .dilation = {k.dilation[i]},
                          .padding = {{k.padding[i][0], k.padding[i][1]}}};
    adj_halo_geometry *g1 = NULL;
    ADJ_TEST_OK(t, adj_halo_geometry_create(1, &shape[i], &parts[i], NULL, &k1, &g1));
    for (int p = 0; g1 && p < parts[i]; p++)
      ADJ_TEST_CHECK(t, !memcmp(adj_halo_geometry_dim(g3, i, p), adj_halo_geometry_dim(g1, 0, p), sizeof(adj_halo_dim)),
                     "dimension %d worker %d differs between the 3-D and the 1-D geometry", i, p);
    adj_halo_geometry_destroy(&g1);
  }
  adj_halo_geometry_destroy(&g3);
}

/* Invariants for every worker: outputs tile [0, m); bulk + halos - trims is the
 * needed range; the local kernel over kernel_input with the local padding
 * yields exactly the worker's output extent. */
static int check_invariants(adj_test *t, const adj_halo_geometry *g) {
  const adj_halo_kernel *k = adj_halo_geometry_kernel(g);
  int64_t m = adj_halo_geometry_output_shape(g)[0], next = 0;
  int ok = 1;
  for (int p = 0; p < adj_halo_geometry_parts(g)[0]; p++) {
    const adj_halo_dim *d = adj_halo_geometry_dim(g, 0, p);
    int64_t local = d->bulk[1] - d->bulk[0] + d->halo[0] + d->halo[1];
    int64_t input = local - d->trim[0] - d->trim[1], out = d->output[1] - d->output[0];
    ok &= d->output[0] == next && input == d->needed[1] - d->needed[0] && d->trim[0] >= 0 && d->trim[1] >= 0;
    ok &= d->needed[0] == d->bulk[0] - d->halo[0] + d->trim[0];
    int64_t padded = d->padding[0] + input + d->padding[1], span = k->dilation[0] * (k->size[0] - 1) + 1;
    if (out > 0) ok &= padded >= span && (padded - span) / k->stride[0] + 1 == out;
    next = d->output[1];
  }
  ok &= next == m;
  ADJ_TEST_CHECK(t, ok, "geometry invariants fail for n=%lld P=%d k=%lld s=%lld d=%lld pad %lld:%lld",
                 (long long)adj_halo_geometry_input_shape(g)[0], adj_halo_geometry_parts(g)[0], (long long)k->size[0],
                 (long long)k->stride[0], (long long)k->dilation[0], (long long)k->padding[0][0],
                 (long long)k->padding[0][1]);
  return ok;
}

static void check_sweep(adj_test *t) {
  int configs = 0, failures = 0;
  for (int64_t n = 1; n <= 23; n += 2)
    for (int parts = 1; parts <= 8; parts++)
      for (int64_t k = 1; k <= 7; k++)
        for (int64_t s = 1; s <= 3; s++)
          for (int64_t d = 1; d <= 3; d++)
            for (int64_t pl = 0; pl <= 3; pl++) {
              int64_t pr = (pl * 5 + k) % 4;
              adj_halo_kernel kernel = {.size = {k}, .stride = {s}, .dilation = {d}, .padding = {{pl, pr}}};
              adj_halo_geometry *g = NULL;
              if (n + pl + pr < d * (k - 1) + 1) continue;
              ADJ_TEST_OK(t, adj_halo_geometry_create(1, &n, &parts, NULL, &kernel, &g));
              if (!g) continue;
              configs++;
              failures += !check_invariants(t, g);
              adj_halo_geometry_destroy(&g);
            }
  adj_test_report(t, "invariants hold on %d of %d swept 1-D geometries", configs - failures, configs);
}

static void check_errors(adj_test *t) {
  adj_halo_geometry *g = NULL;
  int64_t shape[2] = {8, 5};
  int parts[2] = {2, 2};
  int status =
      adj_halo_geometry_create(2, shape, parts, NULL, &(adj_halo_kernel){.size = {3, 4}, .dilation = {1, 2}}, &g);
  const char *expected = "halo geometry: dimension 1: kernel 4 with dilation 2 spans 7 input entries but the padded "
                         "input has only 5 (n=5, padding 0:0)";
  ADJ_TEST_CHECK(t, status == ADJ_ERR_SIZE && !g && !strcmp(adj_last_error(), expected), "kernel too large: %s: '%s'",
                 adj_status_name(status), adj_last_error());
  status = adj_halo_geometry_create(2, shape, parts, NULL, &(adj_halo_kernel){.stride = {1, -2}}, &g);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "dimension 1 has stride -2"),
                 "negative stride: '%s'", adj_last_error());
  status = adj_halo_geometry_create(2, shape, parts, NULL, &(adj_halo_kernel){.padding = {{0, -1}}}, &g);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "dimension 0 has padding 0:-1"),
                 "negative padding: '%s'", adj_last_error());
  const int64_t bad[3] = {0, 6, 5}, *cuts[2] = {bad, NULL};
  status = adj_halo_geometry_create(2, shape, parts, cuts, NULL, &g);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "cuts of dimension 0 must run from 0 to 8"),
                 "bad cuts: '%s'", adj_last_error());
  status = adj_halo_geometry_create(0, shape, parts, NULL, NULL, &g);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG, "rank 0 must be rejected, got %s", adj_status_name(status));
  int64_t empty = 0;
  int one = 1;
  ADJ_TEST_OK(t, adj_halo_geometry_create(1, &empty, &one, NULL, &(adj_halo_kernel){.size = {3}}, &g));
  ADJ_TEST_CHECK(t, g && adj_halo_geometry_output_shape(g)[0] == 0, "n=0 without padding is an empty dimension");
  adj_halo_geometry_destroy(&g);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t230-halo-geometry");
  check_paper_figures(&t);
  check_explicit_cuts(&t);
  check_degenerate(&t);
  check_local_boxes(&t);
  check_independence(&t);
  check_sweep(&t);
  check_errors(&t);
  return adj_test_finish(&t);
}

/* Every network file in networks/ at every placement of exactly the run's
 * rank count: the shipped placement files (the NAME.place files in networks/NAME/) that use
 * that many ranks and every uniform placement adj_placement_enumerate
 * lists.  Each is built and proven (network_check.h): the network Jacobian
 * dot-product test and distributed == sequential (outputs, input gradients,
 * parameter gradients) in float64, every figure printed and held within
 * 1e-12.  With --stride K, every K-th enumerated placement only (the
 * first, the (K+1)-th, ...), so the quick suite samples what the slow suite
 * proves in full.  Usage: t432-network-placements [--stride K] NETWORK.net ... */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { BATCH = 4 };

static void check_one(adj_test *t, const adj_description *d, const adj_placement *p, const char *name, int *count) {
  adj_network_check_config c = {.description = d, .placement = p, .comm = t->comm, .dtype = ADJ_FLOAT64,
                                .batch = BATCH, .seed = 432};
  adj_network_check_result r;
  ADJ_TEST_OK(t, adj_network_check(&c, &r));
  adj_test_report(t, "%-13s %-34s %d ranks  jacobian %.2e  output %.2e  dx %.2e  grads %.2e  %s", d->name, name,
                  r.ranks, r.jacobian.relative_error, r.output_diff, r.input_gradient_diff, r.parameter_gradient_diff,
                  r.passed ? "pass" : "FAIL");
  ADJ_TEST_CHECK(t, r.passed, "%s at %s: jacobian %.3e (tolerance %.0e, |Jv| %.3e), output %.3e, dx %.3e, grads %.3e",
                 d->name, name, r.jacobian.relative_error, r.jacobian_tolerance, r.jacobian.norm_Fx, r.output_diff,
                 r.input_gradient_diff, r.parameter_gradient_diff);
  (*count)++;
}

/* The shipped placement files of the network that use exactly t->size ranks. */
static void check_files(adj_test *t, const adj_description *d, const char *path, int *count) {
  char names[4096];
  adj_placement_names(path, "\n", names, sizeof names);
  char *save = NULL;
  for (char *name = strtok_r(names, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
    adj_placement *p = NULL;
    adj_network_layout layout = {0};
    ADJ_TEST_OK(t, adj_placement_find(t->comm, d, path, name, &p));
    ADJ_TEST_OK(t, p ? adj_placement_resolve(d, p, BATCH, &layout) : ADJ_ERR_ARG);
    if (p && layout.layers && layout.ranks == t->size) check_one(t, d, p, p->name, count);
    adj_network_layout_free(&layout);
    adj_placement_destroy(&p);
  }
}

static void check_network(adj_test *t, const char *path, int stride) {
  adj_description *d = NULL;
  ADJ_TEST_OK(t, adj_description_read_all(t->comm, path, &d));
  if (!d) return;
  int files = 0, uniform = 0, n = 0;
  check_files(t, d, path, &files);
  adj_uniform_placement *list = NULL;
  ADJ_TEST_OK(t, adj_placement_enumerate(d, t->size, BATCH, &list, &n));
  for (int i = 0; i < n; i += stride) {
    adj_placement *p = NULL;
    ADJ_TEST_OK(t, adj_placement_uniform(d, &list[i], &p));
    if (p) check_one(t, d, p, p->name, &uniform);
    adj_placement_destroy(&p);
  }
  adj_test_report(t, "%s: %d shipped and %d of %d enumerated placements on %d ranks checked", d->name, files, uniform,
                  n, t->size);
  ADJ_TEST_CHECK(t, uniform == (n + stride - 1) / stride && n > 0, "%s: %d of %d enumerated placements checked",
                 d->name, uniform, n);
  adj_uniform_placement_list_free(&list);
  adj_description_destroy(&d);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t432-network-placements");
  int first = 1, stride = 1;
  if (argc > 2 && !strcmp(argv[1], "--stride")) {
    stride = atoi(argv[2]);
    first = 3;
  }
  ADJ_TEST_CHECK(&t, argc > first && stride >= 1, "usage: t432-network-placements [--stride K] NETWORK.net ...");
  for (int i = first; i < argc && stride >= 1; i++) check_network(&t, argv[i], stride);
  return adj_test_finish(&t);
}

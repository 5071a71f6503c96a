/* Collective safety: a failure injected on one rank (internal/fault_impl.h: as an
 * allocation failing there) in the forward and in the backward of every stage
 * of LeNet-5 + loss (convolution, pooling, activations, flatten, repartition,
 * affine, softmax cross-entropy), and at the local step of the layers with a
 * collective after it (affine forward and backward, pool backward), ends in
 * the same ADJ_ERR_MEM and message on every rank, never a hang (the test's
 * timeout), and the network runs cleanly afterwards.  Each site fails once on
 * rank 0 and once on the last rank. */
#include <string.h>

#include "fault_impl.h"
#include "net_check.h"

enum { BATCH = 3 };

typedef struct run {
  adj_layer *net;
  adj_tensor x, y, dx, dy;
} run;

/* One forward and backward; every rank gets the agreed status of each. */
static int pass(run *r, bool backward) {
  int status = adj_layer_forward(r->net, &r->x, &r->y);
  if (!status && backward) status = adj_layer_backward(r->net, &r->dy, &r->dx);
  return status;
}

/* Arms `site` on rank `failing`, runs the pass that reaches it, and checks the
 * error everywhere; then a clean pass must succeed.  Returns whether the site
 * fired (an unknown site is a failed check, not a silent pass). */
static void inject(adj_test *t, run *r, const char *site, bool backward, int failing) {
  char label[200];
  snprintf(label, sizeof label, "%s on rank %d", site, failing);
  if (backward) ADJ_TEST_OK(t, pass(r, false)); /* the backward needs a forward first */
  adj_clear_error();
  if (t->rank == failing) adj_fault_arm(site);
  int status = backward ? adj_layer_backward(r->net, &r->dy, &r->dx) : adj_layer_forward(r->net, &r->x, &r->y);
  adj_fault_arm(NULL);
  char phrase[200];
  snprintf(phrase, sizeof phrase, "rank %d: %s: injected failure", failing, site);
  adj_test_expect_error(t, label, status, ADJ_ERR_MEM, phrase);
  int clean = pass(r, true);
  ADJ_TEST_CHECK(t, clean == ADJ_SUCCESS, "%s: the pass after the failure: %s: %s", label, adj_status_name(clean),
                 adj_last_error());
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t409-failure-injection");
  const char *layouts[NC_MAX_LAYOUTS];
  int n = nc_layouts_fitting(t.size, layouts);
  const char *layout = layouts[n - 1];
  run r = {0};
  ADJ_TEST_OK(&t, adj_lenet_create(&(adj_lenet_config){.comm = t.comm, .dtype = ADJ_FLOAT64, .layout = layout,
                                                        .batch = BATCH},
                                   &r.net));
  if (!r.net) return adj_test_finish(&t);
  ADJ_TEST_OK(&t, adj_network_init_uniform(r.net, 5));
  ADJ_TEST_OK(&t, adj_xent_layer_set_labels(adj_lenet_loss(r.net), (const int64_t[BATCH]){7, 2, 9}, BATCH));
  ADJ_TEST_OK(&t, adj_layer_create_input(r.net, &r.x));
  ADJ_TEST_OK(&t, adj_layer_create_input(r.net, &r.dx));
  ADJ_TEST_OK(&t, adj_layer_create_output(r.net, &r.y));
  ADJ_TEST_OK(&t, adj_layer_create_output(r.net, &r.dy));
  for (int64_t i = 0; i < adj_tensor_volume(&r.x); i++) adj_tensor_set(&r.x, i, 0.001 * (double)(i % 997));
  for (int64_t i = 0; i < adj_tensor_volume(&r.dy); i++) adj_tensor_set(&r.dy, i, 1.0);
  ADJ_TEST_OK(&t, pass(&r, true));

  int depth = adj_network_depth(r.net), sites = 0;
  const int failing[2] = {0, t.size - 1};
  for (int s = 0; s < depth; s++) {
    const char *name = adj_layer_name(adj_network_layer(r.net, s));
    /* A name seen at an earlier stage would fire there first. */
    bool repeated = false;
    for (int p = 0; p < s; p++) repeated |= !strcmp(name, adj_layer_name(adj_network_layer(r.net, p)));
    if (repeated) continue;
    const char *kinds[4] = {"forward", "backward", NULL, NULL};
    if (!strncmp(name, "affine", 6) || !strncmp(name, "fc", 2)) kinds[2] = "forward local", kinds[3] = "backward local";
    if (strstr(name, "pool")) kinds[2] = "backward local";
    for (int k = 0; k < 4 && kinds[k]; k++) {
      char site[128];
      snprintf(site, sizeof site, "%s %s", name, kinds[k]);
      for (int f = 0; f < (t.size > 1 ? 2 : 1); f++) inject(&t, &r, site, strstr(kinds[k], "backward") != NULL, failing[f]);
      sites++;
    }
  }
  /* The optimizer's allocations, failing on the last rank only. */
  adj_optimizer *opt = (adj_optimizer *)&opt; /* must come back NULL */
  adj_clear_error();
  if (t.rank == t.size - 1) adj_fault_arm("optimizer create");
  int status = adj_optimizer_create(r.net, &(adj_optimizer_config){.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = 1e-3},
                                    &opt);
  adj_fault_arm(NULL);
  char phrase[100];
  snprintf(phrase, sizeof phrase, "rank %d: optimizer create: injected failure", t.size - 1);
  adj_test_expect_error(&t, "optimizer create on the last rank", status, ADJ_ERR_MEM, phrase);
  ADJ_TEST_CHECK(&t, opt == NULL, "a failed adj_optimizer_create left an optimizer behind");
  adj_optimizer_destroy(&opt);
  sites++;
  adj_test_report(&t, "lenet5 %s on %d ranks: %d stages, %d failure sites, each alike on every rank", layout, t.size,
                  depth, sites);
  adj_tensor_destroy(&r.x), adj_tensor_destroy(&r.dx), adj_tensor_destroy(&r.y), adj_tensor_destroy(&r.dy);
  adj_layer_destroy(&r.net);
  return adj_test_finish(&t);
}

/* Collective safety: a failure injected on one rank (internal/fault_impl.h: as
 * an allocation failing there) in the forward, jvp and backward of every
 * stage of LeNet-5 + loss (convolution, pooling, activations, flatten,
 * repartition, affine, softmax cross-entropy), and at the local step of the
 * layers with a collective after it (affine forward and backward, pool and
 * softmax cross-entropy backward), ends in the same ADJ_ERR_MEM and message
 * on every rank, never a hang (the test's timeout), and the network runs
 * cleanly afterwards.  Each site fails once on rank 0 and once on the last
 * rank (fault_check.h); t414 does the same for the newer layers. */
#include "fault_check.h"
#include "fault_impl.h"
#include "net_check.h"

enum { BATCH = 3 };

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t409-failure-injection");
  const char *layouts[NC_MAX_LAYOUTS];
  int n = nc_layouts_fitting(t.size, layouts);
  const char *layout = layouts[n - 1];
  adj_layer *net = NULL;
  ADJ_TEST_OK(&t, nc_build_network("lenet", layout, &(adj_network_build_options){.dtype = ADJ_FLOAT64, .batch = BATCH},
                                   &net));
  if (!net) return adj_test_finish(&t);
  ADJ_TEST_OK(&t, adj_network_init_uniform(net, 5));
  ADJ_TEST_OK(&t, adj_xent_layer_set_labels(adj_network_build_loss(net), (const int64_t[BATCH]){7, 2, 9}, BATCH));
  fc_run r;
  if (fc_run_begin(&t, &r, net)) fc_inject_stages(&t, &r);

  /* The optimizer's allocations, failing on the last rank only. */
  adj_optimizer *opt = (adj_optimizer *)&opt; /* must come back NULL */
  adj_clear_error();
  if (t.rank == t.size - 1) adj_fault_arm("optimizer create");
  int status = adj_optimizer_create(r.layer, &(adj_optimizer_config){.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = 1e-3},
                                    &opt);
  adj_fault_arm(NULL);
  char phrase[100];
  snprintf(phrase, sizeof phrase, "rank %d: optimizer create: injected failure", t.size - 1);
  adj_test_expect_error(&t, "optimizer create on the last rank", status, ADJ_ERR_MEM, phrase);
  ADJ_TEST_CHECK(&t, opt == NULL, "a failed adj_optimizer_create left an optimizer behind");
  adj_optimizer_destroy(&opt);
  adj_test_report(&t, "lenet5 %s on %d ranks: %d stages, %d failure sites, each alike on every rank", layout, t.size,
                  adj_network_depth(r.layer), r.sites + 1);
  fc_run_end(&r);
  return adj_test_finish(&t);
}

/* t434: a 3-d convolutional network on a domain-decomposed volume
 * (networks/conv3d.net: 1x8x8x8 volumes, two 3x3x3 convolutions and 2x2x2
 * pools, an fc head) trained on synthetic volumes and labels, float64, Adam,
 * at each shipped placement that uses the run's ranks (domain2: depth cut in
 * two; domain4: 2x2; domain8: 2x2x2) and sequentially, from the same global
 * parameters and batches: after every step the losses agree, and after the
 * last the gathered parameters, within the training tolerance of the longest
 * sum (the first convolution's weight gradient over the 8^3 output positions
 * of every sample).  Usage: t434-conv3d-domain NETWORKS_DIR. */
#include <math.h>
#include <string.h>

#include "net_check.h"

enum { BATCH = 4, STEPS = 5, SIDE = 8 };

typedef struct run3d {
  adj_layer *net;
  adj_optimizer *opt;
  adj_tensor x, y, dy;
} run3d;

static int run_create(const char *path, const char *placement, run3d *r) {
  *r = (run3d){0};
  adj_network_build_options o = {.dtype = ADJ_FLOAT64, .batch = BATCH};
  int status = adj_network_build_file(MPI_COMM_WORLD, path, placement, &o, &r->net);
  if (!status) status = adj_network_init_uniform(r->net, 434);
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = 1e-3};
  if (!status) status = adj_optimizer_create(r->net, &oc, &r->opt);
  if (!status) status = adj_layer_create_input(r->net, &r->x);
  if (!status) status = adj_layer_create_output(r->net, &r->y);
  if (!status) status = adj_layer_create_output(r->net, &r->dy);
  if (!status && adj_tensor_volume(&r->dy)) adj_tensor_set(&r->dy, 0, 1.0);
  return status;
}

static void run_destroy(run3d *r) {
  adj_optimizer_destroy(&r->opt);
  adj_layer_destroy(&r->net);
  adj_tensor_destroy(&r->x), adj_tensor_destroy(&r->y), adj_tensor_destroy(&r->dy);
}

/* One Adam step on the batch (the input whole on rank 0); the loss on rank 0. */
static int run_step(run3d *r, const adj_tensor *volumes, const int64_t *labels, double *loss) {
  int status = adj_tensor_volume(&r->x) ? adj_tensor_copy(&r->x, volumes) : ADJ_SUCCESS;
  if (!status) status = adj_xent_layer_set_labels(adj_network_build_loss(r->net), labels, BATCH);
  adj_layer_zero_grad(r->net);
  if (!status) status = adj_layer_forward(r->net, &r->x, &r->y);
  if (!status) status = adj_layer_backward(r->net, &r->dy, NULL);
  *loss = adj_xent_layer_loss(adj_network_build_loss(r->net));
  return status ? status : adj_optimizer_step(r->opt);
}

static void compare(adj_test *t, const char *path, const char *placement) {
  run3d seq, dist;
  ADJ_TEST_OK(t, run_create(path, "sequential", &seq));
  ADJ_TEST_OK(t, run_create(path, placement, &dist));
  adj_tensor volumes = {0};
  int64_t labels[BATCH];
  adj_rng *rng = NULL;
  ADJ_TEST_OK(t, adj_rng_create(4340, &rng));
  ADJ_TEST_OK(t, adj_tensor_create(&volumes, ADJ_FLOAT64, 5, (const int64_t[5]){BATCH, 1, SIDE, SIDE, SIDE}));
  double worst_loss = 0, loss_seq = 0, loss_dist = 0;
  for (int step = 0; seq.opt && dist.opt && rng && step < STEPS; step++) {
    adj_rng_fill_uniform(rng, &volumes, -1, 1);
    for (int i = 0; i < BATCH; i++) labels[i] = (int64_t)adj_rng_below(rng, 2);
    ADJ_TEST_OK(t, run_step(&seq, &volumes, labels, &loss_seq));
    ADJ_TEST_OK(t, run_step(&dist, &volumes, labels, &loss_dist));
    worst_loss = fmax(worst_loss, fabs(loss_dist - loss_seq) / fmax(1, fabs(loss_seq)));
  }
  bool bitwise = false;
  double diff = seq.opt && dist.opt ? nc_parameter_diff(dist.net, seq.net, &bitwise) : INFINITY;
  double tolerance = adj_test_training_tolerance(ADJ_FLOAT64, (double)BATCH * SIDE * SIDE * SIDE, STEPS);
  adj_test_report(t, "conv3d %-8s vs sequential, %d ranks, %d Adam steps of batch %d: parameters %.3e%s, losses %.3e "
                  "(last %.15f vs %.15f; tolerance %.1e)", placement, t->size, STEPS, BATCH, diff,
                  bitwise ? " (bitwise)" : "", worst_loss, loss_dist, loss_seq, tolerance);
  ADJ_TEST_CHECK(t, diff < tolerance, "%s: parameters differ by %.3e", placement, diff);
  ADJ_TEST_CHECK(t, t->rank != 0 || worst_loss < tolerance, "%s: losses differ by %.3e", placement, worst_loss);
  adj_rng_destroy(&rng);
  adj_tensor_destroy(&volumes);
  run_destroy(&dist);
  run_destroy(&seq);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t434-conv3d-domain");
  ADJ_TEST_CHECK(&t, argc >= 2, "usage: t434-conv3d-domain NETWORKS_DIR");
  if (argc < 2) return adj_test_finish(&t);
  char path[1024];
  snprintf(path, sizeof path, "%s/conv3d.net", argv[1]);
  static const char *const placements[] = {"domain2", "domain4", "domain8"};
  int ran = 0;
  for (int i = 0; i < 3; i++)
    if (adj_network_file_ranks(t.comm, path, placements[i], BATCH) == t.size) compare(&t, path, placements[i]), ran++;
  if (!ran) return adj_test_skip(&t, "no conv3d placement uses this many ranks (2, 4 or 8)");
  return adj_test_finish(&t);
}

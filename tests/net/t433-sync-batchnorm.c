/* t433: batch norm under data parallelism.  A small conv + batch norm
 * network trained with one sequential replica per rank (global batch split
 * over the replicas) against the same network trained on rank 0 alone on
 * the whole batch (float64, SGD, the same seeds):
 *  - synchronised (the builder's default with replicas): the parameters and
 *    the running statistics equal the single network's within the training
 *    tolerance, and every replica holds the same running statistics bit for
 *    bit;
 *  - per replica (per_replica_batchnorm): each replica normalises its own
 *    share, so the parameters and statistics part from the single network's
 *    by far more than that tolerance (the option is honoured).
 * Every figure is printed. */
#include <math.h>
#include <string.h>

#include "harness.h"

enum { GLOBAL = 8, STEPS = 4, SAMPLES = GLOBAL * STEPS };

static const char text[] = "network bn\ninput 1 8 8\nconv c out=4 k=3 p=1 bias=no\nbatchnorm\nrelu\n"
                           "pool k=2 s=2\nfc out=3\nloss type=xent\n";

typedef struct bn_run {
  adj_replicas *replicas;
  adj_layer *net;
  adj_optimizer *opt;
  adj_trainer *trainer;
} bn_run;

/* Trained for STEPS steps: with `replicas` > 1, one sequential replica per
 * rank; else the whole batch on rank 0. */
static int bn_train(int replicas, bool per_replica, adj_dataset *data, bn_run *r) {
  *r = (bn_run){0};
  adj_description *d = NULL;
  int status = adj_description_parse(text, "t433", &d);
  if (!status) status = adj_replicas_create(MPI_COMM_WORLD, replicas > 1 ? replicas : 1, &r->replicas);
  adj_network_build_options o = {.dtype = ADJ_FLOAT64, .batch = GLOBAL / (replicas > 1 ? replicas : 1),
                                 .replicas = replicas > 1 ? r->replicas : NULL, .per_replica_batchnorm = per_replica};
  MPI_Comm comm = replicas > 1 ? adj_replicas_model_comm(r->replicas) : MPI_COMM_WORLD;
  if (!status) status = adj_network_build(d, NULL, comm, &o, &r->net);
  adj_description_destroy(&d);
  if (!status) status = adj_network_init_uniform(r->net, 433);
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_SGD, .learning_rate = 0.1};
  if (!status) status = adj_optimizer_create(r->net, &oc, &r->opt);
  adj_trainer_config tc = {.network = r->net, .optimizer = r->opt, .train = data, .seed = 433,
                           .replicas = replicas > 1 ? r->replicas : NULL, .global_batch = GLOBAL};
  if (!status) status = adj_trainer_create(&tc, &r->trainer);
  adj_train_stats stats;
  if (!status) status = adj_trainer_run(r->trainer, STEPS, NULL, NULL, &stats);
  return status;
}

static void bn_destroy(bn_run *r) {
  adj_trainer_destroy(&r->trainer);
  adj_optimizer_destroy(&r->opt);
  adj_layer_destroy(&r->net);
  adj_replicas_destroy(&r->replicas);
}

/* This rank's parameters (it holds them all: its replica, or rank 0's
 * network, is sequential) and running statistics, flat, in order. */
static int bn_state(bn_run *r, double *out, int capacity) {
  int n = 0;
  for (int i = 0; i < adj_layer_parameter_count(r->net); i++) {
    adj_parameter *p = adj_layer_parameter(r->net, i);
    for (int64_t k = 0; k < adj_tensor_volume(&p->value) && n < capacity; k++) out[n++] = adj_tensor_get(&p->value, k);
  }
  for (int s = 0; s < adj_network_depth(r->net); s++) {
    adj_layer *stage = adj_network_layer(r->net, s);
    if (!adj_layer_is_batchnorm(stage)) continue;
    adj_tensor mean, var;
    adj_batchnorm_layer_running_stats(stage, &mean, &var);
    for (int64_t k = 0; k < adj_tensor_volume(&mean) && n + 1 < capacity; k++)
      out[n++] = adj_tensor_get(&mean, k), out[n++] = adj_tensor_get(&var, k);
  }
  return n;
}

static double bn_diff(const double *a, const double *b, int n) {
  double diff = 0, scale = 0;
  for (int i = 0; i < n; i++) diff = fmax(diff, fabs(a[i] - b[i])), scale = fmax(scale, fabs(b[i]));
  return scale > 0 ? diff / scale : diff;
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t433-sync-batchnorm");
  if (t.size < 2 || GLOBAL % t.size) return adj_test_skip(&t, "needs 2, 4 or 8 ranks (one replica each)");
  adj_dataset *data = NULL;
  ADJ_TEST_OK(&t, adj_dataset_random(SAMPLES, 3, (const int64_t[]){1, 8, 8}, 3, 433, &data));
  enum { CAP = 4096 };
  static double single[CAP], synced[CAP], separate[CAP], all[8 * CAP];
  bn_run r;
  int n = 0, m = 0, k = 0;
  ADJ_TEST_OK(&t, bn_train(1, false, data, &r));
  if (r.net) n = bn_state(&r, single, CAP);
  bn_destroy(&r);
  ADJ_TEST_OK(&t, bn_train(t.size, false, data, &r));
  if (r.net) m = bn_state(&r, synced, CAP);
  bn_destroy(&r);
  ADJ_TEST_OK(&t, bn_train(t.size, true, data, &r));
  if (r.net) k = bn_state(&r, separate, CAP);
  bn_destroy(&r);
  /* Every replica's synchronised state, compared bit for bit with replica 0's. */
  MPI_Allgather(synced, CAP, MPI_DOUBLE, all, CAP, MPI_DOUBLE, t.comm);
  int differing = 0;
  for (int q = 1; q < t.size; q++) differing += memcmp(all, all + (size_t)q * CAP, sizeof(double) * (size_t)m) != 0;
  ADJ_TEST_CHECK(&t, differing == 0, "%d replicas hold other parameters or running statistics than replica 0", differing);
  if (t.rank == 0) {
    double tolerance = adj_test_training_tolerance(ADJ_FLOAT64, (double)GLOBAL * 64, STEPS);
    double sync_diff = bn_diff(synced, single, n), separate_diff = bn_diff(separate, single, n);
    adj_test_report(&t, "%d replicas of batch %d vs one network of batch %d, %d SGD steps, float64: parameters and "
                    "running statistics differ by %.3e synchronised, %.3e per replica (tolerance %.1e)", t.size,
                    GLOBAL / t.size, GLOBAL, STEPS, sync_diff, separate_diff, tolerance);
    ADJ_TEST_CHECK(&t, n > 0 && m == n && k == n, "state sizes %d, %d, %d", n, m, k);
    ADJ_TEST_CHECK(&t, sync_diff < tolerance, "synchronised batch norm: %.3e from the single network", sync_diff);
    ADJ_TEST_CHECK(&t, separate_diff > 100 * tolerance, "per-replica batch norm is %.3e from the single network",
                   separate_diff);
  }
  adj_dataset_destroy(&data);
  return adj_test_finish(&t);
}

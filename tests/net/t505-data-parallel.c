/* t505: data-parallel LeNet-5 (every rank one sequential replica, and
 * dist2 x R replicas where the ranks allow) against the sequential run of
 * the same global batches:
 *  - after 1 and 20 SGD steps every replica's parameters equal the
 *    sequential ones within adj_test_training_tolerance of the workers'
 *    partial sums over the steps taken (float64 and float32);
 *    the global batch (10) does not divide evenly among 3, 4 or 8 replicas
 *    and the data set's short last batch leaves some replicas with 0 or 1
 *    samples, and two micro-batches per step accumulate before the reduction;
 *  - assert_sync: the parameter hashes are bit-identical on all replicas;
 *  - float64 parameters after 20 steps are bit-identical for bucket caps 0,
 *    1 MiB, 25 MiB and unlimited, and for reduction after the backward
 *    (with one bucket, and with one per parameter);
 *  - the trace of a step with one bucket per parameter: a bucket is posted
 *    before the backward of stage 0 starts, and exactly one wait comes
 *    between the last backward and the step; the counted bytes per step are
 *    the parameter bytes (payload) and 2 (R-1)/R times that in logical
 *    all-reduce volume;
 *  - bad input on every rank: a replica count that does not divide the
 *    ranks, a negative bucket cap, replicas that start from different
 *    parameters when they must agree. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "net_check.h"

enum { SAMPLES = 23, GLOBAL = 10, SEED = 505 };

typedef struct dp_run {
  adj_replicas *replicas;
  nc_run run;
} dp_run;

typedef struct dp_options {
  int replicas;
  const char *layout; /* of each replica; "mlp" for ShallowSpeed's MLP */
  int micro;
  const int64_t *caps;
  bool after_backward;
  bool require_equal;
  FILE *trace;
} dp_options;

/* LeNet-5 in a layout, or the sequential MLP, on comm with this batch. */
static int build(MPI_Comm comm, const char *layout, adj_dtype dtype, int64_t batch, adj_layer **net) {
  bool mlp = !strcmp(layout, "mlp");
  adj_network_build_options o = {.dtype = dtype, .batch = batch};
  return nc_build_network_on(comm, mlp ? "mlp" : "lenet", mlp ? "sequential" : layout, &o, net);
}

static adj_optimizer_config sgd(void) {
  return (adj_optimizer_config){.kind = ADJ_OPTIMIZER_SGD, .learning_rate = 0.05, .momentum = 0.5};
}

/* A replicated LeNet-5 whose every replica starts from `seed` (or, with
 * perturb, replica 1 from another seed). */
static int dp_create(const dp_options *o, adj_dtype dtype, adj_dataset *data, bool perturb, dp_run *d) {
  *d = (dp_run){0};
  int status = adj_replicas_create(MPI_COMM_WORLD, o->replicas, &d->replicas);
  if (status) return status;
  int micro = o->micro ? o->micro : 1;
  int64_t share = (GLOBAL + o->replicas * micro - 1) / (o->replicas * micro);
  status = build(adj_replicas_model_comm(d->replicas), o->layout, dtype, share, &d->run.net);
  uint64_t seed = SEED + (perturb && adj_replicas_index(d->replicas) == 1);
  if (!status) status = adj_network_init_uniform(d->run.net, seed);
  adj_optimizer_config oc = sgd();
  if (!status) status = adj_optimizer_create(d->run.net, &oc, &d->run.opt);
  adj_trainer_config tc = {.network = d->run.net, .optimizer = d->run.opt, .train = data, .seed = SEED,
                           .replicas = d->replicas, .micro_batches = micro, .global_batch = GLOBAL,
                           .bucket_caps = o->caps, .reduce_after_backward = o->after_backward,
                           .require_equal_start = o->require_equal, .trace = o->trace};
  if (!status) status = adj_trainer_create(&tc, &d->run.trainer);
  return status;
}

static void dp_destroy(dp_run *d) {
  nc_run_destroy(&d->run);
  adj_replicas_destroy(&d->replicas);
}

/* The sequential reference on this rank alone. */
static int seq_create(const char *layout, adj_dtype dtype, adj_dataset *data, nc_run *r) {
  *r = (nc_run){0};
  int status = build(MPI_COMM_SELF, strcmp(layout, "mlp") ? "sequential" : "mlp", dtype, GLOBAL, &r->net);
  if (!status) status = adj_network_init_uniform(r->net, SEED);
  adj_optimizer_config oc = sgd();
  if (!status) status = adj_optimizer_create(r->net, &oc, &r->opt);
  adj_trainer_config tc = {.network = r->net, .optimizer = r->opt, .train = data, .seed = SEED};
  if (!status) status = adj_trainer_create(&tc, &r->trainer);
  return status;
}

/* Runs `steps` steps across epoch boundaries. */
static int train_steps(adj_trainer *t, int64_t steps) {
  adj_train_stats stats;
  while (steps > 0) {
    int64_t left = adj_trainer_batches_per_epoch(t) - adj_trainer_batch(t);
    int64_t now = left < steps ? left : steps;
    int status = adj_trainer_run(t, now, NULL, NULL, &stats);
    if (status) return status;
    steps -= now;
  }
  return ADJ_SUCCESS;
}

/* Max relative difference of the replica's parameters (gathered on its
 * model rank 0) from the sequential reference; other ranks report 0. */
static double replica_diff(adj_layer *net, adj_layer *ref, bool *bitwise) {
  int mrank;
  MPI_Comm_rank(adj_layer_comm(net), &mrank);
  double worst = 0;
  *bitwise = true;
  for (int i = 0; i < adj_layer_parameter_count(net); i++) {
    const adj_parameter *p = adj_layer_parameter(net, i);
    int64_t zeros[ADJ_MAX_RANK] = {0};
    adj_tensor whole = {0};
    adj_tensor_create(&whole, adj_layer_dtype(net), adj_decomposition_rank(p->layout),
                      mrank == 0 ? adj_decomposition_global_shape(p->layout) : zeros);
    adj_layer_get_parameter(net, i, 0, &whole);
    if (mrank == 0) {
      const adj_tensor *r = &adj_layer_parameter(ref, i)->value;
      worst = fmax(worst, adj_test_max_rel_diff(&whole, r));
      *bitwise = *bitwise && !memcmp(whole.data, r->data, adj_tensor_bytes(r));
    }
    adj_tensor_destroy(&whole);
  }
  double all;
  MPI_Allreduce(&worst, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return all;
}

/* Every rank's flat parameters, for bit comparisons between runs. */
static void *flat_copy(adj_layer *net, size_t *bytes) {
  adj_tensor v, g;
  adj_network_flat_parameters(net, &v, &g);
  *bytes = adj_tensor_bytes(&v);
  void *copy = malloc(*bytes + 1);
  memcpy(copy, v.data, *bytes);
  return copy;
}

static void check_consistency(adj_test *t, adj_dataset *data, const dp_options *o, adj_dtype dtype) {
  /* Each step's gradient adds up the partial sums of every worker. */
  int workers = t->size;
  dp_run d;
  nc_run ref;
  ADJ_TEST_OK(t, dp_create(o, dtype, data, false, &d));
  ADJ_TEST_OK(t, seq_create(o->layout, dtype, data, &ref));
  if (!d.run.trainer || !ref.trainer) {
    dp_destroy(&d), nc_run_destroy(&ref);
    return;
  }
  int64_t done = 0;
  const int64_t marks[] = {1, 20};
  for (size_t k = 0; k < 2; k++) {
    ADJ_TEST_OK(t, train_steps(d.run.trainer, marks[k] - done));
    ADJ_TEST_OK(t, train_steps(ref.trainer, marks[k] - done));
    done = marks[k];
    /* Each step's gradient adds up the partial sums of every worker. */
    double tolerance = adj_test_training_tolerance(dtype, workers, (int)done);
    bool bitwise;
    double diff = replica_diff(d.run.net, ref.net, &bitwise);
    uint64_t hash = 0;
    int sync = adj_trainer_check_sync(d.run.trainer, &hash);
    ADJ_TEST_OK(t, sync);
    adj_test_report(t, "  %d x %-10s %s, %d micro-batch%s, %2lld steps: max rel diff from sequential %.3e "
                    "(tolerance %.1e); replicas in sync: %s (hash %016llx)",
                    o->replicas, o->layout, adj_dtype_name(dtype), o->micro ? o->micro : 1,
                    o->micro > 1 ? "es" : "", (long long)done, diff, tolerance, sync ? "NO" : "yes",
                    (unsigned long long)hash);
    ADJ_TEST_CHECK(t, diff <= tolerance, "%d x %s %s after %lld steps: parameters differ from sequential by %.3e",
                   o->replicas, o->layout, adj_dtype_name(dtype), (long long)done, diff);
  }
  dp_destroy(&d);
  nc_run_destroy(&ref);
}

/* float64, 20 steps: caps and the after-backward baseline, bit for bit. */
static void check_caps(adj_test *t, adj_dataset *data, int replicas) {
  const int64_t caps[][2] = {{0, 0}, {1 << 20, 1 << 20}, {1 << 20, 25 << 20}, {ADJ_REDUCER_UNLIMITED, ADJ_REDUCER_UNLIMITED}};
  const char *names[] = {"0", "1 MiB", "1 MiB / 25 MiB", "unlimited", "unlimited, after the backward",
                         "0, after the backward"};
  void *first = NULL;
  size_t first_bytes = 0;
  for (int c = 0; c < 6; c++) {
    /* The after-backward baseline once with one bucket and once with one per
     * parameter, the cut the overlapped runs post during the backward. */
    dp_options o = {.replicas = replicas, .layout = "sequential", .caps = caps[c < 4 ? c : c == 4 ? 3 : 0],
                    .after_backward = c >= 4};
    dp_run d;
    ADJ_TEST_OK(t, dp_create(&o, ADJ_FLOAT64, data, false, &d));
    if (!d.run.trainer) {
      dp_destroy(&d);
      continue;
    }
    ADJ_TEST_OK(t, train_steps(d.run.trainer, 20));
    size_t bytes;
    void *mine = flat_copy(d.run.net, &bytes);
    int buckets = adj_gradient_reducer_buckets(adj_trainer_reducer(d.run.trainer));
    if (!first) {
      first = mine, first_bytes = bytes;
      adj_test_report(t, "  %d replicas, float64, cap %-30s %2d buckets (reference)", replicas, names[c], buckets);
      dp_destroy(&d);
      continue;
    }
    int same = bytes == first_bytes && !memcmp(mine, first, bytes), all;
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    adj_test_report(t, "  %d replicas, float64, cap %-30s %2d buckets: bit-identical to cap 0: %s", replicas,
                    names[c], buckets, all ? "yes" : "NO");
    ADJ_TEST_CHECK(t, same, "cap %s: parameters differ in bits from cap 0 after 20 steps", names[c]);
    free(mine);
    dp_destroy(&d);
  }
  free(first);
}

/* One step traced on world rank 0 with one bucket per parameter. */
static void check_trace(adj_test *t, adj_dataset *data, int replicas) {
  const int64_t caps[2] = {0, 0};
  FILE *trace = t->rank == 0 ? tmpfile() : NULL;
  dp_options o = {.replicas = replicas, .layout = "sequential", .caps = caps, .trace = trace};
  dp_run d;
  ADJ_TEST_OK(t, dp_create(&o, ADJ_FLOAT32, data, false, &d));
  if (!d.run.trainer) {
    dp_destroy(&d);
    if (trace) fclose(trace);
    return;
  }
  adj_train_stats stats;
  ADJ_TEST_OK(t, adj_trainer_run(d.run.trainer, 1, NULL, NULL, &stats));
  adj_tensor v, g;
  adj_network_flat_parameters(d.run.net, &v, &g);
  uint64_t parameter_bytes = adj_tensor_bytes(&v);
  uint64_t expect = replicas > 1 ? parameter_bytes : 0;
  int buckets = adj_gradient_reducer_buckets(adj_trainer_reducer(d.run.trainer));
  double factor = 2.0 * (replicas - 1) / replicas;
  adj_reducer_counters c;
  adj_gradient_reducer_get_counters(adj_trainer_reducer(d.run.trainer), &c);
  adj_test_report(t, "  %d replicas, one step: %llu bytes in %llu messages reduced (parameters %llu bytes, %d "
                  "buckets), logical volume %.0f B = %.3f x parameters, wait %.3f ms",
                  replicas, (unsigned long long)stats.reduced_bytes, (unsigned long long)stats.reduced_messages,
                  (unsigned long long)parameter_bytes, buckets, c.logical_bytes,
                  parameter_bytes ? c.logical_bytes / (double)parameter_bytes : 0, 1e3 * stats.reduce_wait_seconds);
  ADJ_TEST_CHECK(t, stats.reduced_bytes == expect && stats.reduced_messages == (replicas > 1 ? (uint64_t)buckets : 0),
                 "counted %llu bytes in %llu messages, expected %llu in %d", (unsigned long long)stats.reduced_bytes,
                 (unsigned long long)stats.reduced_messages, (unsigned long long)expect, replicas > 1 ? buckets : 0);
  ADJ_TEST_CHECK(t, fabs(c.logical_bytes - factor * (double)expect) < 0.5, "logical volume %.1f, expected %.1f",
                 c.logical_bytes, factor * (double)expect);
  if (trace) {
    rewind(trace);
    char line[160], event[64];
    double when;
    long long arg;
    int order = 0, first_post = -1, first_b0 = -1, waits = 0, last_backward_end = -1, wait_at = -1, step_at = -1;
    while (fgets(line, sizeof line, trace) && sscanf(line, "%lf %63s %lld", &when, event, &arg) == 3) {
      if (!strcmp(event, "bucket_posted") && first_post < 0) first_post = order;
      if (!strcmp(event, "backward_begin") && arg == 0 && first_b0 < 0) first_b0 = order;
      if (!strcmp(event, "backward_end")) last_backward_end = order;
      if (!strcmp(event, "wait_begin")) waits++, wait_at = order;
      if (!strcmp(event, "step")) step_at = order;
      order++;
    }
    adj_test_report(t, "  trace (%d events): first bucket posted at event %d, backward of stage 0 begins at %d; "
                    "%d wait(s), at %d, between the last backward end (%d) and the step (%d)",
                    order, first_post, first_b0, waits, wait_at, last_backward_end, step_at);
    ADJ_TEST_CHECK(t, first_post >= 0 && first_post < first_b0,
                   "trace: first bucket posted at event %d, not before stage 0's backward (%d)", first_post, first_b0);
    ADJ_TEST_CHECK(t, waits == 1 && last_backward_end < wait_at && wait_at < step_at,
                   "trace: %d waits; wait at %d, last backward end %d, step %d", waits, wait_at, last_backward_end,
                   step_at);
    fclose(trace);
  }
  dp_destroy(&d);
}

/* Fails on this rank with a message naming the bad value. */
static void check_error_all(adj_test *t, int status, const char *needle, const char *what) {
  const char *message = adj_last_error();
  ADJ_TEST_CHECK(t, status != 0 && strstr(message, needle), "%s: status %d, message '%s' lacks '%s'", what, status,
                 message, needle);
}

static void check_errors(adj_test *t, adj_dataset *data) {
  adj_replicas *r = NULL;
  char needle[96];
  snprintf(needle, sizeof needle, "%d ranks do not divide into %d replicas", t->size, t->size + 1);
  check_error_all(t, adj_replicas_create(MPI_COMM_WORLD, t->size + 1, &r), needle, "replicas = ranks + 1");
  ADJ_TEST_CHECK(t, r == NULL, "a failed replica split left an object behind");
  const int64_t negative[2] = {1 << 20, -3};
  dp_options o = {.replicas = t->size, .layout = "sequential", .caps = negative};
  dp_run d;
  check_error_all(t, dp_create(&o, ADJ_FLOAT32, data, false, &d), "bucket cap -3 bytes is negative", "cap -3");
  dp_destroy(&d);
  if (t->size >= 2) {
    dp_options equal = {.replicas = t->size, .layout = "sequential", .require_equal = true};
    check_error_all(t, dp_create(&equal, ADJ_FLOAT32, data, true, &d), "replica 1 holds parameters that differ",
                    "replica 1 initialised from another seed");
    dp_destroy(&d);
    /* Without the requirement the trainer takes replica 0's parameters. */
    dp_options bcast = {.replicas = t->size, .layout = "sequential"};
    ADJ_TEST_OK(t, dp_create(&bcast, ADJ_FLOAT32, data, true, &d));
    if (d.run.trainer) ADJ_TEST_OK(t, adj_trainer_check_sync(d.run.trainer, NULL));
    dp_destroy(&d);
  }
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t505-data-parallel");
  /* The checks compare arithmetic, not speed: one kernel and one BLAS thread
   * per rank, so thread teams do not spin against each other (and against
   * the reference replica on every rank) on a shared 2-core host. */
  adj_threads_set(1);
  openblas_set_num_threads(1);
  adj_dataset *data = nc_synthetic(SAMPLES, SEED);
  adj_test_report(&t, "LeNet-5, %d samples, global batch %d, SGD lr 0.05 momentum 0.5, %d ranks", SAMPLES, GLOBAL,
                  t.size);
  dp_options pure = {.replicas = t.size, .layout = "sequential"};
  check_consistency(&t, data, &pure, ADJ_FLOAT64);
  check_consistency(&t, data, &pure, ADJ_FLOAT32);
  dp_options micro = {.replicas = t.size, .layout = "sequential", .micro = 2};
  check_consistency(&t, data, &micro, ADJ_FLOAT64);
  dp_options mlp = {.replicas = t.size, .layout = "mlp"};
  check_consistency(&t, data, &mlp, ADJ_FLOAT64);
  check_consistency(&t, data, &mlp, ADJ_FLOAT32);
  if (t.size % 2 == 0 && t.size >= 4) {
    dp_options hybrid = {.replicas = t.size / 2, .layout = "dist2"};
    check_consistency(&t, data, &hybrid, ADJ_FLOAT64);
  }
  check_caps(&t, data, t.size);
  check_trace(&t, data, t.size);
  check_errors(&t, data);
  adj_dataset_destroy(&data);
  return adj_test_finish(&t);
}

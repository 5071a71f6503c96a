/* t542: Fashion-MNIST converted by tools/idx-to-arrays.py equals the IDX files
 * it came from, sample by sample, and trains identically.
 *
 * Arguments: the IDX directory, a directory of .npy files (uint8 inputs) and
 * one of HDF5 files (float32 inputs), or "-" where the build has no HDF5
 * (the driver t542-array-sources.py converts them).  First every sample of
 * both splits, each rank comparing its share in chunks, float32 bit for bit,
 * labels exactly.  Then LeNet-5 in the layout the rank count allows trains
 * one epoch of a 512-sample slice from each source with the same seed: the
 * loss of every batch, the final parameters and the evaluation on a test
 * slice must be bit-identical to the IDX run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_check.h"

enum { CHUNK = 500, TRAIN = 512, TEST = 256, BATCH = 64, MAX_BATCHES = TRAIN / BATCH };

static const char *const source_names[3] = {"IDX", ".npy", "HDF5"};

static int open_split(adj_test *t, const char *dir, const char *split, adj_dataset **ds) {
  int status = adj_dataset_open_dir(t->comm, dir, split, 10, ds);
  ADJ_TEST_OK(t, status);
  if (!status) ADJ_TEST_OK(t, adj_dataset_set_input_shape(*ds, 3, (const int64_t[]){1, 28, 28}));
  return status;
}

/* Samples [first, first + n) of a and b: inputs bitwise, labels equal.
 * Returns the samples that differ. */
static int64_t compare_chunk(adj_test *t, adj_dataset *a, adj_dataset *b, int64_t first, int64_t n, adj_tensor *xa,
                             adj_tensor *xb) {
  static int64_t indices[CHUNK], la[CHUNK], lb[CHUNK];
  for (int64_t i = 0; i < n; i++) indices[i] = first + i;
  adj_box box = adj_box_whole(4, xa->shape);
  ADJ_TEST_OK(t, adj_dataset_read_inputs(a, indices, n, &box, xa));
  ADJ_TEST_OK(t, adj_dataset_read_inputs(b, indices, n, &box, xb));
  ADJ_TEST_OK(t, adj_dataset_read_labels(a, indices, n, 0, n, la));
  ADJ_TEST_OK(t, adj_dataset_read_labels(b, indices, n, 0, n, lb));
  int64_t differ = 0;
  for (int64_t i = 0; i < n; i++)
    differ += la[i] != lb[i] || memcmp((const float *)xa->data + i * 784, (const float *)xb->data + i * 784,
                                       784 * sizeof(float)) != 0;
  return differ;
}

/* Every sample of one split of `other` against the IDX set; this rank takes
 * every size-th chunk. */
static void compare_split(adj_test *t, const char *idx, const char *other, const char *split, const char *name) {
  adj_dataset *a = NULL, *b = NULL;
  if (open_split(t, idx, split, &a) || open_split(t, other, split, &b)) {
    adj_dataset_destroy(&a);
    return;
  }
  int64_t n = adj_dataset_count(a), differ = 0, compared = 0;
  ADJ_TEST_CHECK(t, adj_dataset_count(b) == n, "%s %s: %lld samples, IDX has %lld", name, split,
                 (long long)adj_dataset_count(b), (long long)n);
  adj_tensor xa, xb;
  ADJ_TEST_OK(t, adj_tensor_create(&xa, ADJ_FLOAT32, 4, (const int64_t[]){CHUNK, 1, 28, 28}));
  ADJ_TEST_OK(t, adj_tensor_create(&xb, ADJ_FLOAT32, 4, (const int64_t[]){CHUNK, 1, 28, 28}));
  for (int64_t first = (int64_t)t->rank * CHUNK; first < n && adj_dataset_count(b) == n; first += (int64_t)t->size * CHUNK) {
    int64_t count = n - first < CHUNK ? n - first : CHUNK;
    differ += compare_chunk(t, a, b, first, count, &xa, &xb);
    compared += count;
  }
  long long mine[2] = {compared, differ}, all[2];
  MPI_Allreduce(mine, all, 2, MPI_LONG_LONG, MPI_SUM, t->comm);
  ADJ_TEST_CHECK(t, all[0] == n && all[1] == 0, "%s %s: %lld of %lld samples compared, %lld differ", name, split,
                 all[0], (long long)n, all[1]);
  adj_test_report(t, "%-5s %-5s: %lld of %lld samples equal the IDX set (inputs bit for bit, labels)", name, split,
                  all[0] - all[1], (long long)n);
  adj_tensor_destroy(&xa), adj_tensor_destroy(&xb);
  adj_dataset_destroy(&a), adj_dataset_destroy(&b);
}

/* ---- training ----------------------------------------------------------------------------- */

typedef struct run_losses {
  double loss[MAX_BATCHES];
  int64_t batches;
} run_losses;

static void record(void *ctx, int64_t batch, int64_t batches, double loss) {
  run_losses *r = ctx;
  (void)batches;
  if (batch >= 1 && batch <= MAX_BATCHES) r->loss[batch - 1] = loss, r->batches = batch;
}

/* One epoch of the training slice and an evaluation of the test slice. */
static int train_source(adj_test *t, const char *dir, const char *layout, nc_run *run, run_losses *losses,
                        adj_train_stats *test_stats) {
  adj_dataset *train = NULL, *test = NULL;
  int status = open_split(t, dir, "train", &train);
  if (!status) status = open_split(t, dir, "test", &test);
  if (!status) status = adj_dataset_limit(train, TRAIN) || adj_dataset_limit(test, TEST);
  if (!status) status = nc_run_create(layout, ADJ_FLOAT32, BATCH, train, 542, run);
  adj_train_stats stats;
  *losses = (run_losses){0};
  if (!status) status = adj_trainer_run(run->trainer, -1, record, losses, &stats);
  if (!status) status = adj_trainer_evaluate(run->trainer, test, test_stats);
  ADJ_TEST_OK(t, status);
  adj_dataset_destroy(&train), adj_dataset_destroy(&test);
  return status;
}

static void compare_training(adj_test *t, const char *dirs[3]) {
  const char *layouts[NC_MAX_LAYOUTS];
  int fitting = nc_layouts_fitting(t->size, layouts);
  const char *layout = layouts[fitting - 1];
  nc_run runs[3] = {{0}};
  run_losses losses[3];
  adj_train_stats test[3];
  for (int s = 0; s < 3; s++)
    if (dirs[s] && train_source(t, dirs[s], layout, &runs[s], &losses[s], &test[s])) dirs = NULL;
  for (int s = 1; dirs && s < 3; s++) {
    if (!dirs[s]) continue;
    bool bitwise = false;
    double diff = nc_parameter_diff(runs[0].net, runs[s].net, &bitwise);
    bool same_losses = losses[s].batches == losses[0].batches &&
                       !memcmp(losses[s].loss, losses[0].loss, sizeof(double) * (size_t)losses[0].batches);
    bool same_test = test[s].loss == test[0].loss && test[s].correct == test[0].correct;
    ADJ_TEST_CHECK(t, t->rank != 0 || (same_losses && bitwise && same_test),
                   "%s run in %s: losses equal %d, parameters bitwise %d (max rel diff %.3g), test loss %.17g vs %.17g",
                   source_names[s], layout, same_losses, bitwise, diff, test[s].loss, test[0].loss);
    adj_test_report(t, "%-5s %s: %lld batch losses (last %.9f), parameters and test loss %.9f (%lld of %d right) "
                    "bit-identical to the IDX run: %s", source_names[s], layout, (long long)losses[s].batches,
                    losses[s].loss[losses[s].batches ? losses[s].batches - 1 : 0], test[s].loss,
                    (long long)test[s].correct, TEST, same_losses && bitwise && same_test ? "yes" : "no");
  }
  for (int s = 0; s < 3; s++) nc_run_destroy(&runs[s]);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t542-array-sources");
  if (argc != 4) {
    ADJ_TEST_CHECK(&t, 0, "usage: %s IDX_DIR NPY_DIR HDF5_DIR|-", argv[0]);
    return adj_test_finish(&t);
  }
  const char *dirs[3] = {argv[1], argv[2], strcmp(argv[3], "-") ? argv[3] : NULL};
  for (int s = 1; s < 3; s++)
    if (dirs[s]) {
      compare_split(&t, dirs[0], dirs[s], "train", source_names[s]);
      compare_split(&t, dirs[0], dirs[s], "test", source_names[s]);
    }
  compare_training(&t, dirs);
  return adj_test_finish(&t);
}

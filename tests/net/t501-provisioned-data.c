/* The data sets tools/provision-data.sh writes: counts, a per-class split that
 * follows the documented rule, and pixel statistics of real digits and clothes.
 * Arguments: the MNIST directory, then the Fashion-MNIST directory.  Skipped
 * (77) when the MNIST directory does not exist; Fashion-MNIST is checked when
 * present. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

enum { CLASSES = 10 };

typedef struct expected_set {
  const char *name;
  int64_t train, test; /* sample counts */
  double mean;         /* mean pixel value of the training images, in [0, 1] */
} expected_set;

static double mean_pixel(const adj_dataset *ds) {
  const float *x = ds->images.data;
  int64_t n = adj_tensor_volume(&ds->images);
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += x[i];
  return sum / (double)n;
}

static void histogram(const adj_dataset *ds, int64_t counts[CLASSES]) {
  memset(counts, 0, CLASSES * sizeof *counts);
  for (int64_t i = 0; i < ds->count; i++) counts[ds->labels[i]]++;
}

/* Each class is split in the same proportion as the whole (stratified), to the
 * nearest sample, and no class is far from a tenth of the set. */
static void check_split(adj_test *t, const expected_set *e, const adj_dataset *train, const adj_dataset *test) {
  int64_t tr[CLASSES], te[CLASSES];
  histogram(train, tr);
  histogram(test, te);
  double fraction = (double)e->train / (double)(e->train + e->test);
  adj_test_report(t, "%s  class:  train  test", e->name);
  for (int c = 0; c < CLASSES; c++) {
    adj_test_report(t, "%s  %5d:  %5lld %5lld", e->name, c, (long long)tr[c], (long long)te[c]);
    int64_t rule = (int64_t)floor(fraction * (double)(tr[c] + te[c]) + 0.5);
    ADJ_TEST_CHECK(t, tr[c] == rule, "%s class %d: %lld train samples, the split rule gives %lld", e->name, c,
                   (long long)tr[c], (long long)rule);
    ADJ_TEST_CHECK(t, fabs((double)tr[c] - (double)e->train / CLASSES) < 0.25 * (double)e->train / CLASSES,
                   "%s class %d: %lld train samples is far from a tenth of %lld", e->name, c, (long long)tr[c],
                   (long long)e->train);
  }
}

static void check_set(adj_test *t, const char *dir, const expected_set *e) {
  adj_dataset *train = NULL, *test = NULL;
  ADJ_TEST_OK(t, adj_dataset_load_dir(t->comm, dir, "train", CLASSES, &train));
  ADJ_TEST_OK(t, adj_dataset_load_dir(t->comm, dir, "test", CLASSES, &test));
  if (train && test) {
    ADJ_TEST_CHECK(t, train->count == e->train && test->count == e->test, "%s: %lld train and %lld test samples, expected %lld and %lld",
                   e->name, (long long)train->count, (long long)test->count, (long long)e->train, (long long)e->test);
    ADJ_TEST_CHECK(t, train->rows == 28 && train->cols == 28 && test->rows == 28 && test->cols == 28,
                   "%s: images are not 28 x 28", e->name);
    double mean = mean_pixel(train);
    adj_test_report(t, "%s: %lld train, %lld test, mean training pixel %.4f (expected about %.4f)", e->name,
                    (long long)train->count, (long long)test->count, mean, e->mean);
    ADJ_TEST_CHECK(t, fabs(mean - e->mean) < 0.01, "%s: mean pixel %.4f, expected about %.4f", e->name, mean, e->mean);
    check_split(t, e, train, test);
  }
  adj_dataset_destroy(&train);
  adj_dataset_destroy(&test);
}

/* Whether rank 0 sees the directory, agreed so every rank takes the same path. */
static int exists_on_root(adj_test *t, const char *dir) {
  int found = t->rank == 0 && access(dir, R_OK) == 0;
  MPI_Bcast(&found, 1, MPI_INT, 0, t->comm);
  return found;
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t501-provisioned-data");
  if (argc != 3) {
    ADJ_TEST_CHECK(&t, 0, "usage: %s MNIST_DIR FASHION_MNIST_DIR", argv[0]);
    return adj_test_finish(&t);
  }
  if (!exists_on_root(&t, argv[1])) {
    char why[1200];
    snprintf(why, sizeof why, "no MNIST in %s: provision it with `sh tools/provision-data.sh mnist`", argv[1]);
    return adj_test_skip(&t, why);
  }
  /* MNIST's pixel mean over its 70,000 digits is 0.1307 and Fashion-MNIST's is
   * 0.2860; a scaling or byte-order slip moves these far more than 0.01. */
  check_set(&t, argv[1], &(expected_set){"mnist", 8000, 2000, 0.1307});
  if (exists_on_root(&t, argv[2]))
    check_set(&t, argv[2], &(expected_set){"fashion-mnist", 60000, 10000, 0.2860});
  else
    adj_test_report(&t, "no %s: Fashion-MNIST not checked (`sh tools/provision-data.sh fashion-mnist` provisions it)", argv[2]);
  return adj_test_finish(&t);
}

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

enum { CHUNK = 1000 };

/* The mean pixel and the class histogram, read through the data set in
 * chunks of consecutive samples. */
static double scan(adj_test *t, adj_dataset *ds, int64_t counts[CLASSES]) {
  static int64_t indices[CHUNK], labels[CHUNK];
  adj_tensor x;
  ADJ_TEST_OK(t, adj_tensor_create(&x, ADJ_FLOAT32, 3, (const int64_t[]){CHUNK, 28, 28}));
  memset(counts, 0, CLASSES * sizeof *counts);
  double sum = 0.0;
  int64_t n = adj_dataset_count(ds);
  adj_box box = adj_box_whole(3, x.shape);
  for (int64_t first = 0; first < n && x.data; first += CHUNK) {
    int64_t count = n - first < CHUNK ? n - first : CHUNK;
    for (int64_t i = 0; i < count; i++) indices[i] = first + i;
    ADJ_TEST_OK(t, adj_dataset_read_inputs(ds, indices, count, &box, &x));
    ADJ_TEST_OK(t, adj_dataset_read_labels(ds, indices, count, 0, count, labels));
    for (int64_t i = 0; i < count * 784; i++) sum += ((const float *)x.data)[i];
    for (int64_t i = 0; i < count; i++) counts[labels[i]]++;
  }
  adj_tensor_destroy(&x);
  return sum / (double)(n * 784);
}

/* Each class is split in the same proportion as the whole (stratified), to the
 * nearest sample, and no class is far from a tenth of the set. */
static void check_split(adj_test *t, const expected_set *e, const int64_t tr[CLASSES], const int64_t te[CLASSES]) {
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
  ADJ_TEST_OK(t, adj_dataset_open_dir(t->comm, dir, "train", CLASSES, &train));
  ADJ_TEST_OK(t, adj_dataset_open_dir(t->comm, dir, "test", CLASSES, &test));
  static const int64_t side[2] = {28, 28};
  if (train && test) {
    int64_t n_train = adj_dataset_count(train), n_test = adj_dataset_count(test);
    ADJ_TEST_CHECK(t, n_train == e->train && n_test == e->test, "%s: %lld train and %lld test samples, expected %lld "
                   "and %lld", e->name, (long long)n_train, (long long)n_test, (long long)e->train, (long long)e->test);
    ADJ_TEST_CHECK(t, adj_dataset_input_rank(train) == 2 && !memcmp(adj_dataset_input_shape(train), side, sizeof side) &&
                          adj_dataset_input_rank(test) == 2 && !memcmp(adj_dataset_input_shape(test), side, sizeof side),
                   "%s: images are not 28 x 28", e->name);
    int64_t tr[CLASSES], te[CLASSES];
    double mean = scan(t, train, tr);
    scan(t, test, te);
    adj_test_report(t, "%s: %lld train, %lld test, mean training pixel %.4f (expected about %.4f)", e->name,
                    (long long)n_train, (long long)n_test, mean, e->mean);
    ADJ_TEST_CHECK(t, fabs(mean - e->mean) < 0.01, "%s: mean pixel %.4f, expected about %.4f", e->name, mean, e->mean);
    check_split(t, e, tr, te);
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

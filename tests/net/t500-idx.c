/* IDX data sets: write/read round trips (raw and gzip), directory lookup,
 * batches from a seeded permutation, and malformed files that must fail with
 * the same message on every rank. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* A small set with non-square images, so swapped rows and cols would show. */
enum { N = 5, ROWS = 3, COLS = 4, CLASSES = 10 };

static uint8_t pixel(int64_t i) { return (uint8_t)(i * 37 % 256); }

/* Only rank 0 touches the file system: the loader reads on rank 0 alone. */
static void write_set(adj_test *t, const char *dir, const char *prefix, int n_images, int n_labels, int bad_label,
                      bool gzip) {
  if (t->rank != 0) return;
  uint8_t images[N * ROWS * COLS], labels[N + 1];
  for (int64_t i = 0; i < N * ROWS * COLS; i++) images[i] = pixel(i);
  for (int i = 0; i <= N; i++) labels[i] = (uint8_t)((i * 3) % CLASSES);
  if (bad_label >= 0) labels[bad_label] = CLASSES;
  char path[512];
  snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte%s", dir, prefix, gzip ? ".gz" : "");
  ADJ_TEST_OK(t, adj_idx_write_ubyte(path, 3, (int64_t[]){n_images, ROWS, COLS}, images, gzip));
  snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte%s", dir, prefix, gzip ? ".gz" : "");
  ADJ_TEST_OK(t, adj_idx_write_ubyte(path, 1, (int64_t[]){n_labels}, labels, gzip));
}

static void check_contents(adj_test *t, const adj_dataset *ds, const char *what) {
  ADJ_TEST_CHECK(t, ds->count == N && ds->rows == ROWS && ds->cols == COLS && ds->n_classes == CLASSES,
                 "%s: count %lld rows %lld cols %lld", what, (long long)ds->count, (long long)ds->rows,
                 (long long)ds->cols);
  const int64_t shape[4] = {N, 1, ROWS, COLS};
  ADJ_TEST_CHECK(t, ds->images.dtype == ADJ_FLOAT32 && ds->images.rank == 4 && !memcmp(ds->images.shape, shape, sizeof shape),
                 "%s: image tensor is not float32 (5, 1, 3, 4)", what);
  int bad = 0;
  for (int64_t i = 0; i < N * ROWS * COLS; i++) bad += ((float *)ds->images.data)[i] != (float)pixel(i) / 255.0f;
  for (int i = 0; i < N; i++) bad += ds->labels[i] != (i * 3) % CLASSES;
  ADJ_TEST_CHECK(t, bad == 0, "%s: %d pixels or labels differ from what was written", what, bad);
}

/* The first bytes of a written file: raw IDX starts with its magic, gzip with 1f 8b. */
static void check_file_starts(adj_test *t, const char *path, const uint8_t *magic) {
  if (t->rank != 0) return;
  uint8_t head[4] = {0};
  FILE *f = fopen(path, "rb");
  size_t got = f ? fread(head, 1, 4, f) : 0;
  if (f) fclose(f);
  ADJ_TEST_CHECK(t, got == 4 && !memcmp(head, magic, magic[0] == 0x1f ? 2 : 4),
                 "%s starts with %02x %02x %02x %02x", path, head[0], head[1], head[2], head[3]);
}

static void test_round_trip(adj_test *t, const char *dir) {
  write_set(t, dir, "raw", N, N, -1, false);
  write_set(t, dir, "gz", N, N, -1, true);
  char images[512], labels[512];
  for (int gzip = 0; gzip <= 1; gzip++) {
    const char *prefix = gzip ? "gz" : "raw", *suffix = gzip ? ".gz" : "";
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte%s", dir, prefix, suffix);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte%s", dir, prefix, suffix);
    check_file_starts(t, images, gzip ? (const uint8_t[]){0x1f, 0x8b} : (const uint8_t[]){0, 0, 8, 3});
    adj_dataset *ds = NULL;
    ADJ_TEST_OK(t, adj_dataset_load(t->comm, images, labels, CLASSES, &ds));
    if (ds) check_contents(t, ds, prefix);
    adj_dataset_destroy(&ds);
    ADJ_TEST_CHECK(t, ds == NULL, "destroy must clear the handle");
  }
}

/* Standard names, gzip images beside raw labels: each file is found on its own. */
static void test_load_dir(adj_test *t, const char *dir) {
  char raw_images[512], gz_labels[512];
  write_set(t, dir, "train", N, N, -1, true);
  write_set(t, dir, "train", N, N, -1, false);
  snprintf(raw_images, sizeof raw_images, "%s/train-images-idx3-ubyte", dir);
  snprintf(gz_labels, sizeof gz_labels, "%s/train-labels-idx1-ubyte.gz", dir);
  if (t->rank == 0)
    ADJ_TEST_CHECK(t, remove(raw_images) == 0 && remove(gz_labels) == 0, "cannot remove %s or %s", raw_images, gz_labels);
  adj_dataset *ds = NULL;
  ADJ_TEST_OK(t, adj_dataset_load_dir(t->comm, dir, "train", CLASSES, &ds));
  if (ds) check_contents(t, ds, "load_dir train");
  adj_dataset_destroy(&ds);
}

/* Same code and same message on every rank, containing `needle`, and no data set. */
static void expect_error(adj_test *t, int status, adj_dataset *ds, int code, const char *needle, const char *what) {
  adj_test_expect_error(t, what, status, code, needle);
  ADJ_TEST_CHECK(t, ds == NULL, "%s: a failed load left a data set behind", what);
  if (status == ADJ_SUCCESS) adj_dataset_destroy(&ds);
}

static void expect_load_error(adj_test *t, const char *images, const char *labels, const char *needle,
                              const char *what) {
  adj_clear_error();
  adj_dataset *ds = (adj_dataset *)&ds; /* must come back NULL */
  int status = adj_dataset_load(t->comm, images, labels, CLASSES, &ds);
  expect_error(t, status, ds, ADJ_ERR_IO, needle, what);
}

/* Grows (zero bytes appended) or shrinks a file on rank 0 by `change` bytes. */
static void resize_file(adj_test *t, const char *path, long change) {
  if (t->rank != 0) return;
  struct stat st;
  ADJ_TEST_CHECK(t, stat(path, &st) == 0 && truncate(path, st.st_size + change) == 0, "cannot resize %s", path);
}

/* A header promising a million 28 x 28 images over a 10-byte payload: the loader
 * must report a truncated file without first allocating 784 MB. */
static void write_lying_header(adj_test *t, const char *path) {
  if (t->rank != 0) return;
  const uint8_t head[26] = {0, 0, 8, 3, 0x00, 0x0f, 0x42, 0x40, 0, 0, 0, 28, 0, 0, 0, 28};
  FILE *f = fopen(path, "wb");
  ADJ_TEST_CHECK(t, f && fwrite(head, 1, sizeof head, f) == sizeof head, "cannot write %s", path);
  if (f) fclose(f);
}

static void test_malformed(adj_test *t, const char *dir) {
  char images[512], labels[512], other[512];
  snprintf(images, sizeof images, "%s/bad-images-idx3-ubyte", dir);
  snprintf(labels, sizeof labels, "%s/bad-labels-idx1-ubyte", dir);
  const int64_t full = 16 + N * ROWS * COLS;
  char needle[128];

  write_set(t, dir, "bad", N, N, -1, false);
  resize_file(t, images, -10);
  snprintf(needle, sizeof needle, "is truncated: expected %lld bytes, found %lld", (long long)full, (long long)full - 10);
  expect_load_error(t, images, labels, needle, "truncated raw images");

  write_set(t, dir, "bad", N, N, -1, false);
  resize_file(t, images, 3);
  snprintf(needle, sizeof needle, "has trailing data: expected %lld bytes, found %lld", (long long)full, (long long)full + 3);
  expect_load_error(t, images, labels, needle, "trailing data");

  write_set(t, dir, "badgz", N, N, -1, true);
  snprintf(other, sizeof other, "%s/badgz-images-idx3-ubyte.gz", dir);
  resize_file(t, other, -12);
  snprintf(needle, sizeof needle, "is truncated: expected %lld bytes after decompression", (long long)full);
  expect_load_error(t, other, labels, needle, "truncated gzip images");

  write_lying_header(t, other);
  expect_load_error(t, other, labels, "is truncated: expected 784000016 bytes, found 26", "lying header");

  write_set(t, dir, "bad", N, N, -1, false);
  expect_load_error(t, labels, labels, "magic number 0x00000801, expected 0x00000803", "labels as images");

  write_set(t, dir, "bad", N, N - 1, -1, false);
  expect_load_error(t, images, labels, "holds 5 images but labels file", "count mismatch");
  ADJ_TEST_CHECK(t, strstr(adj_last_error(), "holds 4 labels"), "count mismatch: '%s'", adj_last_error());

  write_set(t, dir, "bad", N, N, 3, false);
  expect_load_error(t, images, labels, "label 10 at index 3 is outside [0, 10)", "label out of range");

  snprintf(other, sizeof other, "%s/no-such-file", dir);
  expect_load_error(t, other, labels, "no-such-file': No such file or directory", "missing file");
  expect_load_error(t, dir, labels, "Is a directory", "directory as file");

  adj_dataset *ds = NULL;
  int status = adj_dataset_load_dir(t->comm, dir, "test", CLASSES, &ds);
  expect_error(t, status, ds, ADJ_ERR_IO, "t10k-images-idx3-ubyte.gz'", "missing test split");
  status = adj_dataset_load_dir(t->comm, dir, "valid", CLASSES, &ds);
  expect_error(t, status, ds, ADJ_ERR_ARG, "'valid'", "bad split");
  status = adj_dataset_load(t->comm, images, labels, 0, &ds);
  expect_error(t, status, ds, ADJ_ERR_ARG, "n_classes 0", "zero classes");
}

static void check_batch(adj_test *t, const adj_dataset *ds, const int64_t *perm, adj_dtype dtype) {
  enum { B = 3 };
  adj_tensor x;
  uint8_t labels[B];
  adj_tensor_create(&x, dtype, 4, (int64_t[]){B, 1, ROWS, COLS});
  ADJ_TEST_OK(t, adj_dataset_batch(ds, perm + 1, B, &x, labels));
  int bad = 0;
  for (int64_t k = 0; k < B; k++) {
    bad += labels[k] != ds->labels[perm[1 + k]];
    for (int64_t p = 0; p < ROWS * COLS; p++)
      bad += adj_tensor_get(&x, k * ROWS * COLS + p) != (double)((float)pixel(perm[1 + k] * ROWS * COLS + p) / 255.0f);
  }
  ADJ_TEST_CHECK(t, bad == 0, "%s batch: %d values differ", adj_dtype_name(dtype), bad);
  ADJ_TEST_CHECK(t, adj_dataset_batch(ds, perm, B + 1, &x, labels) == ADJ_ERR_SIZE, "batch size 4 into (3, ...) must fail");
  int64_t wrong[B] = {0, N, 1};
  ADJ_TEST_CHECK(t, adj_dataset_batch(ds, wrong, B, &x, labels) == ADJ_ERR_ARG && strstr(adj_last_error(), "index 5"),
                 "index 5 must fail: '%s'", adj_last_error());
  adj_tensor_destroy(&x);
}

static void test_batches(adj_test *t, const char *dir) {
  char images[512], labels[512];
  snprintf(images, sizeof images, "%s/raw-images-idx3-ubyte", dir);
  snprintf(labels, sizeof labels, "%s/raw-labels-idx1-ubyte", dir);
  adj_dataset *ds = NULL;
  ADJ_TEST_OK(t, adj_dataset_load(t->comm, images, labels, CLASSES, &ds));
  if (!ds) return;
  adj_rng *a = NULL, *b = NULL;
  adj_rng_create(2024, &a);
  adj_rng_create(2024, &b);
  int64_t perm[N], again[N], seen[N] = {0}, moved = 0;
  adj_shuffle_indices(a, N, perm);
  adj_shuffle_indices(b, N, again);
  for (int i = 0; i < N; i++) {
    if (perm[i] >= 0 && perm[i] < N) seen[perm[i]]++;
    moved += perm[i] != i;
  }
  int missing = 0;
  for (int i = 0; i < N; i++) missing += seen[i] != 1;
  ADJ_TEST_CHECK(t, missing == 0 && !memcmp(perm, again, sizeof perm) && moved > 0,
                 "shuffle: %d indices missing, same seed same order %d, %lld moved", missing,
                 !memcmp(perm, again, sizeof perm), (long long)moved);
  check_batch(t, ds, perm, ADJ_FLOAT32);
  check_batch(t, ds, perm, ADJ_FLOAT64);
  adj_rng_destroy(&a);
  adj_rng_destroy(&b);
  adj_dataset_destroy(&ds);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t500-idx");
  char dir[256] = "";
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/adjoin-t500-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (t.rank == 0 && !mkdtemp(dir)) ADJ_TEST_CHECK(&t, 0, "mkdtemp %s failed", dir);
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, t.comm);
  test_round_trip(&t, dir);
  test_load_dir(&t, dir);
  test_batches(&t, dir);
  test_malformed(&t, dir);
  adj_test_report(&t, "round trips (raw, gzip), directory lookup, batches and 12 malformed cases checked on %d ranks",
                  t.size);
  if (t.rank == 0) {
    char command[300];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    ADJ_TEST_CHECK(&t, system(command) == 0, "cannot remove %s", dir);
  }
  return adj_test_finish(&t);
}

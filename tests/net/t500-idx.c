/* IDX data sets: write/read round trips (raw, and gzip through the
 * decompression cache), directory lookup, blocks of batches from a seeded
 * permutation (whole, split over rows and columns, padded), and malformed
 * files that must fail with the same message on every rank. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* A small set with non-square images, so swapped rows and cols would show. */
enum { N = 5, ROWS = 3, COLS = 4, CLASSES = 10 };

static uint8_t pixel(int64_t i) { return (uint8_t)(i * 37 % 256); }

/* Rank 0 writes; every rank opens, after rank 0 is done (sync_files). */
static void sync_files(adj_test *t) { MPI_Barrier(t->comm); }

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

static int open_set(adj_test *t, const char *images, const char *labels, int n_classes, adj_dataset **ds) {
  adj_dataset_config c = {.inputs = images, .targets = labels, .n_classes = n_classes};
  return adj_dataset_open(t->comm, &c, ds);
}

/* Every sample, read one by one as (1, 1, ROWS, COLS) float32, and its label. */
static int compare_samples(adj_test *t, adj_dataset *ds) {
  adj_tensor x;
  adj_tensor_create(&x, ADJ_FLOAT32, 4, (int64_t[]){1, 1, ROWS, COLS});
  adj_box box = adj_box_whole(4, x.shape);
  int bad = 0;
  for (int64_t i = 0; i < N; i++) {
    int64_t label = -1;
    ADJ_TEST_OK(t, adj_dataset_read_inputs(ds, &i, 1, &box, &x));
    ADJ_TEST_OK(t, adj_dataset_read_labels(ds, &i, 1, 0, 1, &label));
    for (int64_t p = 0; p < ROWS * COLS; p++) bad += ((float *)x.data)[p] != (float)pixel(i * ROWS * COLS + p) / 255.0f;
    bad += label != (i * 3) % CLASSES;
  }
  adj_tensor_destroy(&x);
  return bad;
}

static void check_contents(adj_test *t, adj_dataset *ds, const char *what) {
  const int64_t shape[2] = {ROWS, COLS};
  ADJ_TEST_CHECK(t, adj_dataset_count(ds) == N && adj_dataset_classes(ds) == CLASSES && adj_dataset_input_rank(ds) == 2 &&
                        !memcmp(adj_dataset_input_shape(ds), shape, sizeof shape) && adj_dataset_target_rank(ds) == 0,
                 "%s: count %lld, %d classes, samples of rank %d (%s)", what, (long long)adj_dataset_count(ds),
                 adj_dataset_classes(ds), adj_dataset_input_rank(ds), adj_dataset_describe_inputs(ds));
  ADJ_TEST_OK(t, adj_dataset_set_input_shape(ds, 3, (const int64_t[]){1, ROWS, COLS}));
  int bad = compare_samples(t, ds);
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
    sync_files(t);
    adj_dataset *ds = NULL;
    ADJ_TEST_OK(t, open_set(t, images, labels, CLASSES, &ds));
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
  sync_files(t);
  adj_dataset *ds = NULL;
  ADJ_TEST_OK(t, adj_dataset_open_dir(t->comm, dir, "train", CLASSES, &ds));
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
  sync_files(t);
  adj_clear_error();
  adj_dataset *ds = (adj_dataset *)&ds; /* must come back NULL */
  int status = open_set(t, images, labels, CLASSES, &ds);
  expect_error(t, status, ds, ADJ_ERR_IO, needle, what);
}

/* Grows (zero bytes appended) or shrinks a file on rank 0 by `change` bytes. */
static void resize_file(adj_test *t, const char *path, long change) {
  if (t->rank != 0) return;
  struct stat st;
  ADJ_TEST_CHECK(t, stat(path, &st) == 0 && truncate(path, st.st_size + change) == 0, "cannot resize %s", path);
}

/* Overwrites byte `at` of a file on rank 0. */
static void poke_file(adj_test *t, const char *path, long at, uint8_t value) {
  if (t->rank != 0) return;
  FILE *f = fopen(path, "r+b");
  ADJ_TEST_CHECK(t, f && fseek(f, at, SEEK_SET) == 0 && fputc(value, f) == value, "cannot change %s", path);
  if (f) fclose(f);
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
  poke_file(t, images, 2, 0x07);
  expect_load_error(t, images, labels, "magic number 0x00000703 is not IDX", "unknown element type");

  write_set(t, dir, "bad", N, N, -1, false);
  poke_file(t, images, 3, 0x09);
  expect_load_error(t, images, labels, "magic number 0x00000809 is not IDX", "9 dimensions");

  write_set(t, dir, "bad", N, N - 1, -1, false);
  expect_load_error(t, images, labels, "holds 5 samples but targets file", "count mismatch");
  ADJ_TEST_CHECK(t, strstr(adj_last_error(), "holds 4"), "count mismatch: '%s'", adj_last_error());

  write_set(t, dir, "bad", N, N, 3, false);
  expect_load_error(t, images, labels, "label 10 of sample 3 is outside [0, 10)", "label out of range");

  write_set(t, dir, "bad", N, N, -1, false);
  expect_load_error(t, images, images, "labels need one number per sample", "images as labels");

  snprintf(other, sizeof other, "%s/no-such-file", dir);
  expect_load_error(t, other, labels, "no-such-file: cannot open it: No such file or directory", "missing file");
  expect_load_error(t, dir, labels, "is a directory, not a regular file", "directory as file");

  adj_dataset *ds = NULL;
  int status = adj_dataset_open_dir(t->comm, dir, "test", CLASSES, &ds);
  expect_error(t, status, ds, ADJ_ERR_IO, "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (raw or .gz)",
               "missing test split");
  status = adj_dataset_open_dir(t->comm, dir, "valid", CLASSES, &ds);
  expect_error(t, status, ds, ADJ_ERR_ARG, "'valid'", "bad split");
  status = open_set(t, images, labels, -1, &ds);
  expect_error(t, status, ds, ADJ_ERR_ARG, "n_classes -1", "negative classes");
}

/* Batch positions [B0, B0 + rows) of batch perm[0..count) in the box with
 * image rows [r0, r0 + nr) and columns [c0, c0 + nc): each value against the
 * pixel written, padding (positions >= count) zero. */
static int check_block(adj_test *t, adj_dataset *ds, const int64_t *perm, int64_t count, const adj_box *box,
                       adj_dtype dtype) {
  adj_tensor x;
  adj_tensor_create(&x, dtype, 4, box->extent);
  ADJ_TEST_OK(t, adj_dataset_read_inputs(ds, perm, count, box, &x));
  int bad = 0;
  for (int64_t k = 0; k < box->extent[0]; k++)
    for (int64_t r = 0; r < box->extent[2]; r++)
      for (int64_t c = 0; c < box->extent[3]; c++) {
        int64_t p = box->start[0] + k, pixel_at = (box->start[2] + r) * COLS + box->start[3] + c;
        double want = p < count ? (double)((float)pixel(perm[p] * ROWS * COLS + pixel_at) / 255.0f) : 0.0;
        bad += adj_tensor_get(&x, (k * box->extent[2] + r) * box->extent[3] + c) != want;
      }
  adj_tensor_destroy(&x);
  return bad;
}

static void check_batch(adj_test *t, adj_dataset *ds, const int64_t *perm, adj_dtype dtype) {
  enum { B = 4 };
  const adj_box boxes[] = {
      {.rank = 4, .start = {0, 0, 0, 0}, .extent = {B, 1, ROWS, COLS}}, /* the whole batch, one padded */
      {.rank = 4, .start = {1, 0, 1, 0}, .extent = {2, 1, 2, COLS}},    /* rows 1..2 of positions 1..2 */
      {.rank = 4, .start = {2, 0, 0, 1}, .extent = {2, 1, ROWS, 2}},    /* columns 1..2, one padded */
      {.rank = 4, .start = {3, 0, 2, 3}, .extent = {1, 1, 1, 1}},       /* one padding pixel */
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof boxes / sizeof boxes[0]; i++) bad += check_block(t, ds, perm + 1, B - 1, &boxes[i], dtype);
  int64_t labels[B];
  ADJ_TEST_OK(t, adj_dataset_read_labels(ds, perm + 1, B - 1, 0, B, labels));
  for (int64_t k = 0; k < B; k++) bad += labels[k] != (k < B - 1 ? (perm[1 + k] * 3) % CLASSES : 0);
  ADJ_TEST_CHECK(t, bad == 0, "%s blocks: %d values differ", adj_dtype_name(dtype), bad);
  adj_tensor x;
  adj_tensor_create(&x, dtype, 4, (int64_t[]){B, 1, ROWS, COLS});
  adj_box tall = {.rank = 4, .start = {0, 0, 1, 0}, .extent = {B, 1, ROWS, COLS}};
  ADJ_TEST_CHECK(t, adj_dataset_read_inputs(ds, perm, B, &tall, &x) == ADJ_ERR_SIZE && strstr(adj_last_error(), "[1, 4)"),
                 "rows [1, 4) of 3 must fail: '%s'", adj_last_error());
  int64_t wrong[B] = {0, N, 1, 2};
  adj_box whole = adj_box_whole(4, x.shape);
  ADJ_TEST_CHECK(t, adj_dataset_read_inputs(ds, wrong, B, &whole, &x) == ADJ_ERR_ARG && strstr(adj_last_error(), "index 5"),
                 "index 5 must fail: '%s'", adj_last_error());
  adj_tensor_destroy(&x);
}

static void test_batches(adj_test *t, const char *dir) {
  char images[512], labels[512];
  snprintf(images, sizeof images, "%s/raw-images-idx3-ubyte", dir);
  snprintf(labels, sizeof labels, "%s/raw-labels-idx1-ubyte", dir);
  adj_dataset *ds = NULL;
  ADJ_TEST_OK(t, open_set(t, images, labels, CLASSES, &ds));
  if (!ds) return;
  ADJ_TEST_OK(t, adj_dataset_set_input_shape(ds, 3, (const int64_t[]){1, ROWS, COLS}));
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
  adj_test_report(&t, "round trips (raw, gzip), directory lookup, blocks of batches and 15 malformed cases checked on "
                  "%d ranks", t.size);
  if (t.rank == 0) {
    char command[300];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    ADJ_TEST_CHECK(&t, system(command) == 0, "cannot remove %s", dir);
  }
  return adj_test_finish(&t);
}

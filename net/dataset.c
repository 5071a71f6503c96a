/* Collective loading of labelled image data sets, batches and shuffling.
 *
 * Rank 0 alone reads and validates the files, then broadcasts the bytes.  Why
 * not every rank reading: the ranks of a node would decompress the same
 * gzip stream once each (Fashion-MNIST's training images are 26 MB of gzip)
 * on cores they share, the files need to exist only where rank 0 runs, and a
 * file that changes while being read cannot give ranks different data.  The
 * verdict of rank 0's validation is agreed (adj_status_agree) before any rank
 * allocates, so a malformed file is the same error on every rank and no rank
 * waits in a broadcast that will never come. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adjoin/agree.h"
#include "adjoin/dataset.h"
#include "adjoin/wait.h"
#include "error_impl.h"
#include "idx_impl.h"

/* MPI counts are int; broadcasts move at most this many bytes per call. */
#define DATASET_BCAST_CHUNK ((int64_t)1 << 30)

/* What rank 0 read: image bytes (N, rows, cols) and labels (N). */
typedef struct dataset_files {
  adj_idx_blob images, labels;
} dataset_files;

static void dataset_files_free(dataset_files *files) {
  adj_idx_blob_free(&files->images);
  adj_idx_blob_free(&files->labels);
}

/* The checks that need both files: equal counts, and labels in range. */
static int dataset_check_labels(const dataset_files *files, const char *images_path, const char *labels_path,
                                int n_classes) {
  int64_t n = files->images.dims[0], n_labels = files->labels.dims[0];
  ADJ_CHECK(n == n_labels, ADJ_ERR_IO, "images file '%s' holds %lld images but labels file '%s' holds %lld labels",
            images_path, (long long)n, labels_path, (long long)n_labels);
  for (int64_t i = 0; i < n; i++)
    ADJ_CHECK(files->labels.data[i] < n_classes, ADJ_ERR_IO,
              "labels file '%s': label %d at index %lld is outside [0, %d)", labels_path, files->labels.data[i],
              (long long)i, n_classes);
  return ADJ_SUCCESS;
}

static int dataset_read_root(const char *images_path, const char *labels_path, int n_classes, dataset_files *files) {
  ADJ_CALL(adj_idx_read_ubyte("images", images_path, 3, &files->images));
  ADJ_CALL(adj_idx_read_ubyte("labels", labels_path, 1, &files->labels));
  return dataset_check_labels(files, images_path, labels_path, n_classes);
}

static int dataset_bcast(MPI_Comm comm, void *buf, int64_t bytes, adj_wait_policy policy) {
  for (int64_t done = 0; done < bytes; done += DATASET_BCAST_CHUNK) {
    int64_t n = bytes - done < DATASET_BCAST_CHUNK ? bytes - done : DATASET_BCAST_CHUNK;
    MPI_Request request;
    ADJ_CALL_MPI(MPI_Ibcast((uint8_t *)buf + done, (int)n, MPI_BYTE, 0, comm, &request));
    ADJ_CALL(adj_wait_all(1, &request, policy));
  }
  return ADJ_SUCCESS;
}

/* The data set shell: sizes, labels and a zeroed float32 (N, 1, rows, cols) image
 * tensor.  Every rank allocates its own, so failure is local and agreed after. */
static int dataset_create(const int64_t shape[3], int n_classes, adj_dataset **out) {
  adj_dataset *ds = calloc(1, sizeof *ds);
  ADJ_CHECK(ds, ADJ_ERR_MEM, "adj_dataset_load: out of memory");
  *ds = (adj_dataset){.count = shape[0], .rows = shape[1], .cols = shape[2], .n_classes = n_classes};
  *out = ds;
  ds->labels = malloc((size_t)ds->count);
  ADJ_CHECK(ds->labels, ADJ_ERR_MEM, "adj_dataset_load: out of memory for %lld labels", (long long)ds->count);
  return adj_tensor_create(&ds->images, ADJ_FLOAT32, 4, (int64_t[]){ds->count, 1, ds->rows, ds->cols});
}

/* Non-root ranks receive the image bytes into a buffer of their own; rank 0
 * sends the one it read. */
static int dataset_receive_buffers(int rank, const int64_t shape[3], dataset_files *files) {
  if (rank == 0) return ADJ_SUCCESS;
  int64_t bytes = shape[0] * shape[1] * shape[2];
  files->images.data = malloc((size_t)bytes);
  ADJ_CHECK(files->images.data, ADJ_ERR_MEM, "adj_dataset_load: out of memory for %lld image bytes", (long long)bytes);
  return ADJ_SUCCESS;
}

static void dataset_scale(const uint8_t *bytes, adj_tensor *images) {
  float *x = images->data;
  int64_t n = adj_tensor_volume(images);
  for (int64_t i = 0; i < n; i++) x[i] = (float)bytes[i] / 255.0f;
}

/* After rank 0's read succeeded everywhere: share the shape, allocate, agree,
 * then share the bytes. */
static int dataset_share(MPI_Comm comm, adj_wait_policy policy, dataset_files *files, int n_classes,
                         adj_dataset **out) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int64_t shape[3] = {files->images.dims[0], files->images.dims[1], files->images.dims[2]};
  ADJ_CALL(dataset_bcast(comm, shape, sizeof shape, policy));
  int status = dataset_receive_buffers(rank, shape, files);
  if (!status) status = dataset_create(shape, n_classes, out);
  if (!status && rank == 0) memcpy((*out)->labels, files->labels.data, (size_t)shape[0]);
  ADJ_CALL(adj_status_agree(comm, status, policy));
  ADJ_CALL(dataset_bcast(comm, files->images.data, shape[0] * shape[1] * shape[2], policy));
  ADJ_CALL(dataset_bcast(comm, (*out)->labels, shape[0], policy));
  dataset_scale(files->images.data, &(*out)->images);
  return ADJ_SUCCESS;
}

int adj_dataset_load(MPI_Comm comm, const char *images_path, const char *labels_path, int n_classes,
                     adj_dataset **out) {
  adj_wait_policy policy;
  ADJ_CALL(adj_wait_policy_resolve(comm, ADJ_WAIT_AUTO, &policy));
  int rank = 0, status = ADJ_SUCCESS;
  MPI_Comm_rank(comm, &rank);
  if (!out) status = adj_error_set(ADJ_ERR_ARG, "adj_dataset_load: out is NULL");
  else *out = NULL;
  if (!status && (n_classes < 1 || n_classes > 256))
    status = adj_error_set(ADJ_ERR_ARG, "adj_dataset_load: n_classes %d is outside [1, 256]", n_classes);
  dataset_files files = {0};
  if (!status && rank == 0) status = dataset_read_root(images_path, labels_path, n_classes, &files);
  status = adj_status_agree(comm, status, policy);
  if (!status) status = dataset_share(comm, policy, &files, n_classes, out);
  dataset_files_free(&files);
  if (status && out) adj_dataset_destroy(out);
  return status;
}

/* dir/<prefix>-<kind>-ubyte, or the same with .gz when only that is readable. */
static int dataset_find(const char *dir, const char *prefix, const char *kind, char *path, size_t size) {
  int n = snprintf(path, size, "%s/%s-%s-ubyte", dir, prefix, kind);
  ADJ_CHECK(n > 0 && (size_t)n + 3 < size, ADJ_ERR_ARG, "adj_dataset_load_dir: directory name '%s' is too long", dir);
  if (access(path, R_OK) == 0) return ADJ_SUCCESS;
  strcat(path, ".gz");
  if (access(path, R_OK) == 0) return ADJ_SUCCESS;
  path[n] = '\0';
  return adj_error_set(ADJ_ERR_IO, "no %s-%s file in '%s': neither '%s' nor '%s.gz' is readable", prefix, kind, dir,
                       path, path);
}

int adj_dataset_load_dir(MPI_Comm comm, const char *dir, const char *split, int n_classes, adj_dataset **out) {
  int rank = 0, status = ADJ_SUCCESS;
  MPI_Comm_rank(comm, &rank);
  const char *prefix = split && !strcmp(split, "train") ? "train" : split && !strcmp(split, "test") ? "t10k" : NULL;
  if (!prefix) status = adj_error_set(ADJ_ERR_ARG, "adj_dataset_load_dir: split '%s' is not \"train\" or \"test\"",
                                      split ? split : "(null)");
  if (!status && !dir) status = adj_error_set(ADJ_ERR_ARG, "adj_dataset_load_dir: dir is NULL");
  /* Only rank 0 opens the files (see adj_dataset_load), so only it looks for them. */
  char images[PATH_MAX] = "", labels[PATH_MAX] = "";
  if (!status && rank == 0) status = dataset_find(dir, prefix, "images-idx3", images, sizeof images);
  if (!status && rank == 0) status = dataset_find(dir, prefix, "labels-idx1", labels, sizeof labels);
  adj_wait_policy policy;
  ADJ_CALL(adj_wait_policy_resolve(comm, ADJ_WAIT_AUTO, &policy));
  status = adj_status_agree(comm, status, policy);
  if (status) {
    if (out) *out = NULL;
    return status;
  }
  return adj_dataset_load(comm, images, labels, n_classes, out);
}

int adj_dataset_random(int64_t count, int64_t rows, int64_t cols, int n_classes, uint64_t seed, adj_dataset **out) {
  ADJ_CHECK(out, ADJ_ERR_ARG, "random data set: output pointer is NULL");
  *out = NULL;
  ADJ_CHECK(count >= 1 && rows >= 1 && cols >= 1 && n_classes >= 1 && n_classes <= 256, ADJ_ERR_ARG,
            "random data set: count %lld, rows %lld, cols %lld, classes %d must be positive (classes <= 256)",
            (long long)count, (long long)rows, (long long)cols, n_classes);
  adj_dataset *ds = calloc(1, sizeof *ds);
  adj_rng *rng = NULL;
  int status = ds ? adj_rng_create(seed, &rng) : adj_error_set(ADJ_ERR_MEM, "random data set: out of memory");
  if (!status) {
    *ds = (adj_dataset){.count = count, .rows = rows, .cols = cols, .n_classes = n_classes, .labels = malloc((size_t)count)};
    status = ds->labels ? adj_tensor_create(&ds->images, ADJ_FLOAT32, 4, (const int64_t[4]){count, 1, rows, cols})
                        : adj_error_set(ADJ_ERR_MEM, "random data set: out of memory for %lld labels", (long long)count);
  }
  if (!status) {
    adj_rng_fill_uniform(rng, &ds->images, 0, 1);
    for (int64_t i = 0; i < count; i++) ds->labels[i] = (uint8_t)adj_rng_below(rng, (uint64_t)n_classes);
    *out = ds;
  } else {
    adj_dataset_destroy(&ds);
  }
  adj_rng_destroy(&rng);
  return status;
}

void adj_dataset_destroy(adj_dataset **ds) {
  if (!ds || !*ds) return;
  adj_tensor_destroy(&(*ds)->images);
  free((*ds)->labels);
  free(*ds);
  *ds = NULL;
}

void adj_shuffle_indices(adj_rng *rng, int64_t n, int64_t *perm) {
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)adj_rng_below(rng, (uint64_t)i + 1);
    int64_t swap = perm[i];
    perm[i] = perm[j];
    perm[j] = swap;
  }
}

static int dataset_check_batch(const adj_dataset *ds, const int64_t *indices, int64_t b, const adj_tensor *images,
                               const uint8_t *labels) {
  ADJ_CHECK(ds && images && b >= 0 && (b == 0 || (indices && labels)), ADJ_ERR_ARG,
            "adj_dataset_batch: missing argument or negative batch size %lld", (long long)b);
  ADJ_CHECK(images->dtype == ADJ_FLOAT32 || images->dtype == ADJ_FLOAT64, ADJ_ERR_DTYPE,
            "adj_dataset_batch: images tensor has dtype %s", adj_dtype_name(images->dtype));
  int64_t want[4] = {b, 1, ds->rows, ds->cols};
  char have_text[96], want_text[96];
  ADJ_CHECK(images->rank == 4 && !memcmp(images->shape, want, sizeof want), ADJ_ERR_SIZE,
            "adj_dataset_batch: images tensor has shape %s, expected %s",
            adj_shape_format(have_text, sizeof have_text, images->rank, images->shape),
            adj_shape_format(want_text, sizeof want_text, 4, want));
  for (int64_t k = 0; k < b; k++)
    ADJ_CHECK(indices[k] >= 0 && indices[k] < ds->count, ADJ_ERR_ARG,
              "adj_dataset_batch: index %lld at batch position %lld is outside [0, %lld)", (long long)indices[k],
              (long long)k, (long long)ds->count);
  return ADJ_SUCCESS;
}

int adj_dataset_batch(const adj_dataset *ds, const int64_t *indices, int64_t b, adj_tensor *images,
                      uint8_t *labels) {
  ADJ_CALL(dataset_check_batch(ds, indices, b, images, labels));
  int64_t pixels = ds->rows * ds->cols;
  const float *src = ds->images.data;
  for (int64_t k = 0; k < b; k++) {
    const float *sample = src + indices[k] * pixels;
    labels[k] = ds->labels[indices[k]];
    if (images->dtype == ADJ_FLOAT32) {
      memcpy((float *)images->data + k * pixels, sample, (size_t)pixels * sizeof(float));
      continue;
    }
    double *dst = (double *)images->data + k * pixels;
    for (int64_t p = 0; p < pixels; p++) dst[p] = sample[p];
  }
  return ADJ_SUCCESS;
}

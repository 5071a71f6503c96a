/* t540: every data source against the values written, block by block.
 *
 * Rank 0 writes one small set of N samples of shape (2, 3, 5) in each format:
 * IDX of unsigned bytes (raw and gzip) and of big-endian float32; .npy of
 * uint8, little-endian float32, big-endian float64 and int16, with labels
 * stored as int64, int32 (N, 1) and whole float32; HDF5 (contiguous, and
 * chunked with deflate) when the build has it; the in-memory and random
 * sets.  Every rank then reads, from each, the blocks a network's input
 * layout could hold: whole batches, splits of the channels, rows and
 * columns, padded positions and repeated samples, into float32 and float64,
 * and compares every value with the formula that wrote it, converted as
 * dataset.h says (uint8 inputs b / 255 in float32, other types as they are).
 * The labels and a regression target array are compared the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#ifdef ADJ_TEST_HDF5
#include <hdf5.h>
#endif

#include "net_check.h"

enum { N = 7, C = 2, H = 3, W = 5, VOL = C * H * W, CLASSES = 4, B = 5 };

/* What a source stores, and so what a read must give. */
typedef enum stored { STORED_BYTES, STORED_FLOAT32, STORED_FLOAT64, STORED_INT16 } stored;

static int byte_at(int64_t i, int64_t e) { return (int)((i * 31 + e * 7) % 256); }
static double real_at(int64_t i, int64_t e) { return byte_at(i, e) / 7.0 - 3.0; }
static int64_t label_at(int64_t i) { return (i * 3) % CLASSES; }
static double target_at(int64_t i, int64_t e) { return (double)(float)(0.25 * (double)(i + e)); }

static double expected(stored s, int64_t i, int64_t e) {
  switch (s) {
  case STORED_BYTES: return (double)((float)byte_at(i, e) / 255.0f);
  case STORED_FLOAT32: return (double)(float)real_at(i, e);
  case STORED_FLOAT64: return real_at(i, e);
  default: return byte_at(i, e) - 100;
  }
}

/* ---- writers (rank 0) ------------------------------------------------------------------------ */

static void put_bytes(uint8_t *p, const void *v, int size, bool big_endian) {
  for (int k = 0; k < size; k++) p[k] = ((const uint8_t *)v)[big_endian ? size - 1 - k : k];
}

/* The N x VOL inputs as `s` stores them, element size `size`, in the byte order asked for. */
static uint8_t *inputs_as(stored s, int size, bool big_endian) {
  uint8_t *data = malloc((size_t)N * VOL * (size_t)size);
  for (int64_t i = 0; i < N; i++)
    for (int64_t e = 0; e < VOL; e++) {
      uint8_t *p = data + (i * VOL + e) * size;
      float f = (float)real_at(i, e);
      double d = real_at(i, e);
      int16_t h = (int16_t)(byte_at(i, e) - 100);
      uint8_t b = (uint8_t)byte_at(i, e);
      put_bytes(p, s == STORED_BYTES ? (const void *)&b : s == STORED_FLOAT32 ? (const void *)&f
                                                         : s == STORED_FLOAT64 ? (const void *)&d : (const void *)&h,
                size, big_endian);
    }
  return data;
}

static void write_file(adj_test *t, const char *path, const void *a, size_t na, const void *b, size_t nb) {
  FILE *f = fopen(path, "wb");
  ADJ_TEST_CHECK(t, f && fwrite(a, 1, na, f) == na && fwrite(b, 1, nb, f) == nb, "cannot write %s", path);
  if (f) fclose(f);
}

/* A version 1.0 .npy file as numpy.save writes it (header padded to 64 bytes). */
static void write_npy(adj_test *t, const char *path, const char *descr, const char *shape, const void *data,
                      size_t bytes) {
  char head[256];
  int n = snprintf(head + 10, sizeof head - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
  int total = (10 + n + 1 + 63) / 64 * 64;
  memset(head + 10 + n, ' ', (size_t)(total - 10 - n - 1));
  head[total - 1] = '\n';
  memcpy(head, "\x93NUMPY\x01\x00", 8);
  head[8] = (char)((total - 10) & 0xff), head[9] = (char)((total - 10) >> 8);
  write_file(t, path, head, (size_t)total, data, bytes);
}

/* IDX of big-endian float32 (type 0x0d), 4 dimensions. */
static void write_idx_float(adj_test *t, const char *path) {
  uint8_t head[20] = {0, 0, 0x0d, 4};
  const uint32_t dims[4] = {N, C, H, W};
  for (int d = 0; d < 4; d++)
    for (int k = 0; k < 4; k++) head[4 + 4 * d + k] = (uint8_t)(dims[d] >> (24 - 8 * k));
  uint8_t *data = inputs_as(STORED_FLOAT32, 4, true);
  write_file(t, path, head, sizeof head, data, (size_t)N * VOL * 4);
  free(data);
}

static void write_labels_and_targets(adj_test *t, const char *dir) {
  int64_t l64[N];
  int32_t l32[N];
  float lf[N], targets[N * 4];
  for (int64_t i = 0; i < N; i++) {
    l64[i] = label_at(i), l32[i] = (int32_t)label_at(i), lf[i] = (float)label_at(i);
    for (int e = 0; e < 4; e++) targets[i * 4 + e] = (float)target_at(i, e);
  }
  char path[600];
  snprintf(path, sizeof path, "%s/labels-i8.npy", dir);
  write_npy(t, path, "<i8", "(7,)", l64, sizeof l64);
  snprintf(path, sizeof path, "%s/labels-i4.npy", dir);
  write_npy(t, path, "<i4", "(7, 1)", l32, sizeof l32);
  snprintf(path, sizeof path, "%s/labels-f4.npy", dir);
  write_npy(t, path, "<f4", "(7,)", lf, sizeof lf);
  snprintf(path, sizeof path, "%s/targets.npy", dir);
  write_npy(t, path, "<f4", "(7, 2, 2)", targets, sizeof targets);
}

#ifdef ADJ_TEST_HDF5
/* One dataset stored as `type` from memory of `memory_type`; chunked by one
 * sample and deflated when `chunked`. */
static void write_h5_dataset(hid_t file, const char *name, hid_t type, hid_t memory_type, int rank, const hsize_t *dims,
                             const void *data, bool chunked) {
  hid_t space = H5Screate_simple(rank, dims, NULL), plist = H5Pcreate(H5P_DATASET_CREATE);
  if (chunked) {
    hsize_t chunk[4] = {1, dims[1], rank > 2 ? dims[2] : 1, rank > 3 ? dims[3] : 1};
    H5Pset_chunk(plist, rank, chunk);
    H5Pset_deflate(plist, 6);
  }
  hid_t set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, plist, H5P_DEFAULT);
  H5Dwrite(set, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(set), H5Pclose(plist), H5Sclose(space);
}

static void write_h5(adj_test *t, const char *dir) {
  char path[600];
  const hsize_t in_dims[4] = {N, C, H, W}, label_dims[1] = {N}, target_dims[3] = {N, 2, 2};
  int64_t labels[N];
  float targets[N * 4];
  for (int64_t i = 0; i < N; i++) {
    labels[i] = label_at(i);
    for (int e = 0; e < 4; e++) targets[i * 4 + e] = (float)target_at(i, e);
  }
  uint8_t *bytes = inputs_as(STORED_BYTES, 1, false), *reals = inputs_as(STORED_FLOAT64, 8, false);
  snprintf(path, sizeof path, "%s/contiguous.h5", dir);
  hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ADJ_TEST_CHECK(t, file >= 0, "cannot create %s", path);
  write_h5_dataset(file, "inputs", H5T_NATIVE_UINT8, H5T_NATIVE_UINT8, 4, in_dims, bytes, false);
  write_h5_dataset(file, "targets", H5T_STD_I64BE, H5T_NATIVE_INT64, 1, label_dims, labels, false);
  H5Fclose(file);
  snprintf(path, sizeof path, "%s/chunked.h5", dir);
  file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  write_h5_dataset(file, "images", H5T_IEEE_F64BE, H5T_NATIVE_DOUBLE, 4, in_dims, reals, true);
  write_h5_dataset(file, "values", H5T_NATIVE_FLOAT, H5T_NATIVE_FLOAT, 3, target_dims, targets, true);
  H5Fclose(file);
  free(bytes), free(reals);
}
#endif

static void write_sources(adj_test *t, const char *dir) {
  if (t->rank != 0) return;
  char path[600];
  uint8_t *bytes = inputs_as(STORED_BYTES, 1, false);
  snprintf(path, sizeof path, "%s/bytes-idx", dir);
  ADJ_TEST_OK(t, adj_idx_write_ubyte(path, 4, (const int64_t[]){N, C, H, W}, bytes, false));
  snprintf(path, sizeof path, "%s/bytes-idx.gz", dir);
  ADJ_TEST_OK(t, adj_idx_write_ubyte(path, 4, (const int64_t[]){N, C, H, W}, bytes, true));
  uint8_t labels[N];
  for (int64_t i = 0; i < N; i++) labels[i] = (uint8_t)label_at(i);
  snprintf(path, sizeof path, "%s/labels-idx", dir);
  ADJ_TEST_OK(t, adj_idx_write_ubyte(path, 1, (const int64_t[]){N}, labels, false));
  snprintf(path, sizeof path, "%s/float-idx", dir);
  write_idx_float(t, path);
  snprintf(path, sizeof path, "%s/bytes.npy", dir);
  write_npy(t, path, "|u1", "(7, 2, 3, 5)", bytes, (size_t)N * VOL);
  free(bytes);
  static const struct {
    const char *file, *descr;
    stored s;
    int size;
    bool big;
  } arrays[] = {{"f4.npy", "<f4", STORED_FLOAT32, 4, false},
                {"f8be.npy", ">f8", STORED_FLOAT64, 8, true},
                {"i2.npy", "<i2", STORED_INT16, 2, false}};
  for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) {
    uint8_t *data = inputs_as(arrays[k].s, arrays[k].size, arrays[k].big);
    snprintf(path, sizeof path, "%s/%s", dir, arrays[k].file);
    write_npy(t, path, arrays[k].descr, "(7, 2, 3, 5)", data, (size_t)N * VOL * (size_t)arrays[k].size);
    free(data);
  }
  write_labels_and_targets(t, dir);
#ifdef ADJ_TEST_HDF5
  write_h5(t, dir);
#endif
}

/* ---- reading and comparing -------------------------------------------------------------------- */

/* The batch: samples with a repeat, then padding (positions >= COUNT). */
enum { COUNT = 4 };
static const int64_t batch[B] = {6, 0, 3, 0, 5};

/* The boxes of (batch, C, H, W) a layout could give a rank. */
static const adj_box boxes[] = {
    {.rank = 4, .start = {0, 0, 0, 0}, .extent = {B, C, H, W}},
    {.rank = 4, .start = {1, 1, 0, 0}, .extent = {3, 1, H, W}},
    {.rank = 4, .start = {0, 0, 1, 0}, .extent = {B, C, 2, W}},
    {.rank = 4, .start = {2, 1, 2, 3}, .extent = {3, 1, 1, 2}},
    {.rank = 4, .start = {3, 0, 0, 0}, .extent = {2, C, H, W}},
    {.rank = 4, .start = {0, 0, 0, 0}, .extent = {0, C, H, W}},
};

static int64_t compare_block(adj_test *t, adj_dataset *ds, stored s, const adj_box *box, adj_dtype dtype) {
  adj_tensor x;
  ADJ_TEST_OK(t, adj_tensor_create(&x, dtype, 4, box->extent));
  ADJ_TEST_OK(t, adj_dataset_read_inputs(ds, batch, COUNT, box, &x));
  int64_t bad = 0, at = 0;
  for (int64_t k = 0; k < box->extent[0]; k++)
    for (int64_t c = 0; c < box->extent[1]; c++)
      for (int64_t h = 0; h < box->extent[2]; h++)
        for (int64_t w = 0; w < box->extent[3]; w++, at++) {
          int64_t p = box->start[0] + k, e = ((box->start[1] + c) * H + box->start[2] + h) * W + box->start[3] + w;
          double want = p < COUNT ? expected(s, batch[p], e) : 0.0;
          if (dtype == ADJ_FLOAT32) want = (double)(float)want;
          bad += adj_tensor_get(&x, at) != want;
        }
  adj_tensor_destroy(&x);
  return bad;
}

static int64_t compare_labels(adj_test *t, adj_dataset *ds) {
  int64_t labels[B], bad = 0;
  ADJ_TEST_OK(t, adj_dataset_read_labels(ds, batch, COUNT, 0, B, labels));
  for (int p = 0; p < B; p++) bad += labels[p] != (p < COUNT ? label_at(batch[p]) : 0);
  ADJ_TEST_OK(t, adj_dataset_read_labels(ds, batch, COUNT, 2, 2, labels));
  bad += labels[0] != label_at(batch[2]) || labels[1] != label_at(batch[3]);
  return bad;
}

/* Targets (N, 2, 2): positions 1..4 (one padded), the second row only. */
static int64_t compare_targets(adj_test *t, adj_dataset *ds) {
  adj_box box = {.rank = 3, .start = {1, 1, 0}, .extent = {4, 1, 2}};
  adj_tensor y;
  ADJ_TEST_OK(t, adj_tensor_create(&y, ADJ_FLOAT64, 3, box.extent));
  ADJ_TEST_OK(t, adj_dataset_read_targets(ds, batch, COUNT, &box, &y));
  int64_t bad = 0;
  for (int64_t k = 0; k < 4; k++)
    for (int64_t j = 0; j < 2; j++)
      bad += adj_tensor_get(&y, k * 2 + j) != (1 + k < COUNT ? target_at(batch[1 + k], 2 + j) : 0.0);
  adj_tensor_destroy(&y);
  return bad;
}

/* Opens `inputs` and `targets` (names: HDF5 datasets), reads every block
 * into both dtypes and the labels or targets, and reports. */
static void check_source(adj_test *t, const char *what, const adj_dataset_config *c, stored s) {
  adj_dataset *ds = NULL;
  ADJ_TEST_OK(t, adj_dataset_open(t->comm, c, &ds));
  if (!ds) return;
  int64_t bad = 0, values = 0;
  if (adj_dataset_input_rank(ds) != 3) ADJ_TEST_OK(t, adj_dataset_set_input_shape(ds, 3, (const int64_t[]){C, H, W}));
  for (size_t k = 0; k < sizeof boxes / sizeof boxes[0]; k++)
    for (int d = 0; d < 2; d++) {
      bad += compare_block(t, ds, s, &boxes[k], d ? ADJ_FLOAT64 : ADJ_FLOAT32);
      values += adj_box_volume(&boxes[k]);
    }
  bad += c->n_classes ? compare_labels(t, ds) : compare_targets(t, ds);
  ADJ_TEST_CHECK(t, adj_dataset_count(ds) == N && bad == 0, "%s: %lld samples, %lld of %lld values differ", what,
                 (long long)adj_dataset_count(ds), (long long)bad, (long long)values);
  adj_test_report(t, "%-34s %lld block values and the %s equal the values written (%s)", what, (long long)values,
                  c->n_classes ? "labels" : "targets", adj_dataset_describe_inputs(ds));
  adj_dataset_destroy(&ds);
}

static void check_files(adj_test *t, const char *dir) {
  static const struct {
    const char *what, *inputs, *targets;
    int n_classes;
    stored s;
  } cases[] = {
      {"IDX uint8, IDX labels", "bytes-idx", "labels-idx", CLASSES, STORED_BYTES},
      {"gzip IDX uint8, int64 .npy labels", "bytes-idx.gz", "labels-i8.npy", CLASSES, STORED_BYTES},
      {"IDX big-endian float32", "float-idx", "labels-i4.npy", CLASSES, STORED_FLOAT32},
      {".npy uint8, float32 labels", "bytes.npy", "labels-f4.npy", CLASSES, STORED_BYTES},
      {".npy float32, float32 targets", "f4.npy", "targets.npy", 0, STORED_FLOAT32},
      {".npy big-endian float64", "f8be.npy", "labels-idx", CLASSES, STORED_FLOAT64},
      {".npy int16", "i2.npy", "labels-i8.npy", CLASSES, STORED_INT16},
  };
  char inputs[600], targets[600];
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    snprintf(inputs, sizeof inputs, "%s/%s", dir, cases[k].inputs);
    snprintf(targets, sizeof targets, "%s/%s", dir, cases[k].targets);
    adj_dataset_config c = {.inputs = inputs, .targets = targets, .n_classes = cases[k].n_classes};
    check_source(t, cases[k].what, &c, cases[k].s);
  }
#ifdef ADJ_TEST_HDF5
  snprintf(inputs, sizeof inputs, "%s/contiguous.h5", dir);
  check_source(t, "HDF5 contiguous uint8, int64 labels",
               &(adj_dataset_config){.inputs = inputs, .n_classes = CLASSES}, STORED_BYTES);
  snprintf(inputs, sizeof inputs, "%s/chunked.h5", dir);
  check_source(t, "HDF5 chunked deflated float64",
               &(adj_dataset_config){.inputs = inputs, .inputs_name = "images", .targets_name = "values"},
               STORED_FLOAT64);
#else
  adj_test_report(t, "HDF5: not in this build (adj_dataset_have_hdf5 %d)", (int)adj_dataset_have_hdf5());
#endif
}

/* The in-memory set (float64 inputs) against the formula, and the random
 * set against itself: a block read with others equals each sample read alone. */
static void check_memory_and_random(adj_test *t) {
  adj_tensor inputs, labels;
  ADJ_TEST_OK(t, adj_tensor_create(&inputs, ADJ_FLOAT64, 4, (const int64_t[]){N, C, H, W}));
  ADJ_TEST_OK(t, adj_tensor_create(&labels, ADJ_INT64, 1, (const int64_t[]){N}));
  for (int64_t i = 0; i < N; i++) {
    adj_tensor_set_int(&labels, i, label_at(i));
    for (int64_t e = 0; e < VOL; e++) adj_tensor_set(&inputs, i * VOL + e, real_at(i, e));
  }
  adj_dataset *ds = NULL;
  ADJ_TEST_OK(t, adj_dataset_from_arrays(&inputs, &labels, CLASSES, &ds));
  int64_t bad = 0;
  for (size_t k = 0; ds && k < sizeof boxes / sizeof boxes[0]; k++) bad += compare_block(t, ds, STORED_FLOAT64, &boxes[k], ADJ_FLOAT64);
  if (ds) bad += compare_labels(t, ds);
  adj_dataset_destroy(&ds);
  adj_tensor_destroy(&inputs), adj_tensor_destroy(&labels);
  adj_dataset *r = NULL;
  ADJ_TEST_OK(t, adj_dataset_random(N, 3, (const int64_t[]){C, H, W}, CLASSES, 540, &r));
  adj_tensor block, alone;
  adj_box part = {.rank = 4, .start = {0, 1, 1, 2}, .extent = {B, 1, 2, 3}}, one = part;
  one.extent[0] = 1;
  ADJ_TEST_OK(t, adj_tensor_create(&block, ADJ_FLOAT64, 4, part.extent));
  ADJ_TEST_OK(t, adj_tensor_create(&alone, ADJ_FLOAT64, 4, one.extent));
  if (r) ADJ_TEST_OK(t, adj_dataset_read_inputs(r, batch, B, &part, &block));
  for (int64_t p = 0; r && p < B; p++) {
    ADJ_TEST_OK(t, adj_dataset_read_inputs(r, &batch[p], 1, &one, &alone));
    for (int64_t e = 0; e < 6; e++) {
      double v = adj_tensor_get(&alone, e);
      bad += v != adj_tensor_get(&block, p * 6 + e) || !(v >= 0 && v < 1);
    }
  }
  ADJ_TEST_CHECK(t, bad == 0, "memory and random sets: %lld values differ", (long long)bad);
  adj_test_report(t, "in-memory set equals the values given; random set reads alike in a batch and alone");
  adj_tensor_destroy(&block), adj_tensor_destroy(&alone);
  adj_dataset_destroy(&r);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t540-data-sources");
  char dir[256] = "";
  nc_make_dir(&t, "t540", dir, sizeof dir);
  write_sources(&t, dir);
  MPI_Barrier(t.comm);
  check_files(&t, dir);
  check_memory_and_random(&t);
  nc_remove_dir(&t, dir);
  return adj_test_finish(&t);
}

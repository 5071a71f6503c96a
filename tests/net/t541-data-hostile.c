/* t541: hostile data files refused with the file and the bad value named, on
 * every rank, promptly, leaving no data set behind.
 *
 * .npy: cut short, longer than its header says, a header length past the
 * end, shapes whose product overflows, negative and 20-digit extents, a
 * 0-dimensional array, Fortran order, object, structured, complex and
 * float16 arrays, missing, unknown and repeated keys, a foreign magic and
 * version; labels that are not whole numbers or out of range; counts that
 * disagree; a FIFO; a 1 GB sparse file behind a small header, and 1 GB of
 * zeros.  HDF5: a file cut in half, a missing dataset, a dataset of strings,
 * a scalar dataset, and (in a build without HDF5) any HDF5 file.  Each
 * refusal prints how long it took. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef ADJ_TEST_HDF5
#include <hdf5.h>
#endif

#include "net_check.h"

enum { N = 10, CLASSES = 10 };

static char dir[256];

static const char *in_dir(const char *name) {
  static char paths[4][600];
  static int next;
  char *path = paths[next++ % 4];
  snprintf(path, sizeof paths[0], "%s/%s", dir, name);
  return path;
}

/* A .npy file with this header text (padded as numpy pads it) and `bytes`
 * bytes of data (NULL: a pattern); rank 0 writes, everyone waits. */
static void write_npy_data(adj_test *t, const char *name, const char *header, const void *given, int64_t bytes) {
  if (t->rank == 0) {
    char head[512];
    int n = snprintf(head + 10, sizeof head - 10, "%s", header);
    int total = (10 + n + 1 + 63) / 64 * 64;
    memset(head + 10 + n, ' ', (size_t)(total - 10 - n - 1));
    head[total - 1] = '\n';
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = (char)((total - 10) & 0xff), head[9] = (char)((total - 10) >> 8);
    FILE *f = fopen(in_dir(name), "wb");
    uint8_t *data = calloc((size_t)bytes + 1, 1);
    for (int64_t i = 0; i < bytes; i++) data[i] = given ? ((const uint8_t *)given)[i] : (uint8_t)(i % 3);
    ADJ_TEST_CHECK(t, f && fwrite(head, 1, (size_t)total, f) == (size_t)total &&
                          fwrite(data, 1, (size_t)bytes, f) == (size_t)bytes, "cannot write %s", name);
    if (f) fclose(f);
    free(data);
  }
  MPI_Barrier(t->comm);
}

static void write_npy(adj_test *t, const char *name, const char *header, int64_t bytes) {
  write_npy_data(t, name, header, NULL, bytes);
}

/* Opens inputs and targets; the refusal must carry `phrase` on every rank. */
static void expect_refusal(adj_test *t, const char *what, const char *inputs, const char *targets, int n_classes,
                           const char *phrase) {
  adj_dataset *ds = (adj_dataset *)&ds;
  adj_dataset_config c = {.inputs = in_dir(inputs), .targets = targets ? in_dir(targets) : NULL,
                          .n_classes = n_classes};
  double start = MPI_Wtime();
  int status = adj_dataset_open(t->comm, &c, &ds);
  double seconds = MPI_Wtime() - start;
  adj_test_expect_error(t, what, status, ADJ_TEST_ANY_ERROR, phrase);
  ADJ_TEST_CHECK(t, ds == NULL, "%s: a refused open left a data set behind", what);
  if (!status) adj_dataset_destroy(&ds);
  adj_test_report(t, "%-40s refused in %.3f s: %s", what, seconds, adj_last_error());
}

static const char labels_header[] = "{'descr': '<i8', 'fortran_order': False, 'shape': (10,), }";

static void npy_headers(adj_test *t) {
  static const struct {
    const char *what, *header;
    int64_t bytes;
    const char *phrase;
  } cases[] = {
      {"cut short", "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 4), }", 150,
       "is truncated: its shape and descr need 160 bytes of data, found 150"},
      {"longer than its shape", "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 4), }", 161,
       "has trailing data: its shape and descr need 160 bytes of data, found 161"},
      {"product of extents overflows", "{'descr': '<f8', 'fortran_order': False, 'shape': (10, 4611686018427387904), }",
       80, "beyond int64"},
      {"negative extent", "{'descr': '<f4', 'fortran_order': False, 'shape': (10, -3), }", 40,
       "shape entry 1 '-3' is out of range"},
      {"20-digit extent", "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 2), }", 80,
       "shape entry 0 '99999999999999999999' is out of range"},
      {"extent 0", "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 0), }", 0, "dimension 1 has extent 0"},
      {"0-dimensional", "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4,
       "a 0-dimensional array holds no samples"},
      {"Fortran order", "{'descr': '<f4', 'fortran_order': True, 'shape': (10, 4), }", 160, "fortran_order is True"},
      {"object array", "{'descr': '|O', 'fortran_order': False, 'shape': (10,), }", 80, "descr '|O' is an object array"},
      {"structured array", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (10,), }", 40,
       "structured arrays"},
      {"complex64", "{'descr': '<c8', 'fortran_order': False, 'shape': (10,), }", 80, "descr '<c8' is not supported"},
      {"float16", "{'descr': '<f2', 'fortran_order': False, 'shape': (10,), }", 20, "descr '<f2' is not supported"},
      {"no shape key", "{'descr': '<f4', 'fortran_order': False, }", 40, "header has no 'shape'"},
      {"unknown key", "{'descr': '<f4', 'fortran_order': False, 'shape': (10,), 'extra': 1, }", 40,
       "key 'extra' is unknown"},
      {"repeated key", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (10,), }", 40,
       "key 'descr' is given twice"},
      {"not a dict", "['descr', '<f4']", 40, "expected '{' at '['descr'"},
  };
  const int64_t labels[N] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  write_npy_data(t, "labels.npy", labels_header, labels, sizeof labels);
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    write_npy(t, "bad.npy", cases[k].header, cases[k].bytes);
    char phrase[200];
    snprintf(phrase, sizeof phrase, "inputs file '%s': ", in_dir("bad.npy"));
    if (!strstr(cases[k].phrase, "truncated") && !strstr(cases[k].phrase, "trailing"))
      expect_refusal(t, cases[k].what, "bad.npy", "labels.npy", CLASSES, phrase);
    expect_refusal(t, cases[k].what, "bad.npy", "labels.npy", CLASSES, cases[k].phrase);
  }
}

/* Raw bytes at the start of a file (rank 0), then everyone waits. */
static void write_raw(adj_test *t, const char *name, const void *data, size_t bytes, int64_t size) {
  if (t->rank == 0) {
    int fd = open(in_dir(name), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ADJ_TEST_CHECK(t, fd >= 0 && write(fd, data, bytes) == (ssize_t)bytes && (size < 0 || ftruncate(fd, size) == 0),
                   "cannot write %s", name);
    if (fd >= 0) close(fd);
  }
  MPI_Barrier(t->comm);
}

static void npy_preambles(adj_test *t) {
  write_raw(t, "magic.npy", "\x93NUMPX\x01\x00\x10\x00{}", 12, -1);
  expect_refusal(t, "foreign magic", "magic.npy", "labels.npy", CLASSES,
                 "is not IDX, .npy or HDF5: it begins with bytes 93 4e 55 4d 50 58");
  write_raw(t, "version.npy", "\x93NUMPY\x09\x00\x10\x00{}", 12, -1);
  expect_refusal(t, "format version 9", "version.npy", "labels.npy", CLASSES, ".npy format version 9.0");
  write_raw(t, "long-header.npy", "\x93NUMPY\x01\x00\x60\xea{}", 12, -1);
  expect_refusal(t, "header length past the end", "long-header.npy", "labels.npy", CLASSES,
                 "is truncated: its .npy header claims 60000 bytes, but the file has 12 in all");
}

/* Labels and counts: checked on every rank's share, refused by name. */
static void npy_labels(adj_test *t) {
  const float halves[N] = {0, 1, 2, 3, 4.5f, 5, 6, 7, 8, 9};
  const int64_t negative[N] = {0, 1, 2, 3, 4, 5, 6, 7, -1, 9};
  write_npy(t, "inputs.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (10, 2), }", 20);
  write_npy_data(t, "halves.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (10,), }", halves, sizeof halves);
  write_npy_data(t, "negative.npy", labels_header, negative, sizeof negative);
  expect_refusal(t, "label 4.5", "inputs.npy", "halves.npy", CLASSES,
                 "label 4.5 of sample 4 is not a whole number in [0, 10)");
  expect_refusal(t, "label -1", "inputs.npy", "negative.npy", CLASSES, "label -1 of sample 8 is outside [0, 10)");
  expect_refusal(t, "label 2 of 2 classes", "inputs.npy", "labels.npy", 2, "is outside [0, 2)");
  write_npy(t, "short-labels.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (9,), }", 72);
  expect_refusal(t, "10 inputs, 9 labels", "inputs.npy", "short-labels.npy", CLASSES, "holds 10 samples but targets");
  expect_refusal(t, ".npy inputs without targets", "inputs.npy", NULL, CLASSES,
                 "only an HDF5 file holds inputs and targets");
}

/* A FIFO must not block the open; 1 GB files must cost neither the time to
 * read them nor their size in memory. */
static void special_files(adj_test *t) {
  if (t->rank == 0) ADJ_TEST_CHECK(t, mkfifo(in_dir("fifo.npy"), 0600) == 0, "cannot make a FIFO");
  MPI_Barrier(t->comm);
  expect_refusal(t, "a FIFO", "fifo.npy", "labels.npy", CLASSES, "fifo.npy: is a FIFO, not a regular file");
  expect_refusal(t, "a directory", ".", "labels.npy", CLASSES, "is a directory, not a regular file");
  expect_refusal(t, "a missing file", "missing.npy", "labels.npy", CLASSES, "missing.npy: cannot open it: No such file or directory");
  write_npy(t, "gigabyte.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 4), }", 160);
  if (t->rank == 0) ADJ_TEST_CHECK(t, truncate(in_dir("gigabyte.npy"), (off_t)1 << 30) == 0, "cannot grow");
  MPI_Barrier(t->comm);
  expect_refusal(t, "1 GB sparse file after a small header", "gigabyte.npy", "labels.npy", CLASSES,
                 "has trailing data: its shape and descr need 160 bytes of data, found 1073741696");
  write_raw(t, "zeros", "", 0, (int64_t)1 << 30);
  expect_refusal(t, "1 GB of zeros", "zeros", "labels.npy", CLASSES, "magic number 0x00000000 is not IDX");
  write_raw(t, "empty", "", 0, 0);
  expect_refusal(t, "an empty file", "empty", "labels.npy", CLASSES, "is empty");
  write_raw(t, "text.csv", "1,2,3\n", 6, -1);
  expect_refusal(t, "a CSV file", "text.csv", "labels.npy", CLASSES, "is not IDX, .npy or HDF5: it begins with bytes 31 2c");
}

#ifdef ADJ_TEST_HDF5
static void write_h5(adj_test *t, const char *name, bool strings, bool scalar) {
  if (t->rank == 0) {
    hid_t file = H5Fcreate(in_dir(name), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[2] = {N, 64};
    static double values[N * 64];
    hid_t space = scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(2, dims, NULL);
    hid_t type = strings ? H5Tcopy(H5T_C_S1) : H5Tcopy(H5T_NATIVE_DOUBLE);
    if (strings) H5Tset_size(type, 8);
    hid_t set = H5Dcreate2(file, "inputs", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    hsize_t label_dims[1] = {N};
    int64_t labels[N] = {0};
    hid_t label_space = H5Screate_simple(1, label_dims, NULL);
    hid_t targets = H5Dcreate2(file, "targets", H5T_NATIVE_INT64, label_space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(targets, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels);
    H5Dclose(targets), H5Sclose(label_space);
    H5Dclose(set), H5Tclose(type), H5Sclose(space), H5Fclose(file);
  }
  MPI_Barrier(t->comm);
}
#endif

static void hdf5_files(adj_test *t) {
#ifdef ADJ_TEST_HDF5
  write_h5(t, "good.h5", false, false);
  adj_dataset *ds = NULL;
  ADJ_TEST_OK(t, adj_dataset_open(t->comm, &(adj_dataset_config){.inputs = in_dir("good.h5"), .n_classes = CLASSES}, &ds));
  adj_dataset_destroy(&ds);
  write_h5(t, "cut.h5", false, false);
  struct stat st = {0};
  if (t->rank == 0) ADJ_TEST_CHECK(t, stat(in_dir("cut.h5"), &st) == 0 && truncate(in_dir("cut.h5"), st.st_size / 2) == 0, "cannot cut");
  MPI_Barrier(t->comm);
  expect_refusal(t, "HDF5 file cut in half", "cut.h5", NULL, CLASSES, "cannot be opened as HDF5: truncated file");
  const char *names[2][2] = {{"images", NULL}, {NULL, "labels"}};
  for (int k = 0; k < 2; k++) {
    adj_dataset_config named = {.inputs = in_dir("good.h5"), .inputs_name = names[k][0], .targets_name = names[k][1],
                                .n_classes = CLASSES};
    ds = (adj_dataset *)&ds;
    int status = adj_dataset_open(t->comm, &named, &ds);
    adj_test_expect_error(t, "HDF5 without the dataset", status, ADJ_ERR_IO, k ? "has no dataset 'labels'"
                                                                               : "has no dataset 'images'");
    if (!status) adj_dataset_destroy(&ds);
  }
  write_h5(t, "strings.h5", true, false);
  expect_refusal(t, "HDF5 dataset of strings", "strings.h5", NULL, CLASSES, "dataset 'inputs' holds strings of 8 bytes");
  write_h5(t, "scalar.h5", false, true);
  expect_refusal(t, "HDF5 scalar dataset", "scalar.h5", NULL, CLASSES, "dataset 'inputs' has 0 dimensions");
#else
  write_raw(t, "any.h5", "\x89HDF\r\n\x1a\n", 8, 4096);
  expect_refusal(t, "HDF5 in a build without HDF5", "any.h5", NULL, CLASSES,
                 "is HDF5, but this adjoin was built without HDF5");
#endif
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t541-data-hostile");
  nc_make_dir(&t, "t541", dir, sizeof dir);
  npy_headers(&t);
  npy_preambles(&t);
  npy_labels(&t);
  special_files(&t);
  hdf5_files(&t);
  nc_remove_dir(&t, dir);
  return adj_test_finish(&t);
}

/* Labelled image data sets read from IDX files (the MNIST format).
 *
 * An IDX file is a 4-byte magic number (two zero bytes, a type byte, 0x08 for
 * unsigned bytes, and the number of dimensions), one big-endian uint32 extent
 * per dimension, then the row-major payload.  Images are 0x00000803
 * (count, rows, cols); labels are 0x00000801 (count).  Files may be raw or
 * gzip-compressed; compression is recognised by its magic bytes (1f 8b), not
 * by the file name.
 *
 * Loading is collective: one rank reads and validates, every rank receives the
 * same data set, and a malformed file (wrong magic, truncated, counts that
 * disagree, a label outside [0, n_classes)) is the same error with the same
 * message on every rank.  Data are not part of any operator, so there is no
 * adjoint here: the data set only feeds the first layer of a network. */
#ifndef ADJOIN_DATASET_H
#define ADJOIN_DATASET_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "adjoin/rng.h"
#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_dataset {
  int64_t count;     /* N: number of samples */
  int64_t rows;      /* image height from the IDX header (28 for MNIST) */
  int64_t cols;      /* image width (28 for MNIST) */
  int n_classes;     /* every label lies in [0, n_classes) */
  adj_tensor images; /* (N, 1, rows, cols) float32, pixel bytes scaled to [0, 1] */
  uint8_t *labels;   /* (N) */
} adj_dataset;

/* Loads an image IDX file and a label IDX file (raw or .gz).  n_classes is in
 * [1, 256].  Only rank 0 of comm opens the files; the paths given on other
 * ranks are not used.  Collective on comm.  Errors, identical on every rank:
 * ADJ_ERR_IO (unreadable or malformed file: the message names the file and the
 * bad value), ADJ_ERR_ARG, ADJ_ERR_MEM, ADJ_ERR_MPI.  On error *out is NULL. */
int adj_dataset_load(MPI_Comm comm, const char *images_path, const char *labels_path, int n_classes,
                     adj_dataset **out);

/* Loads the "train" or "test" half of a directory holding the standard file
 * names: train-images-idx3-ubyte, train-labels-idx1-ubyte,
 * t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each with or without .gz
 * (the raw file wins when both exist).  Collective on comm. */
int adj_dataset_load_dir(MPI_Comm comm, const char *dir, const char *split, int n_classes, adj_dataset **out);

/* A data set of `count` random images, pixels uniform on [0, 1), with labels
 * uniform in [0, n_classes), drawn from `seed`: the same on every rank that
 * passes the same arguments.  For benchmarks and tests, whose work does not
 * depend on the pixel values.  Not collective. */
int adj_dataset_random(int64_t count, int64_t rows, int64_t cols, int n_classes, uint64_t seed, adj_dataset **out);

/* Frees the data set and sets *ds to NULL.  NULL-safe.  Not collective. */
void adj_dataset_destroy(adj_dataset **ds);

/* Fills perm[0..n) with a uniformly random permutation of 0..n-1 drawn from rng
 * (Fisher-Yates), so an epoch order is reproducible from the seed.  Not
 * collective: ranks seeded alike draw the same permutation. */
void adj_shuffle_indices(adj_rng *rng, int64_t n, int64_t *perm);

/* Copies samples indices[0..b) into images, a float32 or float64 tensor of
 * shape (b, 1, rows, cols), and labels[0..b).  Errors: ADJ_ERR_SIZE (tensor
 * shape), ADJ_ERR_DTYPE, ADJ_ERR_ARG (an index outside [0, count)).  Not
 * collective. */
int adj_dataset_batch(const adj_dataset *ds, const int64_t *indices, int64_t b, adj_tensor *images,
                      uint8_t *labels);

/* Writes an unsigned-byte IDX file (magic 0x0000080<ndims>) with ndims in
 * [1, ADJ_MAX_RANK] extents in [0, 2^32), gzip-compressed when gzip is true.
 * Not collective. Errors: ADJ_ERR_ARG, ADJ_ERR_IO. */
int adj_idx_write_ubyte(const char *path, int ndims, const int64_t *dims, const uint8_t *data, bool gzip);

ADJ_END_DECLS

#endif

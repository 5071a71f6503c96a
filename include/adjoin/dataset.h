/* Data sets: N samples, each an input array and a target, read from files
 * shard by shard, so that no rank ever holds the whole set.
 *
 * Sources, recognised by their first bytes (never by the file name):
 *   IDX    the MNIST format: any element type (unsigned/signed bytes, 16- and
 *          32-bit integers, float32, float64), 1 to 8 dimensions, the first
 *          one the sample index.  A gzip file is decompressed once into a
 *          raw cache file (see cache_dir below), since a shuffled batch
 *          reads samples anywhere.
 *   .npy   NumPy arrays in C order: unsigned and signed integers of 1 to 8
 *          bytes, float32, float64, either byte order.  Fortran order,
 *          object and structured arrays are refused.
 *   HDF5   a dataset of an HDF5 file, read through parallel HDF5 with MPI-IO:
 *          each rank reads the hyperslabs of its own samples (independent
 *          transfers, so a rank never waits in a read for another).  Integer
 *          and float datasets of any layout (contiguous or chunked, filters
 *          included).  Only in builds with HDF5 (adj_dataset_have_hdf5).
 *   random and in-memory sets for tests and benchmarks (below).
 * The inputs and the targets are two arrays with the same first extent N:
 * two files (IDX images and labels, two .npy files) or two datasets of one
 * HDF5 file.  A sample's shape is the array's shape without N; a network
 * whose input differs from it only by extents of 1 (IDX images (N, 28, 28)
 * for a network taking (B, 1, 28, 28)) reads it as its own shape
 * (adj_dataset_set_input_shape).
 *
 * Targets are class labels when n_classes > 0: one integer in
 * [0, n_classes) per sample (shape (N) or (N, 1); stored as integers, or as
 * floats that are whole numbers), checked when the set is opened.  With
 * n_classes = 0 they are arrays of any shape, read as the input is (the
 * targets a regression loss compares its input with).
 *
 * Reading: a batch is a list of sample indices, and a rank reads only the
 * block of the batch it holds: a box of (batch position, sample dimensions),
 * as adj_decomposition_local_block gives it for a network's input layout.
 * Batch position p holds sample indices[p] when p < count and zeros
 * (padding) otherwise.  Elements are converted to the block's dtype; uint8
 * INPUTS are pixel bytes and become b / 255 computed in float32 (what IDX
 * images have always been), every other type converts as it is.
 *
 * Memory: raw files (IDX, .npy) are mapped while their header is checked,
 * then read at each sample's offset (pread), so a rank's resident memory
 * holds the blocks it reads, not the file, whatever the order of the
 * samples; the ranks of a node share the file through the page cache.  (A
 * mapping would not do: the kernel maps 64 KiB around every touched sample,
 * and a rank reading a quarter of a shuffled batch maps most of the file.)
 * A file that shrinks while open is an ADJ_ERR_IO at the next read, naming
 * it.
 *
 * Files must be visible to every rank (a shared or replicated file system, as
 * MPI-IO assumes): every rank opens them.  Opening is collective, and a
 * missing or malformed file (wrong magic, a header that lies about the
 * payload, a truncated or overlong file, a FIFO or device, counts that
 * disagree, a label out of range) is ADJ_ERR_IO with the same message on
 * every rank, naming the file and the bad value.  Data are not part of any
 * operator, so there is no adjoint here: a data set only feeds a network. */
#ifndef ADJOIN_DATASET_H
#define ADJOIN_DATASET_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "adjoin/rng.h"
#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_dataset adj_dataset;

typedef struct adj_dataset_config {
  const char *inputs;       /* the inputs' file: IDX (raw or gzip), .npy or HDF5 */
  const char *targets;      /* the targets' file; NULL: the inputs' file (HDF5 only) */
  const char *inputs_name;  /* HDF5: the inputs' dataset; NULL: "inputs" */
  const char *targets_name; /* HDF5: the targets' dataset; NULL: "targets" */
  int n_classes;            /* > 0: targets are labels in [0, n_classes), at most 2^31 - 1; 0: arrays */
  /* Where gzip IDX files are decompressed, once per file version (its path,
   * size and modification time name the cache file): one rank per node
   * writes it, atomically, and every rank maps it.  NULL: $ADJ_DATA_CACHE,
   * else $XDG_CACHE_HOME/adjoin, else $HOME/.cache/adjoin, else
   * /tmp/adjoin-cache. */
  const char *cache_dir;
} adj_dataset_config;

/* Opens a data set.  Collective on comm; every rank passes the same
 * configuration.  Errors, identical on every rank: ADJ_ERR_IO (a file that
 * cannot be read or is malformed: the message names it and the bad value;
 * an HDF5 file in a build without HDF5), ADJ_ERR_ARG, ADJ_ERR_MEM,
 * ADJ_ERR_MPI.  On error *out is NULL. */
int adj_dataset_open(MPI_Comm comm, const adj_dataset_config *config, adj_dataset **out);

/* Opens the "train" or "test" half of a directory, the first of these that is
 * there, for the split's prefix P ("train" for train, "t10k" for test in IDX
 * names, the split's own name otherwise):
 *   P-images-idx3-ubyte and P-labels-idx1-ubyte, each raw or .gz (the raw
 *   file wins when both exist): the standard MNIST names;
 *   SPLIT-inputs.npy and SPLIT-targets.npy;
 *   SPLIT.h5 with datasets "inputs" and "targets"
 * (tools/idx-to-arrays.py writes the last two from the first).  The message
 * of a directory with none of them lists what was looked for.  Collective. */
int adj_dataset_open_dir(MPI_Comm comm, const char *dir, const char *split, int n_classes, adj_dataset **out);

/* True when this build reads HDF5 files (meson option -Dhdf5). */
bool adj_dataset_have_hdf5(void);

/* A data set of `count` random samples of shape sample_shape[0..rank)
 * (rank 1..7), elements uniform on [0, 1), with labels uniform in
 * [0, n_classes) (n_classes 1..2^31 - 1): computed from (seed, sample,
 * element) whenever read, so it takes no memory, reads alike in any order
 * and is the same on every rank.  For benchmarks and tests, whose work does
 * not depend on the values.  Not collective. */
int adj_dataset_random(int64_t count, int rank, const int64_t *sample_shape, int n_classes, uint64_t seed,
                       adj_dataset **out);

/* A data set held in memory: inputs (N, ...) and targets (N, ...) are copied
 * (float32, float64 or uint8 inputs; targets of any dtype, integer labels
 * when n_classes > 0).  For synthetic data; every rank holds it all.  Not
 * collective. */
int adj_dataset_from_arrays(const adj_tensor *inputs, const adj_tensor *targets, int n_classes, adj_dataset **out);

/* Closes the files and frees the data set; sets *ds to NULL.  NULL-safe.
 * Collective when the set reads HDF5 (parallel HDF5 closes a file on every
 * rank that opened it); otherwise not. */
void adj_dataset_destroy(adj_dataset **ds);

/* Samples in use (N, or the limit). */
int64_t adj_dataset_count(const adj_dataset *ds);
/* Uses only the first `count` samples from now on, 1 <= count <= N.  Not
 * collective.  ADJ_ERR_ARG otherwise. */
int adj_dataset_limit(adj_dataset *ds, int64_t count);
/* 0 for array targets. */
int adj_dataset_classes(const adj_dataset *ds);

/* The shape of one sample's input and target (without N), as stored or as
 * set below. */
int adj_dataset_input_rank(const adj_dataset *ds);
const int64_t *adj_dataset_input_shape(const adj_dataset *ds);
int adj_dataset_target_rank(const adj_dataset *ds);
const int64_t *adj_dataset_target_shape(const adj_dataset *ds);

/* Reads each sample as a row-major array of another shape of the same
 * volume (rank 0..7): e.g. (28, 28) as (1, 28, 28) or (784).  ADJ_ERR_SIZE
 * names both shapes when the volumes differ.  Not collective. */
int adj_dataset_set_input_shape(adj_dataset *ds, int rank, const int64_t *shape);
int adj_dataset_set_target_shape(adj_dataset *ds, int rank, const int64_t *shape);

/* "inputs 'data/x.npy' (.npy uint8 [60000, 1, 28, 28])": the source of the
 * inputs or the targets, for messages.  The text lives as long as ds. */
const char *adj_dataset_describe_inputs(const adj_dataset *ds);
const char *adj_dataset_describe_targets(const adj_dataset *ds);

/* Fills perm[0..n) with a uniformly random permutation of 0..n-1 drawn from rng
 * (Fisher-Yates), so an epoch order is reproducible from the seed.  Not
 * collective: ranks seeded alike draw the same permutation. */
void adj_shuffle_indices(adj_rng *rng, int64_t n, int64_t *perm);

/* Reads the block `box` of a batch's inputs (or targets) into `block`, a
 * float32 or float64 tensor whose shape is box->extent: box->rank is the
 * sample rank + 1, dimension 0 the batch position and the rest a box of the
 * sample.  Position p holds sample indices[p] for p < count and zeros for
 * p >= count; indices needs count entries (may be NULL when count is 0).
 * Not collective: each rank reads its own block.  Errors: ADJ_ERR_SIZE (a
 * block or box that does not fit the samples), ADJ_ERR_DTYPE, ADJ_ERR_ARG (an
 * index outside [0, count of the set), named with its position), ADJ_ERR_IO
 * (a read that failed, naming the file). */
int adj_dataset_read_inputs(adj_dataset *ds, const int64_t *indices, int64_t count, const adj_box *box,
                            adj_tensor *block);
int adj_dataset_read_targets(adj_dataset *ds, const int64_t *indices, int64_t count, const adj_box *box,
                             adj_tensor *block);

/* The labels of batch positions first .. first + n - 1 into labels[0..n):
 * sample indices[p]'s label for p < count, 0 for padding.  Only for
 * labelled sets (n_classes > 0).  Not collective.  Errors as above. */
int adj_dataset_read_labels(adj_dataset *ds, const int64_t *indices, int64_t count, int64_t first, int64_t n,
                            int64_t *labels);

/* Writes an unsigned-byte IDX file (magic 0x0000080<ndims>) with ndims in
 * [1, ADJ_MAX_RANK] extents in [0, 2^32), gzip-compressed when gzip is true.
 * Not collective. Errors: ADJ_ERR_ARG, ADJ_ERR_IO. */
int adj_idx_write_ubyte(const char *path, int ndims, const int64_t *dims, const uint8_t *data, bool gzip);

ADJ_END_DECLS

#endif

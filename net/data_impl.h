/* Private to net/: the arrays behind a data set (include/adjoin/dataset.h),
 * the readers of each file format, and the element conversion they share.
 *
 * An array is N samples of one shape, stored row-major sample after sample
 * with one element type.  It is read either straight from memory (bytes it
 * owns: `base`) or through a reader that copies chosen samples into a
 * buffer: a raw file by offset (pread), HDF5, the random set.  dataset.c
 * turns either into the blocks a network reads.
 *
 * Raw files (IDX, .npy) are mapped while their header is checked, then read
 * by offset.  Reading samples through the mapping would cost each rank most
 * of the file in resident memory: the kernel maps the pages around each
 * faulting address too (fault-around, 64 KiB), so 2048 random Fashion-MNIST
 * samples mapped 45 MiB of the 47 MiB file here, MADV_RANDOM or not.  pread
 * copies only the bytes asked for and leaves the file in the page cache,
 * shared by the ranks of a node. */
#ifndef ADJOIN_NET_DATA_IMPL_H
#define ADJOIN_NET_DATA_IMPL_H

#include <limits.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "adjoin/dataset.h"
#include "adjoin/tensor.h"

/* One stored element: unsigned, signed or IEEE float, of 1, 2, 4 or 8 bytes,
 * in the host's byte order or swapped. */
typedef struct adj_data_elem {
  char kind; /* 'u', 'i' or 'f' */
  int size;
  bool swap;
} adj_data_elem;

typedef struct adj_data_array adj_data_array;

/* Copies samples[0..n) restricted to `box` (a box of one sample: rank and
 * extents of the sample's shape) into raw, sample after sample, each box
 * row-major, elements as a->elem.  samples may repeat and come in any order.
 * Not collective. */
typedef int adj_data_read_fn(adj_data_array *a, const int64_t *samples, int64_t n, const adj_box *box, void *raw);

struct adj_data_array {
  char role[16];          /* "inputs" or "targets": starts every message */
  char path[PATH_MAX];    /* the file, as the user named it */
  char source[PATH_MAX + 96]; /* "'path'", or "'path' dataset '/name'": how messages name it */
  const char *format;     /* "IDX", ".npy", "HDF5", "memory", "random" */
  int rank;               /* stored dimensions, the first one N */
  int64_t shape[ADJ_MAX_RANK];
  adj_data_elem elem;
  /* In memory: sample 0's first element; NULL for a reader.  While a raw
   * file's header is parsed, the payload's place in the mapping. */
  const uint8_t *base;
  /* A raw file: its mapping while the header is parsed, its descriptor, and
   * where the payload starts. */
  void *mapping;
  int64_t mapping_bytes;
  int fd;
  int64_t data_offset;
  void *owned;            /* bytes this array owns (adj_dataset_from_arrays) */
  adj_data_read_fn *read; /* a reader's copy, when base is NULL */
  void (*close)(adj_data_array *a);
  void *impl;             /* the reader's state */
  void *buffer;           /* dataset.c's staging buffer for a reader, and its size */
  int64_t buffer_bytes;
};

/* The data set (include/adjoin/dataset.h): its two arrays, the samples in
 * use, and the shape each sample is read as. */
enum { ADJ_DATA_INPUTS = 0, ADJ_DATA_TARGETS = 1 };

struct adj_dataset {
  adj_data_array arrays[2];         /* ADJ_DATA_INPUTS, ADJ_DATA_TARGETS */
  int64_t count;                    /* samples in use */
  int n_classes;                    /* 0: array targets */
  int view_rank[2];                 /* each sample read as this shape */
  int64_t view[2][ADJ_MAX_RANK];
  char text[2][PATH_MAX + 200];     /* adj_dataset_describe_* */
};

/* Checks the labels of samples start .. start + extent - 1 (whole numbers in
 * [0, n_classes)); nothing for array targets.  Not collective.  ADJ_ERR_IO
 * naming the file, the label and its sample. */
int adj_dataset_check_labels(adj_dataset *ds, int64_t start, int64_t extent);

/* A new data set whose arrays are closed (fd -1).  ADJ_ERR_MEM. */
int adj_dataset_alloc(adj_dataset **out);
/* After the arrays are set: equal counts, labels of one number per sample,
 * the stored shapes as the views, the descriptions.  Not collective. */
int adj_dataset_finish(adj_dataset *ds);

/* Elements of one sample: the product of shape[1..rank). */
int64_t adj_data_sample_volume(const adj_data_array *a);

/* A box of one sample (start, extent over its shape) as runs of consecutive
 * elements: the trailing dimensions the box covers whole merge into one run. */
typedef struct adj_data_runs {
  int outer;        /* dimensions the runs step over: 0 .. outer - 1 */
  int64_t count;    /* runs */
  int64_t length;   /* elements per run */
  int64_t first;    /* the flat offset of the box's first element */
  int64_t extent[ADJ_MAX_RANK], stride[ADJ_MAX_RANK];
} adj_data_runs;

void adj_data_runs_init(adj_data_runs *r, int rank, const int64_t *shape, const int64_t *start, const int64_t *extent);
/* The flat offset in the sample of run k's first element. */
int64_t adj_data_run_offset(const adj_data_runs *r, int64_t k);

/* "uint8", "int16", "float32" ... for messages. */
const char *adj_data_elem_name(adj_data_elem e);

/* Converts n stored elements at src into dst (float32 or float64, from
 * element offset dst_at).  scale_bytes: uint8 elements become b / 255 in
 * float32 arithmetic. */
void adj_data_convert(const uint8_t *src, adj_data_elem e, int64_t n, bool scale_bytes, adj_tensor *dst,
                      int64_t dst_at);
/* One stored element as a double. */
double adj_data_elem_value(const uint8_t *src, adj_data_elem e);

/* Maps path read-only after checking it is a regular, non-empty file (a FIFO
 * or device is refused without blocking), and sets a->mapping,
 * mapping_bytes and fd.  Not collective.  ADJ_ERR_IO naming the file. */
int adj_data_map(adj_data_array *a, const char *path);
/* After the header is parsed: unmaps the file and reads its samples by
 * offset from now on (a->read).  ADJ_ERR_MEM. */
int adj_data_read_by_offset(adj_data_array *a);
/* Unmaps, closes, frees what the array owns; runs the reader's close. */
void adj_data_array_close(adj_data_array *a);

/* The last error, a checked number's refusal (ADJ_ERR_ARG), again as
 * ADJ_ERR_IO: the malformed file it reveals.  Returns ADJ_ERR_IO. */
int adj_data_as_io(void);

/* The first bytes of path, for recognising its format: reads up to `size`
 * bytes into head (after the regular-file check) and sets *got.  ADJ_ERR_IO
 * naming the file. */
int adj_data_sniff(const char *role, const char *path, uint8_t *head, int size, int *got);

/* The formats (net/idx.c, net/npy.c, net/hdf5_data.c).  Each parses and
 * checks the header of an already mapped file (a->mapping) and sets rank,
 * shape, elem and base; a refusal is ADJ_ERR_IO naming the file and the bad
 * value.  Not collective. */
int adj_idx_parse(adj_data_array *a);
int adj_npy_parse(adj_data_array *a);

/* A gzip IDX file decompressed into cache_dir (NULL: the default of
 * dataset.h) as a raw IDX file, unless the cache already holds this version
 * of it; the cache file's path goes to cached.  The stream is checked as it
 * is decompressed: IDX header, size claimed against what the gzip bytes can
 * hold, no truncation, no trailing data; refusals name the .gz file.
 * Collective on comm: one rank per node decompresses, then all agree. */
int adj_idx_gunzip_cached(MPI_Comm comm, const char *role, const char *path, const char *cache_dir, char *cached,
                          size_t size);

/* The same, not collective: decompresses into the new file `out` (removed
 * again on failure).  For the fuzz target. */
int adj_idx_gunzip_file(const char *role, const char *path, const char *out);

/* HDF5: opens dataset `name` of the file at path (collective on comm), or,
 * in a build without HDF5, refuses naming the file.  Sets rank, shape, elem,
 * read and close. */
int adj_hdf5_open(MPI_Comm comm, adj_data_array *a, const char *name);
bool adj_hdf5_available(void);

#endif

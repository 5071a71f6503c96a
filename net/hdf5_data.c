/* HDF5 datasets read through parallel HDF5 (MPI-IO), as HPC codes read them.
 *
 * The file is opened collectively with the MPI-IO driver; each read is an
 * independent transfer of the hyperslabs of this rank's samples, so a rank
 * never waits in a read for another (a rank that fails before its read
 * cannot hang the rest; the trainer agrees afterwards).  A shuffled batch is
 * read in sorted order, each run of consecutive samples as one hyperslab,
 * and then put into the batch's order.
 * HDF5's own error printing is off inside these calls; its innermost
 * message goes into ours. */
#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "adjoin/agree.h"
#include "data_impl.h"
#include "error_impl.h"

typedef struct h5_array {
  hid_t file, dataset, memory_type;
  uint8_t *staging;        /* the unique samples, in file order */
  int64_t staging_bytes;
  int64_t *order;          /* (sample, position) pairs, sorted */
  int64_t order_capacity;
} h5_array;

bool adj_hdf5_available(void) { return true; }

/* ---- errors --------------------------------------------------------------------------------- */

static herr_t h5_innermost(unsigned n, const H5E_error2_t *e, void *ctx) {
  if (n == 0) snprintf(ctx, 256, "%s", e->desc ? e->desc : "");
  return 0;
}

/* HDF5's innermost message (where the error was detected), for ours. */
static const char *h5_reason(char reason[256]) {
  reason[0] = '\0';
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_innermost, reason);
  if (!reason[0]) snprintf(reason, 256, "no reason given");
  return reason;
}

typedef struct h5_quiet {
  H5E_auto2_t func;
  void *data;
} h5_quiet;

static h5_quiet h5_silence(void) {
  h5_quiet q = {0};
  H5Eget_auto2(H5E_DEFAULT, &q.func, &q.data);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  return q;
}

static void h5_restore(h5_quiet q) { H5Eset_auto2(H5E_DEFAULT, q.func, q.data); }

/* ---- opening -------------------------------------------------------------------------------- */

static const char *h5_class_name(H5T_class_t c) {
  switch (c) {
  case H5T_STRING: return "strings";
  case H5T_COMPOUND: return "a compound type";
  case H5T_ENUM: return "an enum";
  case H5T_ARRAY: return "an array type";
  case H5T_BITFIELD: return "a bitfield";
  case H5T_OPAQUE: return "an opaque type";
  case H5T_REFERENCE: return "references";
  case H5T_VLEN: return "variable-length data";
  case H5T_TIME: return "a time type";
  default: return "an unknown type";
  }
}

/* The element type, read as the host's native type of the stored one. */
static int h5_element(adj_data_array *a, h5_array *h) {
  hid_t type = H5Dget_type(h->dataset);
  H5T_class_t c = type < 0 ? H5T_NO_CLASS : H5Tget_class(type);
  size_t size = type < 0 ? 0 : H5Tget_size(type);
  H5T_sign_t sign = c == H5T_INTEGER ? H5Tget_sign(type) : H5T_SGN_ERROR;
  bool ok = (c == H5T_INTEGER && (size == 1 || size == 2 || size == 4 || size == 8)) ||
            (c == H5T_FLOAT && (size == 4 || size == 8));
  if (ok) h->memory_type = H5Tget_native_type(type, H5T_DIR_ASCEND);
  if (type >= 0) H5Tclose(type);
  ADJ_CHECK(ok, ADJ_ERR_IO, "%s file %s holds %s of %zu bytes; expected integers of 1, 2, 4 or 8 bytes, float32 or "
            "float64", a->role, a->source, c == H5T_INTEGER ? "integers" : c == H5T_FLOAT ? "floats" : h5_class_name(c),
            size);
  ADJ_CHECK(h->memory_type >= 0 && H5Tget_size(h->memory_type) == size, ADJ_ERR_IO,
            "%s file %s: no native type holds its %zu-byte elements", a->role, a->source, size);
  a->elem = (adj_data_elem){.kind = c == H5T_FLOAT ? 'f' : sign == H5T_SGN_NONE ? 'u' : 'i', .size = (int)size};
  return ADJ_SUCCESS;
}

static int h5_shape(adj_data_array *a, h5_array *h) {
  char reason[256];
  hid_t space = H5Dget_space(h->dataset);
  int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
  hsize_t dims[H5S_MAX_RANK];
  if (rank >= 1 && rank <= ADJ_MAX_RANK) H5Sget_simple_extent_dims(space, dims, NULL);
  if (rank < 0) h5_reason(reason);
  if (space >= 0) H5Sclose(space);
  ADJ_CHECK(rank >= 0, ADJ_ERR_IO, "%s file %s: cannot read its shape: %s", a->role, a->source, reason);
  ADJ_CHECK(rank >= 1 && rank <= ADJ_MAX_RANK, ADJ_ERR_IO, "%s file %s has %d dimensions; expected 1 to %d (the first "
            "one the sample index)", a->role, a->source, rank, ADJ_MAX_RANK);
  a->rank = rank;
  for (int d = 0; d < rank; d++) {
    ADJ_CHECK(dims[d] > 0 && dims[d] <= (hsize_t)INT64_MAX, ADJ_ERR_IO, "%s file %s: dimension %d has extent %llu",
              a->role, a->source, d, (unsigned long long)dims[d]);
    a->shape[d] = (int64_t)dims[d];
  }
  return ADJ_SUCCESS;
}

/* A contiguous dataset's bytes must lie inside the file: a header that
 * points past the end (a truncated or doctored file) is refused here rather
 * than read as zeros. */
static int h5_check_extent(adj_data_array *a, h5_array *h) {
  hid_t plist = H5Dget_create_plist(h->dataset);
  H5D_layout_t layout = plist < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(plist);
  if (plist >= 0) H5Pclose(plist);
  if (layout != H5D_CONTIGUOUS) return ADJ_SUCCESS;
  haddr_t offset = H5Dget_offset(h->dataset);
  ADJ_CHECK(offset != HADDR_UNDEF, ADJ_ERR_IO, "%s file %s: the dataset has no data written", a->role, a->source);
  int64_t bytes = a->elem.size;
  for (int d = 0; d < a->rank; d++) bytes *= a->shape[d];
  struct stat st = {0};
  ADJ_CHECK(stat(a->path, &st) == 0, ADJ_ERR_IO, "cannot open %s file '%s'", a->role, a->path);
  ADJ_CHECK((int64_t)offset <= (int64_t)st.st_size && bytes <= (int64_t)st.st_size - (int64_t)offset, ADJ_ERR_IO,
            "%s file %s is truncated: the dataset's %lld bytes at offset %llu end past the file's %lld bytes", a->role,
            a->source, (long long)bytes, (unsigned long long)offset, (long long)st.st_size);
  return ADJ_SUCCESS;
}

static int h5_open_dataset(adj_data_array *a, h5_array *h, const char *name) {
  char reason[256];
  htri_t exists = H5Lexists(h->file, name, H5P_DEFAULT);
  ADJ_CHECK(exists > 0, ADJ_ERR_IO, "%s file '%s' has no dataset '%s'", a->role, a->path, name);
  h->dataset = H5Dopen2(h->file, name, H5P_DEFAULT);
  ADJ_CHECK(h->dataset >= 0, ADJ_ERR_IO, "%s file '%s': cannot open '%s' as a dataset: %s", a->role, a->path, name,
            h5_reason(reason));
  ADJ_CALL(h5_element(a, h));
  ADJ_CALL(h5_shape(a, h));
  return h5_check_extent(a, h);
}

static void h5_close(adj_data_array *a) {
  h5_array *h = a->impl;
  if (!h) return;
  h5_quiet q = h5_silence();
  if (h->memory_type >= 0) H5Tclose(h->memory_type);
  if (h->dataset >= 0) H5Dclose(h->dataset);
  if (h->file >= 0) H5Fclose(h->file);
  h5_restore(q);
  free(h->staging);
  free(h->order);
  free(h);
  a->impl = NULL;
}

static int h5_read(adj_data_array *a, const int64_t *samples, int64_t n, const adj_box *box, void *raw);

/* Collective on comm: H5Fopen with the MPI-IO driver.  Every rank calls it,
 * so the agreement after sees the same outcome everywhere. */
static int h5_open_file(MPI_Comm comm, adj_data_array *a, h5_array *h) {
  char reason[256];
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  ADJ_CHECK(fapl >= 0 && H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) >= 0, ADJ_ERR_IO,
            "%s file '%s': cannot set up MPI-IO access: %s", a->role, a->path, h5_reason(reason));
  h->file = H5Fopen(a->path, H5F_ACC_RDONLY, fapl);
  if (h->file < 0) h5_reason(reason); /* before the next call clears HDF5's error stack */
  H5Pclose(fapl);
  ADJ_CHECK(h->file >= 0, ADJ_ERR_IO, "%s file '%s' cannot be opened as HDF5: %s", a->role, a->path, reason);
  return ADJ_SUCCESS;
}

int adj_hdf5_open(MPI_Comm comm, adj_data_array *a, const char *name) {
  h5_array *h = calloc(1, sizeof *h);
  int status = h ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s file '%s': out of memory", a->role, a->path);
  status = adj_status_agree(comm, status, ADJ_WAIT_YIELD);
  if (status) {
    free(h);
    return status;
  }
  *h = (h5_array){.file = -1, .dataset = -1, .memory_type = -1};
  a->impl = h;
  a->close = h5_close;
  a->read = h5_read;
  a->format = "HDF5";
  snprintf(a->source, sizeof a->source, "'%s' dataset '%s'", a->path, name);
  h5_quiet q = h5_silence();
  status = h5_open_file(comm, a, h);
  status = adj_status_agree(comm, status, ADJ_WAIT_YIELD);
  if (!status) status = adj_status_agree(comm, h5_open_dataset(a, h, name), ADJ_WAIT_YIELD);
  h5_restore(q);
  return status;
}

/* ---- reading -------------------------------------------------------------------------------- */

static int h5_compare_pairs(const void *x, const void *y) {
  const int64_t *a = x, *b = y;
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1];
}

/* (sample, position) pairs sorted by sample; returns how many distinct
 * samples there are. */
static int64_t h5_sort(h5_array *h, const int64_t *samples, int64_t n) {
  for (int64_t i = 0; i < n; i++) h->order[2 * i] = samples[i], h->order[2 * i + 1] = i;
  qsort(h->order, (size_t)n, 2 * sizeof *h->order, h5_compare_pairs);
  int64_t unique = 0;
  for (int64_t i = 0; i < n; i++) unique += i == 0 || h->order[2 * i] != h->order[2 * i - 2];
  return unique;
}

static int h5_reserve(adj_data_array *a, h5_array *h, int64_t n, int64_t bytes) {
  if (n > h->order_capacity) {
    int64_t *grown = realloc(h->order, (size_t)n * 2 * sizeof *grown);
    ADJ_CHECK(grown, ADJ_ERR_MEM, "%s file %s: out of memory for %lld samples", a->role, a->source, (long long)n);
    h->order = grown, h->order_capacity = n;
  }
  if (bytes > h->staging_bytes) {
    uint8_t *grown = realloc(h->staging, (size_t)bytes);
    ADJ_CHECK(grown, ADJ_ERR_MEM, "%s file %s: out of memory for %lld bytes", a->role, a->source, (long long)bytes);
    h->staging = grown, h->staging_bytes = bytes;
  }
  return ADJ_SUCCESS;
}

/* One run of consecutive sorted samples, restricted to the box: the
 * hyperslab [first, first + count) x box of the file, read into the staging
 * buffer's slots from `slot` on. */
static herr_t h5_read_run(const h5_array *h, hid_t file_space, hid_t memory_space, const adj_box *box, int64_t first,
                          int64_t count, int64_t slot) {
  hsize_t start[H5S_MAX_RANK] = {(hsize_t)first}, extent[H5S_MAX_RANK] = {(hsize_t)count};
  hsize_t at[H5S_MAX_RANK] = {(hsize_t)slot};
  for (int d = 0; d < box->rank; d++)
    start[d + 1] = (hsize_t)box->start[d], extent[d + 1] = (hsize_t)box->extent[d], at[d + 1] = 0;
  herr_t status = H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, extent, NULL);
  if (status >= 0) status = H5Sselect_hyperslab(memory_space, H5S_SELECT_SET, at, NULL, extent, NULL);
  if (status >= 0) status = H5Dread(h->dataset, h->memory_type, memory_space, file_space, H5P_DEFAULT, h->staging);
  return status;
}

/* Reads the `unique` sorted samples into the staging buffer, in file order,
 * one transfer per run of consecutive samples. */
static int h5_read_sorted(adj_data_array *a, h5_array *h, int64_t n, int64_t unique, const adj_box *box) {
  char reason[256];
  hsize_t memory_shape[H5S_MAX_RANK] = {(hsize_t)unique};
  for (int d = 0; d < box->rank; d++) memory_shape[d + 1] = (hsize_t)box->extent[d];
  hid_t file_space = H5Dget_space(h->dataset), memory_space = H5Screate_simple(box->rank + 1, memory_shape, NULL);
  herr_t status = file_space >= 0 && memory_space >= 0 ? 0 : -1;
  for (int64_t i = 0, slot = 0; i < n && status >= 0;) {
    int64_t first = h->order[2 * i], last = first;
    while (i < n && h->order[2 * i] <= last + 1) last = h->order[2 * i], i++;
    status = h5_read_run(h, file_space, memory_space, box, first, last - first + 1, slot);
    slot += last - first + 1;
  }
  if (status < 0) h5_reason(reason);
  if (file_space >= 0) H5Sclose(file_space);
  if (memory_space >= 0) H5Sclose(memory_space);
  ADJ_CHECK(status >= 0, ADJ_ERR_IO, "%s file %s: reading %lld samples failed: %s", a->role, a->source,
            (long long)unique, reason);
  return ADJ_SUCCESS;
}

static int h5_read(adj_data_array *a, const int64_t *samples, int64_t n, const adj_box *box, void *raw) {
  h5_array *h = a->impl;
  int64_t sample_bytes = adj_box_volume(box) * a->elem.size;
  if (n == 0 || sample_bytes == 0) return ADJ_SUCCESS;
  ADJ_CALL(h5_reserve(a, h, n, n * sample_bytes));
  int64_t unique = h5_sort(h, samples, n);
  h5_quiet q = h5_silence();
  int status = h5_read_sorted(a, h, n, unique, box);
  h5_restore(q);
  ADJ_CALL(status);
  /* Staging slot k holds the k-th distinct sample; copy it to each position
   * that asked for it. */
  for (int64_t i = 0, k = -1; i < n; i++) {
    if (i == 0 || h->order[2 * i] != h->order[2 * i - 2]) k++;
    memcpy((uint8_t *)raw + h->order[2 * i + 1] * sample_bytes, h->staging + k * sample_bytes, (size_t)sample_bytes);
  }
  return ADJ_SUCCESS;
}

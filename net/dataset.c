/* Data sets: opening files of any supported format, and reading a rank's
 * block of a batch (see include/adjoin/dataset.h).
 *
 * Every rank opens the files itself, since each reads its own samples; the
 * outcome of each step that can fail is agreed (adj_status_agree) before
 * the next collective one, so a bad file is the same error on every rank and
 * no rank waits in HDF5's collective open for one that gave up.  Reading is
 * local: a block is converted run by run straight from memory (in-memory
 * sets), or from the samples a reader (a raw file by offset, HDF5, the
 * random set) copied out. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adjoin/agree.h"
#include "adjoin/dataset.h"
#include "adjoin/decomposition.h"
#include "data_impl.h"
#include "error_impl.h"

/* Labels are checked at opening in chunks of this many samples. */
#define DATASET_LABEL_CHUNK 65536

static const char *const dataset_roles[2] = {"inputs", "targets"};

typedef enum data_format { FORMAT_UNKNOWN, FORMAT_IDX, FORMAT_IDX_GZIP, FORMAT_NPY, FORMAT_HDF5 } data_format;

static const char *const format_names[] = {"unknown", "IDX", "gzip IDX", ".npy", "HDF5"};

/* ---- the set itself ----------------------------------------------------------------------- */

int adj_dataset_alloc(adj_dataset **out) {
  adj_dataset *ds = calloc(1, sizeof *ds);
  ADJ_CHECK(ds, ADJ_ERR_MEM, "data set: out of memory");
  ds->arrays[0].fd = ds->arrays[1].fd = -1;
  *out = ds;
  return ADJ_SUCCESS;
}

static void dataset_describe(adj_dataset *ds, int which) {
  const adj_data_array *a = &ds->arrays[which];
  char shape[96];
  snprintf(ds->text[which], sizeof ds->text[which], "%s %s (%s %s %s)", a->role, a->source, a->format,
           adj_data_elem_name(a->elem), adj_shape_format(shape, sizeof shape, a->rank, a->shape));
}

int adj_dataset_finish(adj_dataset *ds) {
  const adj_data_array *in = &ds->arrays[ADJ_DATA_INPUTS], *out = &ds->arrays[ADJ_DATA_TARGETS];
  ADJ_CHECK(in->shape[0] == out->shape[0], ADJ_ERR_IO, "inputs file %s holds %lld samples but targets file %s holds %lld",
            in->source, (long long)in->shape[0], out->source, (long long)out->shape[0]);
  char shape[96];
  ADJ_CHECK(ds->n_classes == 0 || adj_data_sample_volume(out) == 1, ADJ_ERR_IO,
            "targets file %s has samples of shape %s; labels need one number per sample (shape (N) or (N, 1))",
            out->source, adj_shape_format(shape, sizeof shape, out->rank - 1, out->shape + 1));
  ds->count = in->shape[0];
  for (int w = 0; w < 2; w++) {
    ds->view_rank[w] = ds->arrays[w].rank - 1;
    memcpy(ds->view[w], ds->arrays[w].shape + 1, sizeof(int64_t) * (size_t)ds->view_rank[w]);
    dataset_describe(ds, w);
  }
  return ADJ_SUCCESS;
}

void adj_dataset_destroy(adj_dataset **ds) {
  if (!ds || !*ds) return;
  for (int w = 0; w < 2; w++) adj_data_array_close(&(*ds)->arrays[w]);
  free(*ds);
  *ds = NULL;
}

bool adj_dataset_have_hdf5(void) { return adj_hdf5_available(); }

int64_t adj_dataset_count(const adj_dataset *ds) { return ds ? ds->count : 0; }
int adj_dataset_classes(const adj_dataset *ds) { return ds ? ds->n_classes : 0; }
int adj_dataset_input_rank(const adj_dataset *ds) { return ds ? ds->view_rank[ADJ_DATA_INPUTS] : 0; }
const int64_t *adj_dataset_input_shape(const adj_dataset *ds) { return ds ? ds->view[ADJ_DATA_INPUTS] : NULL; }
int adj_dataset_target_rank(const adj_dataset *ds) { return ds ? ds->view_rank[ADJ_DATA_TARGETS] : 0; }
const int64_t *adj_dataset_target_shape(const adj_dataset *ds) { return ds ? ds->view[ADJ_DATA_TARGETS] : NULL; }
const char *adj_dataset_describe_inputs(const adj_dataset *ds) { return ds ? ds->text[ADJ_DATA_INPUTS] : ""; }
const char *adj_dataset_describe_targets(const adj_dataset *ds) { return ds ? ds->text[ADJ_DATA_TARGETS] : ""; }

int adj_dataset_limit(adj_dataset *ds, int64_t count) {
  ADJ_CHECK(ds, ADJ_ERR_ARG, "adj_dataset_limit: data set is NULL");
  int64_t n = ds->arrays[ADJ_DATA_INPUTS].shape[0];
  ADJ_CHECK(count >= 1 && count <= n, ADJ_ERR_ARG, "adj_dataset_limit: %lld samples, outside [1, %lld] (%s)",
            (long long)count, (long long)n, ds->text[ADJ_DATA_INPUTS]);
  ds->count = count;
  return ADJ_SUCCESS;
}

static int dataset_set_view(adj_dataset *ds, int which, int rank, const int64_t *shape) {
  ADJ_CHECK(ds && (shape || rank == 0), ADJ_ERR_ARG, "adj_dataset_set_%s_shape: data set or shape is NULL",
            which ? "target" : "input");
  ADJ_CHECK(rank >= 0 && rank < ADJ_MAX_RANK, ADJ_ERR_ARG, "adj_dataset_set_%s_shape: rank %d is outside 0..%d",
            which ? "target" : "input", rank, ADJ_MAX_RANK - 1);
  int64_t volume = 1;
  for (int d = 0; d < rank; d++) {
    ADJ_CHECK(shape[d] >= 1, ADJ_ERR_ARG, "adj_dataset_set_%s_shape: extent %lld of dimension %d",
              which ? "target" : "input", (long long)shape[d], d);
    volume = shape[d] > INT64_MAX / volume ? INT64_MAX : volume * shape[d];
  }
  char want[96], have[96];
  const adj_data_array *a = &ds->arrays[which];
  ADJ_CHECK(volume == adj_data_sample_volume(a), ADJ_ERR_SIZE, "%s are samples of shape %s, which cannot be read as %s",
            ds->text[which], adj_shape_format(have, sizeof have, a->rank - 1, a->shape + 1),
            adj_shape_format(want, sizeof want, rank, shape));
  ds->view_rank[which] = rank;
  memcpy(ds->view[which], shape, sizeof(int64_t) * (size_t)rank);
  return ADJ_SUCCESS;
}

int adj_dataset_set_input_shape(adj_dataset *ds, int rank, const int64_t *shape) {
  return dataset_set_view(ds, ADJ_DATA_INPUTS, rank, shape);
}

int adj_dataset_set_target_shape(adj_dataset *ds, int rank, const int64_t *shape) {
  return dataset_set_view(ds, ADJ_DATA_TARGETS, rank, shape);
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

/* ---- reading ------------------------------------------------------------------------------ */

static int dataset_check_box(const adj_dataset *ds, int which, const adj_box *box, const adj_tensor *block) {
  const char *who = which ? "adj_dataset_read_targets" : "adj_dataset_read_inputs";
  ADJ_CHECK(ds && box && block, ADJ_ERR_ARG, "%s: data set, box and block are required", who);
  ADJ_CHECK(block->dtype == ADJ_FLOAT32 || block->dtype == ADJ_FLOAT64, ADJ_ERR_DTYPE,
            "%s: the block has dtype %s (float32 or float64)", who, adj_dtype_name(block->dtype));
  int rank = ds->view_rank[which] + 1;
  char have[96], extent[96], sample[96];
  ADJ_CHECK(box->rank == rank && block->rank == rank && !memcmp(block->shape, box->extent, sizeof(int64_t) * (size_t)rank),
            ADJ_ERR_SIZE, "%s: a block of shape %s for a box of extent %s, expected rank %d (batch, then the samples' "
            "%s)", who, adj_shape_format(have, sizeof have, block->rank, block->shape),
            adj_shape_format(extent, sizeof extent, box->rank, box->extent), rank,
            adj_shape_format(sample, sizeof sample, rank - 1, ds->view[which]));
  ADJ_CHECK(box->start[0] >= 0 && box->extent[0] >= 0, ADJ_ERR_SIZE, "%s: batch positions %lld + %lld", who,
            (long long)box->start[0], (long long)box->extent[0]);
  for (int d = 1; d < rank; d++)
    ADJ_CHECK(box->start[d] >= 0 && box->extent[d] >= 0 && box->start[d] + box->extent[d] <= ds->view[which][d - 1],
              ADJ_ERR_SIZE, "%s: box [%lld, %lld) of sample dimension %d is outside the extent %lld of %s", who,
              (long long)box->start[d], (long long)(box->start[d] + box->extent[d]), d - 1,
              (long long)ds->view[which][d - 1], ds->text[which]);
  return ADJ_SUCCESS;
}

/* Batch positions box->start[0] .. + *real - 1 hold samples; each index is checked. */
static int dataset_check_indices(const adj_dataset *ds, const int64_t *indices, int64_t count, int64_t first,
                                 int64_t rows, int64_t *real) {
  ADJ_CHECK(count >= 0 && (count == 0 || indices), ADJ_ERR_ARG, "data set read: %lld samples%s", (long long)count,
            count < 0 ? " (negative)" : " but no indices");
  *real = count - first < 0 ? 0 : count - first < rows ? count - first : rows;
  for (int64_t p = first; p < first + *real; p++)
    ADJ_CHECK(indices[p] >= 0 && indices[p] < ds->count, ADJ_ERR_ARG,
              "data set read: index %lld at batch position %lld is outside [0, %lld)", (long long)indices[p],
              (long long)p, (long long)ds->count);
  return ADJ_SUCCESS;
}

/* One row of the block (from element `at`): the box's runs of one sample. */
static void dataset_convert_row(const uint8_t *sample, const adj_data_runs *runs, adj_data_elem e, bool scale,
                                adj_tensor *block, int64_t at) {
  for (int64_t k = 0; k < runs->count; k++)
    adj_data_convert(sample + adj_data_run_offset(runs, k) * e.size, e, runs->length, scale, block,
                     at + k * runs->length);
}

/* From memory: each row straight from its sample. */
static void dataset_copy_memory(const adj_data_array *a, const int64_t *samples, int64_t real,
                                const adj_data_runs *runs, bool scale, adj_tensor *block) {
  int64_t sample_bytes = adj_data_sample_volume(a) * a->elem.size, row = runs->count * runs->length;
  for (int64_t i = 0; i < real; i++)
    dataset_convert_row(a->base + samples[i] * sample_bytes, runs, a->elem, scale, block, i * row);
}

/* Through a reader: the box itself when the samples are read as stored,
 * else whole samples, copied out first. */
static int dataset_copy_read(adj_data_array *a, const int64_t *samples, int64_t real, const int64_t *view,
                             int view_rank, const adj_box *box, bool scale, adj_tensor *block) {
  bool stored = view_rank == a->rank - 1 && !memcmp(view, a->shape + 1, sizeof(int64_t) * (size_t)view_rank);
  adj_box part = stored ? (adj_box){.rank = view_rank} : adj_box_whole(a->rank - 1, a->shape + 1);
  if (stored) {
    memcpy(part.start, box->start + 1, sizeof(int64_t) * (size_t)view_rank);
    memcpy(part.extent, box->extent + 1, sizeof(int64_t) * (size_t)view_rank);
  }
  int64_t part_bytes = adj_box_volume(&part) * a->elem.size, bytes = real * part_bytes;
  if (bytes > a->buffer_bytes) {
    void *grown = realloc(a->buffer, (size_t)bytes);
    ADJ_CHECK(grown, ADJ_ERR_MEM, "%s file %s: out of memory for %lld bytes", a->role, a->source, (long long)bytes);
    a->buffer = grown, a->buffer_bytes = bytes;
  }
  ADJ_CALL(a->read(a, samples, real, &part, a->buffer));
  /* The copied box is packed: one run; whole samples keep the view's runs. */
  adj_data_runs runs;
  const int64_t zero[ADJ_MAX_RANK] = {0};
  if (stored) adj_data_runs_init(&runs, view_rank, part.extent, zero, part.extent);
  else adj_data_runs_init(&runs, view_rank, view, box->start + 1, box->extent + 1);
  int64_t row = adj_box_volume(box) / (box->extent[0] ? box->extent[0] : 1);
  for (int64_t i = 0; i < real; i++)
    dataset_convert_row((const uint8_t *)a->buffer + i * part_bytes, &runs, a->elem, scale, block, i * row);
  return ADJ_SUCCESS;
}

static int dataset_read(adj_dataset *ds, int which, const int64_t *indices, int64_t count, const adj_box *box,
                        adj_tensor *block) {
  ADJ_CALL(dataset_check_box(ds, which, box, block));
  int64_t real = 0, rows = box->extent[0];
  ADJ_CALL(dataset_check_indices(ds, indices, count, box->start[0], rows, &real));
  int64_t row = rows ? adj_tensor_volume(block) / rows : 0;
  size_t width = adj_dtype_size(block->dtype);
  memset((char *)block->data + (size_t)(real * row) * width, 0, (size_t)((rows - real) * row) * width);
  if (real == 0 || row == 0) return ADJ_SUCCESS;
  adj_data_array *a = &ds->arrays[which];
  const int64_t *samples = indices + box->start[0];
  bool scale = which == ADJ_DATA_INPUTS;
  if (!a->base)
    return dataset_copy_read(a, samples, real, ds->view[which], ds->view_rank[which], box, scale, block);
  adj_data_runs runs;
  adj_data_runs_init(&runs, ds->view_rank[which], ds->view[which], box->start + 1, box->extent + 1);
  dataset_copy_memory(a, samples, real, &runs, scale, block);
  return ADJ_SUCCESS;
}

int adj_dataset_read_inputs(adj_dataset *ds, const int64_t *indices, int64_t count, const adj_box *box,
                            adj_tensor *block) {
  return dataset_read(ds, ADJ_DATA_INPUTS, indices, count, box, block);
}

int adj_dataset_read_targets(adj_dataset *ds, const int64_t *indices, int64_t count, const adj_box *box,
                             adj_tensor *block) {
  return dataset_read(ds, ADJ_DATA_TARGETS, indices, count, box, block);
}

/* The labels are read as float64 into the caller's int64 array, then
 * checked (whole numbers in range: a file that changed since it was opened
 * is caught here too) and converted in place. */
int adj_dataset_read_labels(adj_dataset *ds, const int64_t *indices, int64_t count, int64_t first, int64_t n,
                            int64_t *labels) {
  ADJ_CHECK(ds && (labels || n == 0) && first >= 0 && n >= 0, ADJ_ERR_ARG,
            "adj_dataset_read_labels: data set, labels and positions %lld + %lld", (long long)first, (long long)n);
  ADJ_CHECK(ds->n_classes > 0, ADJ_ERR_ARG, "adj_dataset_read_labels: %s are arrays, not labels",
            ds->text[ADJ_DATA_TARGETS]);
  int rank = ds->view_rank[ADJ_DATA_TARGETS] + 1;
  adj_box box = {.rank = rank, .start = {first}, .extent = {n}};
  int64_t shape[ADJ_MAX_RANK] = {n};
  for (int d = 1; d < rank; d++) box.extent[d] = shape[d] = 1;
  adj_tensor values;
  ADJ_CALL(adj_tensor_view(&values, ADJ_FLOAT64, rank, shape, labels ? (void *)labels : (void *)&shape));
  ADJ_CALL(dataset_read(ds, ADJ_DATA_TARGETS, indices, count, &box, &values));
  for (int64_t i = 0; i < n; i++) {
    double v;
    memcpy(&v, &labels[i], sizeof v);
    ADJ_CHECK(first + i >= count || (v == floor(v) && v >= 0 && v < ds->n_classes), ADJ_ERR_IO,
              "targets file %s: label %g of sample %lld is %s [0, %d)", ds->arrays[ADJ_DATA_TARGETS].source, v,
              (long long)indices[first + i], v == floor(v) ? "outside" : "not a whole number in", ds->n_classes);
    labels[i] = (int64_t)v;
  }
  return ADJ_SUCCESS;
}

/* ---- opening ------------------------------------------------------------------------------ */

static data_format dataset_format(const uint8_t *h, int n) {
  if (n >= 8 && !memcmp(h, "\x89HDF\r\n\x1a\n", 8)) return FORMAT_HDF5;
  if (n >= 6 && !memcmp(h, "\x93NUMPY", 6)) return FORMAT_NPY;
  if (n >= 2 && h[0] == 0x1f && h[1] == 0x8b) return FORMAT_IDX_GZIP;
  if (n >= 3 && h[0] == 0 && h[1] == 0) return FORMAT_IDX; /* the parser checks the rest */
  return FORMAT_UNKNOWN;
}

static int dataset_unknown_format(const adj_data_array *a, const uint8_t *h, int n) {
  char bytes[40] = "";
  for (int i = 0; i < n && i < 8; i++) snprintf(bytes + 3 * i, sizeof bytes - 3 * (size_t)i, " %02x", h[i]);
  if (n == 0) return adj_error_set(ADJ_ERR_IO, "%s file '%s' is empty", a->role, a->path);
  return adj_error_set(ADJ_ERR_IO, "%s file '%s' is not IDX, .npy or HDF5: it begins with bytes%s", a->role, a->path,
                       bytes);
}

/* The format of this rank's file, which must be rank 0's too: a later
 * collective step (HDF5's open) must be taken by every rank or none. */
static int dataset_sniff(MPI_Comm comm, const adj_data_array *a, bool targets_in_inputs, data_format *format) {
  uint8_t head[8];
  int got = 0;
  int status = adj_data_sniff(a->role, a->path, head, sizeof head, &got);
  *format = status ? FORMAT_UNKNOWN : dataset_format(head, got);
  if (!status && *format == FORMAT_UNKNOWN) status = dataset_unknown_format(a, head, got);
  if (!status && targets_in_inputs && *format != FORMAT_HDF5)
    status = adj_error_set(ADJ_ERR_ARG, "targets: no file given, and only an HDF5 file holds inputs and targets "
                           "together (the inputs file '%s' is %s)", a->path, format_names[*format]);
  ADJ_CALL(adj_status_agree(comm, status, ADJ_WAIT_YIELD));
  int first = (int)*format;
  ADJ_CALL_MPI(MPI_Bcast(&first, 1, MPI_INT, 0, comm));
  status = first == (int)*format ? ADJ_SUCCESS
                                 : adj_error_set(ADJ_ERR_IO, "%s file '%s' is %s here but %s on rank 0: the ranks see "
                                                 "different files", a->role, a->path, format_names[*format],
                                                 format_names[first]);
  return adj_status_agree(comm, status, ADJ_WAIT_YIELD);
}

/* A raw IDX or .npy file (possibly the cache of a gzip one): mapped and
 * parsed, then read by offset. */
static int dataset_map(adj_data_array *a, const char *path, data_format format) {
  ADJ_CALL(adj_data_map(a, path));
  snprintf(a->path, sizeof a->path, "%s", path);
  ADJ_CALL(format == FORMAT_NPY ? adj_npy_parse(a) : adj_idx_parse(a));
  return adj_data_read_by_offset(a);
}

static int dataset_open_array(MPI_Comm comm, const adj_dataset_config *c, int which, adj_data_array *a) {
  bool shared = which == ADJ_DATA_TARGETS && !c->targets;
  const char *path = which == ADJ_DATA_TARGETS && c->targets ? c->targets : c->inputs;
  const char *name = which == ADJ_DATA_INPUTS ? (c->inputs_name ? c->inputs_name : "inputs")
                                              : (c->targets_name ? c->targets_name : "targets");
  snprintf(a->role, sizeof a->role, "%s", dataset_roles[which]);
  snprintf(a->path, sizeof a->path, "%s", path);
  snprintf(a->source, sizeof a->source, "'%s'", path);
  data_format format;
  ADJ_CALL(dataset_sniff(comm, a, shared, &format));
  if (format == FORMAT_HDF5) return adj_hdf5_open(comm, a, name);
  char cached[PATH_MAX];
  if (format == FORMAT_IDX_GZIP) {
    ADJ_CALL(adj_idx_gunzip_cached(comm, a->role, path, c->cache_dir, cached, sizeof cached));
    path = cached;
  }
  return adj_status_agree(comm, dataset_map(a, path, format), ADJ_WAIT_YIELD);
}

int adj_dataset_check_labels(adj_dataset *ds, int64_t start, int64_t extent) {
  if (ds->n_classes == 0 || extent == 0) return ADJ_SUCCESS;
  int64_t *buffer = malloc(2 * sizeof(int64_t) * DATASET_LABEL_CHUNK);
  ADJ_CHECK(buffer, ADJ_ERR_MEM, "data set: out of memory checking labels");
  int status = ADJ_SUCCESS;
  for (int64_t done = 0; !status && done < extent; done += DATASET_LABEL_CHUNK) {
    int64_t n = extent - done < DATASET_LABEL_CHUNK ? extent - done : DATASET_LABEL_CHUNK;
    for (int64_t i = 0; i < n; i++) buffer[i] = start + done + i;
    status = adj_dataset_read_labels(ds, buffer, n, 0, n, buffer + DATASET_LABEL_CHUNK);
  }
  free(buffer);
  return status;
}

/* Every label, each rank checking its share of the samples. */
static int dataset_check_labels(MPI_Comm comm, adj_dataset *ds) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int64_t start, extent;
  adj_balanced_block(ds->count, size, rank, &start, &extent);
  return adj_status_agree(comm, adj_dataset_check_labels(ds, start, extent), ADJ_WAIT_YIELD);
}

static int dataset_check_config(const adj_dataset_config *c, adj_dataset **out) {
  ADJ_CHECK(out, ADJ_ERR_ARG, "adj_dataset_open: out is NULL");
  *out = NULL;
  ADJ_CHECK(c && c->inputs && *c->inputs, ADJ_ERR_ARG, "adj_dataset_open: no inputs file given");
  ADJ_CHECK(c->n_classes >= 0, ADJ_ERR_ARG, "adj_dataset_open: n_classes %d is negative", c->n_classes);
  return ADJ_SUCCESS;
}

int adj_dataset_open(MPI_Comm comm, const adj_dataset_config *c, adj_dataset **out) {
  ADJ_CALL(adj_status_agree(comm, dataset_check_config(c, out), ADJ_WAIT_YIELD));
  adj_dataset *ds = NULL;
  ADJ_CALL(adj_status_agree(comm, adj_dataset_alloc(&ds), ADJ_WAIT_YIELD));
  ds->n_classes = c->n_classes;
  int status = dataset_open_array(comm, c, ADJ_DATA_INPUTS, &ds->arrays[ADJ_DATA_INPUTS]);
  if (!status) status = dataset_open_array(comm, c, ADJ_DATA_TARGETS, &ds->arrays[ADJ_DATA_TARGETS]);
  if (!status) status = adj_status_agree(comm, adj_dataset_finish(ds), ADJ_WAIT_YIELD);
  if (!status) status = dataset_check_labels(comm, ds);
  if (status) adj_dataset_destroy(&ds);
  *out = ds;
  return status;
}

/* ---- a directory ---------------------------------------------------------------------------- */

/* dir/name, or dir/name.gz when only that is readable (allow_gzip). */
static bool dataset_find(const char *dir, const char *name, bool allow_gzip, char *path, size_t size) {
  int n = snprintf(path, size, "%s/%s", dir, name);
  if (n <= 0 || (size_t)n + 4 > size) return false;
  if (access(path, R_OK) == 0) return true;
  if (!allow_gzip) return false;
  strcat(path, ".gz");
  return access(path, R_OK) == 0;
}

/* The first layout of dataset.h's list found in dir. */
static int dataset_find_split(const char *dir, const char *split, char inputs[PATH_MAX], char targets[PATH_MAX]) {
  const char *prefix = !strcmp(split, "train") ? "train" : "t10k";
  char images[64], labels[64], npy_in[64], npy_out[64], h5[64];
  snprintf(images, sizeof images, "%s-images-idx3-ubyte", prefix);
  snprintf(labels, sizeof labels, "%s-labels-idx1-ubyte", prefix);
  snprintf(npy_in, sizeof npy_in, "%s-inputs.npy", split);
  snprintf(npy_out, sizeof npy_out, "%s-targets.npy", split);
  snprintf(h5, sizeof h5, "%s.h5", split);
  if (dataset_find(dir, images, true, inputs, PATH_MAX) && dataset_find(dir, labels, true, targets, PATH_MAX))
    return ADJ_SUCCESS;
  if (dataset_find(dir, npy_in, false, inputs, PATH_MAX) && dataset_find(dir, npy_out, false, targets, PATH_MAX))
    return ADJ_SUCCESS;
  if (dataset_find(dir, h5, false, inputs, PATH_MAX)) {
    targets[0] = '\0';
    return ADJ_SUCCESS;
  }
  return adj_error_set(ADJ_ERR_IO, "no %s data in '%s': none of %s and %s (raw or .gz), %s and %s, or %s is readable",
                       split, dir, images, labels, npy_in, npy_out, h5);
}

int adj_dataset_open_dir(MPI_Comm comm, const char *dir, const char *split, int n_classes, adj_dataset **out) {
  int status = out ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_ARG, "adj_dataset_open_dir: out is NULL");
  if (!status && !(split && (!strcmp(split, "train") || !strcmp(split, "test"))))
    status = adj_error_set(ADJ_ERR_ARG, "adj_dataset_open_dir: split '%s' is not \"train\" or \"test\"",
                           split ? split : "(null)");
  if (!status && !dir) status = adj_error_set(ADJ_ERR_ARG, "adj_dataset_open_dir: dir is NULL");
  char inputs[PATH_MAX] = "", targets[PATH_MAX] = "";
  if (!status) status = dataset_find_split(dir, split, inputs, targets);
  if (out) *out = NULL;
  ADJ_CALL(adj_status_agree(comm, status, ADJ_WAIT_YIELD));
  adj_dataset_config c = {.inputs = inputs, .targets = targets[0] ? targets : NULL, .n_classes = n_classes};
  return adj_dataset_open(comm, &c, out);
}

/* The arrays behind a data set: files mapped to check their headers and
 * read by offset, element types and their conversion (see data_impl.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "adjoin/file.h"
#include "data_impl.h"
#include "error_impl.h"

int64_t adj_data_sample_volume(const adj_data_array *a) {
  int64_t v = 1;
  for (int d = 1; d < a->rank; d++) v *= a->shape[d];
  return v;
}

int adj_data_as_io(void) {
  char message[1024];
  snprintf(message, sizeof message, "%s", adj_last_error());
  return adj_error_set(ADJ_ERR_IO, "%s", message);
}

void adj_data_runs_init(adj_data_runs *r, int rank, const int64_t *shape, const int64_t *start, const int64_t *extent) {
  *r = (adj_data_runs){.count = 1, .length = 1};
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; d--) {
    r->stride[d] = stride;
    r->extent[d] = extent[d];
    r->first += start[d] * stride;
    stride *= shape[d];
  }
  if (rank == 0) return;
  r->outer = rank - 1;
  r->length = extent[rank - 1];
  while (r->outer > 0 && extent[r->outer] == shape[r->outer]) r->length *= extent[--r->outer];
  for (int d = 0; d < r->outer; d++) r->count *= extent[d];
}

int64_t adj_data_run_offset(const adj_data_runs *r, int64_t k) {
  int64_t offset = r->first;
  for (int d = r->outer - 1; d >= 0; d--) {
    offset += (k % r->extent[d]) * r->stride[d];
    k /= r->extent[d];
  }
  return offset;
}

const char *adj_data_elem_name(adj_data_elem e) {
  static const char *const names[3][4] = {{"uint8", "uint16", "uint32", "uint64"},
                                          {"int8", "int16", "int32", "int64"},
                                          {"float8?", "float16", "float32", "float64"}};
  int row = e.kind == 'u' ? 0 : e.kind == 'i' ? 1 : 2, col = e.size == 1 ? 0 : e.size == 2 ? 1 : e.size == 4 ? 2 : 3;
  return names[row][col];
}

double adj_data_elem_value(const uint8_t *src, adj_data_elem e) {
  uint8_t b[8];
  for (int i = 0; i < e.size; i++) b[i] = src[e.swap ? e.size - 1 - i : i];
  if (e.kind == 'f') {
    if (e.size == 4) {
      float f;
      memcpy(&f, b, 4);
      return f;
    }
    double d;
    memcpy(&d, b, 8);
    return d;
  }
  switch (e.size) {
  case 1: return e.kind == 'u' ? (double)b[0] : (double)(int8_t)b[0];
  case 2: {
    uint16_t v;
    memcpy(&v, b, 2);
    return e.kind == 'u' ? (double)v : (double)(int16_t)v;
  }
  case 4: {
    uint32_t v;
    memcpy(&v, b, 4);
    return e.kind == 'u' ? (double)v : (double)(int32_t)v;
  }
  default: {
    uint64_t v;
    memcpy(&v, b, 8);
    return e.kind == 'u' ? (double)v : (double)(int64_t)v;
  }
  }
}

/* The element type dst holds, when a stored element needs no conversion. */
static bool data_elem_is(adj_data_elem e, adj_dtype dtype) {
  return e.kind == 'f' && !e.swap && e.size == (int)adj_dtype_size(dtype) && adj_dtype_is_float(dtype);
}

void adj_data_convert(const uint8_t *src, adj_data_elem e, int64_t n, bool scale_bytes, adj_tensor *dst,
                      int64_t dst_at) {
  size_t width = adj_dtype_size(dst->dtype);
  void *out = (char *)dst->data + (size_t)dst_at * width;
  if (data_elem_is(e, dst->dtype)) {
    memcpy(out, src, (size_t)n * width);
    return;
  }
  bool bytes = scale_bytes && e.kind == 'u' && e.size == 1;
  if (dst->dtype == ADJ_FLOAT32) {
    float *x = out;
    if (bytes)
      for (int64_t i = 0; i < n; i++) x[i] = (float)src[i] / 255.0f;
    else
      for (int64_t i = 0; i < n; i++) x[i] = (float)adj_data_elem_value(src + i * e.size, e);
    return;
  }
  double *x = out;
  if (bytes)
    for (int64_t i = 0; i < n; i++) x[i] = (double)((float)src[i] / 255.0f);
  else
    for (int64_t i = 0; i < n; i++) x[i] = adj_data_elem_value(src + i * e.size, e);
}

/* Opens a data file through adj_file_open_input: only a regular file, a
 * FIFO refused without waiting for a writer. */
static int data_open_regular(const char *role, const char *path, int *fd, int64_t *bytes) {
  char what[32];
  snprintf(what, sizeof what, "%s file", role);
  return adj_file_open_input(path, what, -1, fd, bytes);
}

int adj_data_sniff(const char *role, const char *path, uint8_t *head, int size, int *got) {
  int fd = -1;
  int64_t bytes = 0;
  ADJ_CALL(data_open_regular(role, path, &fd, &bytes));
  ssize_t n = pread(fd, head, (size_t)size, 0);
  int saved = errno;
  close(fd);
  ADJ_CHECK(n >= 0, ADJ_ERR_IO, "cannot read %s file '%s': %s", role, path, strerror(saved));
  *got = (int)n;
  return ADJ_SUCCESS;
}

int adj_data_map(adj_data_array *a, const char *path) {
  int64_t bytes = 0;
  ADJ_CALL(data_open_regular(a->role, path, &a->fd, &bytes));
  ADJ_CHECK(bytes > 0, ADJ_ERR_IO, "%s file '%s' is empty", a->role, path);
  ADJ_CHECK((uint64_t)bytes <= SIZE_MAX, ADJ_ERR_IO, "%s file '%s': %lld bytes cannot be mapped", a->role, path,
            (long long)bytes);
  void *map = mmap(NULL, (size_t)bytes, PROT_READ, MAP_SHARED, a->fd, 0);
  ADJ_CHECK(map != MAP_FAILED, ADJ_ERR_IO, "cannot map %s file '%s' (%lld bytes): %s", a->role, path,
            (long long)bytes, strerror(errno));
  a->mapping = map;
  a->mapping_bytes = bytes;
  return ADJ_SUCCESS;
}

/* ---- reading a raw file by offset ------------------------------------------------------------ */

typedef struct data_file_reader {
  uint8_t *scratch; /* one sample's span of the box, when it is not one run */
  int64_t scratch_bytes;
} data_file_reader;

/* bytes at `offset` of the payload's file, all of them: a short read means
 * the file shrank after its header was checked. */
static int data_pread_all(adj_data_array *a, uint8_t *dst, int64_t bytes, int64_t offset, int64_t sample) {
  for (int64_t done = 0; done < bytes;) {
    ssize_t r = pread(a->fd, dst + done, (size_t)(bytes - done), (off_t)(offset + done));
    if (r < 0 && errno == EINTR) continue;
    ADJ_CHECK(r > 0, ADJ_ERR_IO, "%s file %s: reading sample %lld failed: %s", a->role, a->source, (long long)sample,
              r < 0 ? strerror(errno) : "the file ends before its header says (did it change while open?)");
    done += r;
  }
  return ADJ_SUCCESS;
}

static int data_reserve(adj_data_array *a, data_file_reader *f, int64_t bytes) {
  if (bytes <= f->scratch_bytes) return ADJ_SUCCESS;
  uint8_t *grown = realloc(f->scratch, (size_t)bytes);
  ADJ_CHECK(grown, ADJ_ERR_MEM, "%s file %s: out of memory for %lld bytes", a->role, a->source, (long long)bytes);
  f->scratch = grown, f->scratch_bytes = bytes;
  return ADJ_SUCCESS;
}

/* Each sample's span of the box in one pread: straight into raw when the
 * box is one run, else through the scratch buffer, run by run. */
static int data_file_read(adj_data_array *a, const int64_t *samples, int64_t n, const adj_box *box, void *raw) {
  data_file_reader *f = a->impl;
  adj_data_runs runs;
  adj_data_runs_init(&runs, a->rank - 1, a->shape + 1, box->start, box->extent);
  if (runs.count == 0 || runs.length == 0) return ADJ_SUCCESS;
  int64_t size = a->elem.size, run_bytes = runs.length * size, packed = runs.count * run_bytes;
  int64_t last = adj_data_run_offset(&runs, runs.count - 1) + runs.length, span = (last - runs.first) * size;
  int64_t sample_bytes = adj_data_sample_volume(a) * size;
  if (runs.count > 1) ADJ_CALL(data_reserve(a, f, span));
  for (int64_t i = 0; i < n; i++) {
    uint8_t *dst = (uint8_t *)raw + i * packed;
    int64_t offset = a->data_offset + samples[i] * sample_bytes + runs.first * size;
    ADJ_CALL(data_pread_all(a, runs.count > 1 ? f->scratch : dst, span, offset, samples[i]));
    for (int64_t k = 0; runs.count > 1 && k < runs.count; k++)
      memcpy(dst + k * run_bytes, f->scratch + (adj_data_run_offset(&runs, k) - runs.first) * size, (size_t)run_bytes);
  }
  return ADJ_SUCCESS;
}

static void data_file_close(adj_data_array *a) {
  data_file_reader *f = a->impl;
  if (f) free(f->scratch);
  free(f);
  a->impl = NULL;
}

int adj_data_read_by_offset(adj_data_array *a) {
  data_file_reader *f = calloc(1, sizeof *f);
  ADJ_CHECK(f, ADJ_ERR_MEM, "%s file %s: out of memory", a->role, a->source);
  a->data_offset = a->base - (const uint8_t *)a->mapping;
  munmap(a->mapping, (size_t)a->mapping_bytes);
  a->mapping = NULL, a->base = NULL;
  a->impl = f, a->read = data_file_read, a->close = data_file_close;
  return ADJ_SUCCESS;
}

void adj_data_array_close(adj_data_array *a) {
  if (a->close) a->close(a);
  if (a->mapping) munmap(a->mapping, (size_t)a->mapping_bytes);
  if (a->fd >= 0) close(a->fd);
  free(a->owned);
  free(a->buffer);
  *a = (adj_data_array){.fd = -1};
}

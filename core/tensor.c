#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/status.h"
#include "adjoin/tensor.h"
#include "dtype_impl.h"
#include "error_impl.h"

/* Storage is never NULL, even for zero-volume tensors: passing NULL to memcpy or
 * MPI is undefined or rejected even at length 0, and inactive workers must run
 * the same code as active ones. */
enum { ADJ_TENSOR_ALIGN = 64 };

/* Valid rank, extents >= 0, and a byte size (volume x element size) that fits
 * in int64 and size_t, so adj_tensor_volume and adj_tensor_bytes never
 * overflow for a tensor that exists. */
static int adj_check_shape(int rank, const int64_t *shape, size_t esize) {
  ADJ_CHECK(rank >= 0 && rank <= ADJ_MAX_RANK, ADJ_ERR_ARG, "tensor rank %d is outside 0..%d", rank,
            ADJ_MAX_RANK);
  ADJ_CHECK(rank == 0 || shape, ADJ_ERR_ARG, "tensor of rank %d needs a shape", rank);
  for (int i = 0; i < rank; i++)
    ADJ_CHECK(shape[i] >= 0, ADJ_ERR_ARG, "tensor extent %lld in dimension %d is negative",
              (long long)shape[i], i);
  int64_t limit = (int64_t)((uint64_t)INT64_MAX < SIZE_MAX ? (uint64_t)INT64_MAX : (uint64_t)SIZE_MAX) /
                  (int64_t)esize;
  int64_t volume = 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i] == 0) return ADJ_SUCCESS;
    char text[200];
    ADJ_CHECK(volume <= limit / shape[i], ADJ_ERR_ARG, "tensor shape %s: %zu-byte elements overflow the address space",
              adj_shape_format(text, sizeof text, rank, shape), esize);
    volume *= shape[i];
  }
  return ADJ_SUCCESS;
}

static void adj_tensor_set_header(adj_tensor *t, adj_dtype dtype, int rank, const int64_t *shape) {
  t->dtype = dtype;
  t->rank = rank;
  for (int i = 0; i < ADJ_MAX_RANK; i++) t->shape[i] = i < rank ? shape[i] : 1;
}

int adj_tensor_create(adj_tensor *t, adj_dtype dtype, int rank, const int64_t *shape) {
  ADJ_CHECK(t, ADJ_ERR_ARG, "adj_tensor_create: tensor pointer is NULL");
  ADJ_CHECK(adj_dtype_valid(dtype), ADJ_ERR_DTYPE, "adj_tensor_create: invalid dtype %d", (int)dtype);
  ADJ_CALL(adj_check_shape(rank, shape, adj_dtype_size(dtype)));
  adj_tensor_set_header(t, dtype, rank, shape);
  size_t bytes = adj_tensor_bytes(t);
  ADJ_CHECK(bytes <= SIZE_MAX - ADJ_TENSOR_ALIGN, ADJ_ERR_MEM, "adj_tensor_create: cannot allocate %zu bytes", bytes);
  size_t rounded = (bytes + ADJ_TENSOR_ALIGN - 1) / ADJ_TENSOR_ALIGN * ADJ_TENSOR_ALIGN;
  if (rounded == 0) rounded = ADJ_TENSOR_ALIGN;
  t->data = aligned_alloc(ADJ_TENSOR_ALIGN, rounded);
  t->owns_data = true;
  ADJ_CHECK(t->data, ADJ_ERR_MEM, "adj_tensor_create: cannot allocate %zu bytes", bytes);
  memset(t->data, 0, rounded);
  return ADJ_SUCCESS;
}

/* Shared, never-written storage that zero-volume views and destroyed tensors
 * point at. */
static const double adj_empty_storage[1];

int adj_tensor_view(adj_tensor *t, adj_dtype dtype, int rank, const int64_t *shape, void *data) {
  ADJ_CHECK(t, ADJ_ERR_ARG, "adj_tensor_view: tensor pointer is NULL");
  ADJ_CHECK(adj_dtype_valid(dtype), ADJ_ERR_DTYPE, "adj_tensor_view: invalid dtype %d", (int)dtype);
  ADJ_CALL(adj_check_shape(rank, shape, adj_dtype_size(dtype)));
  adj_tensor_set_header(t, dtype, rank, shape);
  ADJ_CHECK(data || adj_tensor_volume(t) == 0, ADJ_ERR_ARG,
            "adj_tensor_view: data is NULL for a tensor of volume %lld", (long long)adj_tensor_volume(t));
  t->data = data ? data : (void *)adj_empty_storage;
  t->owns_data = false;
  return ADJ_SUCCESS;
}

/* The destroyed state has volume 0 (rank 1, extent 0), so zero, copy, add,
 * fill and pack touch no bytes of the read-only storage; a rank-0 header
 * would be a one-element scalar living there. */
void adj_tensor_destroy(adj_tensor *t) {
  if (!t) return;
  if (t->owns_data) free(t->data);
  adj_tensor_set_header(t, ADJ_FLOAT64, 1, (const int64_t[]){0});
  t->data = (void *)adj_empty_storage;
  t->owns_data = false;
}

int64_t adj_tensor_volume(const adj_tensor *t) {
  int64_t v = 1;
  for (int i = 0; i < t->rank; i++) v *= t->shape[i];
  return v;
}

size_t adj_tensor_bytes(const adj_tensor *t) { return (size_t)adj_tensor_volume(t) * adj_dtype_size(t->dtype); }

double adj_tensor_get(const adj_tensor *t, int64_t i) {
  switch (t->dtype) {
  case ADJ_FLOAT32: return (double)((const float *)t->data)[i];
  case ADJ_FLOAT64: return ((const double *)t->data)[i];
  default: return (double)adj_tensor_get_int(t, i);
  }
}

void adj_tensor_set(adj_tensor *t, int64_t i, double value) {
  switch (t->dtype) {
  case ADJ_FLOAT32: ((float *)t->data)[i] = (float)value; break;
  case ADJ_FLOAT64: ((double *)t->data)[i] = value; break;
  default: adj_tensor_set_int(t, i, (int64_t)value); break;
  }
}

int64_t adj_tensor_get_int(const adj_tensor *t, int64_t i) {
  switch (t->dtype) {
  case ADJ_INT32: return ((const int32_t *)t->data)[i];
  case ADJ_INT64: return ((const int64_t *)t->data)[i];
  case ADJ_UINT8: return ((const uint8_t *)t->data)[i];
  case ADJ_FLOAT32: return (int64_t)((const float *)t->data)[i];
  case ADJ_FLOAT64: return (int64_t)((const double *)t->data)[i];
  }
  return 0;
}

/* Integers keep the low bits (modulo 2^bits, as the sums do); the signed
 * types go through their unsigned twins so that is defined C. */
void adj_tensor_set_int(adj_tensor *t, int64_t i, int64_t value) {
  switch (t->dtype) {
  case ADJ_INT32: ((int32_t *)t->data)[i] = (int32_t)(uint32_t)(uint64_t)value; break;
  case ADJ_INT64: ((int64_t *)t->data)[i] = value; break;
  case ADJ_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)(uint64_t)value; break;
  case ADJ_FLOAT32: ((float *)t->data)[i] = (float)value; break;
  case ADJ_FLOAT64: ((double *)t->data)[i] = (double)value; break;
  }
}

void adj_tensor_zero(adj_tensor *t) { memset(t->data, 0, adj_tensor_bytes(t)); }

int adj_tensor_same_shape(const adj_tensor *a, const adj_tensor *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

const char *adj_shape_format(char *buf, size_t size, int rank, const int64_t *shape) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < rank && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
  return buf;
}

int adj_tensor_check(const adj_tensor *t, adj_dtype dtype, int rank, const int64_t *shape, const char *who,
                     const char *role, const char *owner) {
  ADJ_CHECK(t, ADJ_ERR_ARG, "%s: %s tensor is NULL", who, role);
  ADJ_CHECK(t->dtype == dtype, ADJ_ERR_DTYPE, "%s: %s tensor has dtype %s but the %s works in %s", who, role,
            adj_dtype_name(t->dtype), owner, adj_dtype_name(dtype));
  int same = t->rank == rank;
  for (int i = 0; same && i < rank; i++) same = t->shape[i] == shape[i];
  char a[160], b[160];
  ADJ_CHECK(same, ADJ_ERR_SIZE, "%s: %s tensor has local shape %s but the %s expects %s", who, role,
            adj_shape_format(a, sizeof a, t->rank, t->shape), owner, adj_shape_format(b, sizeof b, rank, shape));
  return ADJ_SUCCESS;
}

static int adj_check_pair(const adj_tensor *dst, const adj_tensor *src, const char *what) {
  ADJ_CHECK(dst->dtype == src->dtype, ADJ_ERR_DTYPE, "%s: dtype %s does not match %s", what,
            adj_dtype_name(dst->dtype), adj_dtype_name(src->dtype));
  char a[128], b[128];
  ADJ_CHECK(adj_tensor_same_shape(dst, src), ADJ_ERR_SIZE, "%s: shape %s does not match %s", what,
            adj_shape_format(a, sizeof a, dst->rank, dst->shape), adj_shape_format(b, sizeof b, src->rank, src->shape));
  return ADJ_SUCCESS;
}

int adj_tensor_copy(adj_tensor *dst, const adj_tensor *src) {
  ADJ_CALL(adj_check_pair(dst, src, "adj_tensor_copy"));
  if (dst->data != src->data) memmove(dst->data, src->data, adj_tensor_bytes(src));
  return ADJ_SUCCESS;
}

int adj_tensor_add(adj_tensor *dst, const adj_tensor *src) {
  ADJ_CALL(adj_check_pair(dst, src, "adj_tensor_add"));
  adj_dtype_add(dst->dtype, dst->data, src->data, adj_tensor_volume(src));
  return ADJ_SUCCESS;
}

/* ---- boxes ------------------------------------------------------------------------ */

adj_box adj_box_whole(int rank, const int64_t *shape) {
  adj_box b = {.rank = rank};
  for (int i = 0; i < rank; i++) b.extent[i] = shape[i];
  return b;
}

int64_t adj_box_volume(const adj_box *b) {
  int64_t v = 1;
  for (int i = 0; i < b->rank; i++) v *= b->extent[i] > 0 ? b->extent[i] : 0;
  return v;
}

adj_box adj_box_intersect(const adj_box *a, const adj_box *b) {
  adj_box r = {.rank = a->rank};
  for (int i = 0; i < a->rank; i++) {
    int64_t lo = a->start[i] > b->start[i] ? a->start[i] : b->start[i];
    int64_t ha = a->start[i] + a->extent[i], hb = b->start[i] + b->extent[i];
    int64_t hi = ha < hb ? ha : hb;
    r.start[i] = lo;
    r.extent[i] = hi > lo ? hi - lo : 0;
  }
  return r;
}

int adj_box_inside(const adj_box *b, int rank, const int64_t *shape) {
  if (b->rank != rank) return 0;
  for (int i = 0; i < rank; i++)
    if (b->extent[i] < 0 || b->start[i] < 0 || b->start[i] + b->extent[i] > shape[i]) return 0;
  return 1;
}

/* Walks the box as a sequence of contiguous innermost runs.  The innermost
 * dimensions that the box spans completely are merged into one run, so a box
 * covering whole rows moves as a single memcpy. */
typedef struct adj_run_walker {
  int outer;                          /* number of outer dimensions iterated */
  int64_t count[ADJ_MAX_RANK];        /* extents of the outer dimensions */
  int64_t stride[ADJ_MAX_RANK];       /* element strides of the outer dimensions */
  int64_t run;                        /* elements per contiguous run */
  int64_t base;                       /* element offset of the box's first run */
} adj_run_walker;

/* The outermost dimension of the box's contiguous run: the run covers
 * dimensions first..rank-1 while the box spans each of first+1..rank-1 whole. */
static int adj_run_first(const int64_t *shape, const adj_box *box) {
  int first = box->rank;
  while (first > 0 && (first == box->rank || box->extent[first] == shape[first])) first--;
  return first;
}

/* A walker whose runs cover dimensions first..rank-1 (first at least
 * adj_run_first, so every run is contiguous). */
static adj_run_walker adj_run_walker_make(const int64_t *shape, const adj_box *box, int first) {
  adj_run_walker w = {0};
  int rank = box->rank;
  int64_t strides[ADJ_MAX_RANK + 1];
  strides[rank] = 1;
  for (int i = rank - 1; i >= 0; i--) strides[i] = strides[i + 1] * shape[i];
  for (int i = 0; i < rank; i++) w.base += box->start[i] * strides[i + 1];
  w.run = 1;
  for (int i = first; i < rank; i++) w.run *= box->extent[i];
  w.outer = first;
  for (int i = 0; i < first; i++) {
    w.count[i] = box->extent[i];
    w.stride[i] = strides[i + 1];
  }
  return w;
}

/* Advances a row-major index over the walker's outer dimensions, moving the
 * offsets of two walkers of equal counts along; false after the last run. */
static bool adj_run_next(const adj_run_walker *a, const adj_run_walker *b, int64_t *index, int64_t *offset_a,
                         int64_t *offset_b) {
  for (int d = a->outer - 1; d >= 0; d--) {
    *offset_a += a->stride[d], *offset_b += b->stride[d];
    if (++index[d] < a->count[d]) return true;
    *offset_a -= a->stride[d] * a->count[d], *offset_b -= b->stride[d] * b->count[d];
    index[d] = 0;
  }
  return false;
}

/* The walker's innermost outer dimension as a row of runs, `stride` elements
 * apart: the walker then advances over the dimensions outside it, and each
 * step moves a whole row, so a box of short runs (a halo's columns) costs one
 * call per row of them rather than one per run. */
typedef struct adj_run_rows {
  int64_t rows, stride;
} adj_run_rows;

static adj_run_rows adj_run_rows_take(adj_run_walker *w) {
  adj_run_rows r = {.rows = 1, .stride = 0};
  if (w->outer > 0) {
    w->outer--;
    r.rows = w->count[w->outer], r.stride = w->stride[w->outer];
  }
  return r;
}

/* rows runs of `bytes` each, dst_stride and src_stride bytes apart, copied in
 * order (memmove: the boxes of one tensor may overlap).  The run lengths of
 * small boxes get a copy of known size, which the compiler inlines. */
static void adj_move_rows(char *dst, int64_t dst_stride, const char *src, int64_t src_stride, size_t bytes,
                          int64_t rows) {
#define ADJ_MOVE_ROWS(N)                                                                                \
  for (int64_t r = 0; r < rows; r++) memmove(dst + r * dst_stride, src + r * src_stride, N);             \
  return
  switch (bytes) {
  case 4: ADJ_MOVE_ROWS(4);
  case 8: ADJ_MOVE_ROWS(8);
  case 16: ADJ_MOVE_ROWS(16);
  case 32: ADJ_MOVE_ROWS(32);
  default: ADJ_MOVE_ROWS(bytes);
  }
#undef ADJ_MOVE_ROWS
}

typedef enum adj_run_action { ADJ_RUN_PACK, ADJ_RUN_UNPACK_COPY, ADJ_RUN_UNPACK_ADD, ADJ_RUN_CLEAR } adj_run_action;

static void adj_box_walk(char *tensor, const int64_t *shape, const adj_box *box, char *buffer, adj_dtype dtype,
                         adj_run_action action) {
  if (adj_box_volume(box) == 0) return;
  int64_t esize = (int64_t)adj_dtype_size(dtype);
  adj_run_walker w = adj_run_walker_make(shape, box, adj_run_first(shape, box));
  adj_run_rows r = adj_run_rows_take(&w);
  int64_t run_bytes = w.run * esize, stride_bytes = r.stride * esize;
  int64_t index[ADJ_MAX_RANK] = {0};
  int64_t offset = w.base, unused = 0;
  do {
    char *t = tensor + offset * esize;
    switch (action) {
    case ADJ_RUN_PACK: adj_move_rows(buffer, run_bytes, t, stride_bytes, (size_t)run_bytes, r.rows); break;
    case ADJ_RUN_UNPACK_COPY: adj_move_rows(t, stride_bytes, buffer, run_bytes, (size_t)run_bytes, r.rows); break;
    case ADJ_RUN_UNPACK_ADD: adj_dtype_add_rows(dtype, t, r.stride, buffer, w.run, w.run, r.rows); break;
    case ADJ_RUN_CLEAR:
      for (int64_t k = 0; k < r.rows; k++) memset(t + k * stride_bytes, 0, (size_t)run_bytes);
      break;
    }
    if (buffer) buffer += r.rows * run_bytes;
  } while (adj_run_next(&w, &w, index, &offset, &unused));
}

void adj_tensor_pack(const adj_tensor *t, const adj_box *box, void *buf) {
  adj_box_walk(t->data, t->shape, box, buf, t->dtype, ADJ_RUN_PACK);
}

void adj_tensor_unpack(adj_tensor *t, const adj_box *box, const void *buf, adj_unpack_mode mode) {
  adj_box_walk(t->data, t->shape, box, (char *)buf, t->dtype,
               mode == ADJ_UNPACK_ADD ? ADJ_RUN_UNPACK_ADD : ADJ_RUN_UNPACK_COPY);
}

void adj_tensor_clear_box(adj_tensor *t, const adj_box *box) {
  adj_box_walk(t->data, t->shape, box, NULL, t->dtype, ADJ_RUN_CLEAR);
}

/* Box-to-box transfer: both boxes have the same extents and are walked in
 * the same row-major order, in runs contiguous in both tensors (the trailing
 * dimensions both boxes span whole merge into one run). */
void adj_tensor_copy_box(adj_tensor *dst, const adj_box *dbox, const adj_tensor *src, const adj_box *sbox,
                         adj_unpack_mode mode) {
  if (adj_box_volume(dbox) == 0) return;
  int first_d = adj_run_first(dst->shape, dbox), first_s = adj_run_first(src->shape, sbox);
  int first = first_d > first_s ? first_d : first_s;
  adj_run_walker wd = adj_run_walker_make(dst->shape, dbox, first), ws = adj_run_walker_make(src->shape, sbox, first);
  adj_run_rows rd = adj_run_rows_take(&wd), rs = adj_run_rows_take(&ws);
  int64_t esize = (int64_t)adj_dtype_size(dst->dtype);
  int64_t index[ADJ_MAX_RANK] = {0};
  int64_t doff = wd.base, soff = ws.base;
  do {
    char *d = (char *)dst->data + doff * esize;
    const char *s = (const char *)src->data + soff * esize;
    if (mode == ADJ_UNPACK_ADD)
      adj_dtype_add_rows(dst->dtype, d, rd.stride, s, rs.stride, wd.run, rd.rows);
    else
      adj_move_rows(d, rd.stride * esize, s, rs.stride * esize, (size_t)(wd.run * esize), rd.rows);
  } while (adj_run_next(&wd, &ws, index, &doff, &soff));
}

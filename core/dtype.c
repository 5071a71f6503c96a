#include <string.h>

#include "adjoin/dtype.h"
#include "adjoin/status.h"
#include "dtype_impl.h"
#include "dtype_mpi_impl.h"
#include "error_impl.h"

typedef struct adj_dtype_info {
  const char *name, *short_name;
  size_t size;
} adj_dtype_info;

static const adj_dtype_info adj_dtypes[] = {
    [ADJ_FLOAT32] = {"float32", "f32", sizeof(float)}, [ADJ_FLOAT64] = {"float64", "f64", sizeof(double)},
    [ADJ_INT32] = {"int32", "i32", sizeof(int32_t)},   [ADJ_INT64] = {"int64", "i64", sizeof(int64_t)},
    [ADJ_UINT8] = {"uint8", "u8", sizeof(uint8_t)},
};
enum { ADJ_DTYPE_COUNT = (int)(sizeof adj_dtypes / sizeof adj_dtypes[0]) };

int adj_dtype_valid(adj_dtype dtype) { return (int)dtype >= 0 && (int)dtype < ADJ_DTYPE_COUNT; }

int adj_dtype_is_float(adj_dtype dtype) { return dtype == ADJ_FLOAT32 || dtype == ADJ_FLOAT64; }

size_t adj_dtype_size(adj_dtype dtype) { return adj_dtype_valid(dtype) ? adj_dtypes[dtype].size : 0; }

const char *adj_dtype_name(adj_dtype dtype) { return adj_dtype_valid(dtype) ? adj_dtypes[dtype].name : "invalid"; }

int adj_dtype_parse(const char *text, adj_dtype *dtype) {
  ADJ_CHECK(text && dtype, ADJ_ERR_ARG, "adj_dtype_parse: %s is NULL", text ? "output dtype pointer" : "text");
  for (int d = 0; d < ADJ_DTYPE_COUNT; d++) {
    if (!strcmp(text, adj_dtypes[d].name) || !strcmp(text, adj_dtypes[d].short_name)) {
      *dtype = (adj_dtype)d;
      return ADJ_SUCCESS;
    }
  }
  return adj_error_set(ADJ_ERR_ARG, "unknown dtype '%s' (expected f32, f64, i32, i64 or u8, or the full names)",
                       text);
}

MPI_Datatype adj_dtype_mpi(adj_dtype dtype) {
  switch (dtype) {
  case ADJ_FLOAT32: return MPI_FLOAT;
  case ADJ_FLOAT64: return MPI_DOUBLE;
  case ADJ_INT32: return MPI_INT32_T;
  case ADJ_INT64: return MPI_INT64_T;
  case ADJ_UINT8: return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

/* One loop per element type; T is the stored type, U the type the add runs in
 * (the unsigned twin for signed integers, so wraparound is defined C). */
#define ADJ_ADD_ROWS_LOOP(T, U)                                                                   \
  do {                                                                                            \
    T *d = dst;                                                                                   \
    const T *s = src;                                                                             \
    for (int64_t r = 0; r < rows; r++, d += dst_stride, s += src_stride)                          \
      for (int64_t i = 0; i < n; i++) d[i] = (T)((U)d[i] + (U)s[i]);                              \
  } while (0)

void adj_dtype_add_rows(adj_dtype dtype, void *dst, int64_t dst_stride, const void *src, int64_t src_stride,
                        int64_t n, int64_t rows) {
  switch (dtype) {
  case ADJ_FLOAT32: ADJ_ADD_ROWS_LOOP(float, float); break;
  case ADJ_FLOAT64: ADJ_ADD_ROWS_LOOP(double, double); break;
  case ADJ_INT32: ADJ_ADD_ROWS_LOOP(int32_t, uint32_t); break;
  case ADJ_INT64: ADJ_ADD_ROWS_LOOP(int64_t, uint64_t); break;
  case ADJ_UINT8: ADJ_ADD_ROWS_LOOP(uint8_t, uint8_t); break;
  }
}

void adj_dtype_add(adj_dtype dtype, void *dst, const void *src, int64_t n) {
  adj_dtype_add_rows(dtype, dst, n, src, n, n, 1);
}

int adj_dtype_check_compute(const char *who, const char *what, adj_dtype dtype) {
  ADJ_CHECK(adj_dtype_valid(dtype), ADJ_ERR_DTYPE, "%s: %s has invalid dtype %d", who, what, (int)dtype);
  ADJ_CHECK(adj_dtype_is_float(dtype), ADJ_ERR_DTYPE,
            "%s: %s has dtype %s, but layers and kernels compute in float32 or float64 only (integer tensors are "
            "for data movement)",
            who, what, adj_dtype_name(dtype));
  return ADJ_SUCCESS;
}

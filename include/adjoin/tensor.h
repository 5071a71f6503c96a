/* Local tensors and boxes.
 *
 * An adj_tensor is the dense, row-major block of a (possibly distributed) tensor
 * that lives on this worker: dtype, rank 0..ADJ_MAX_RANK, extents, data.  A worker
 * outside a partition holds a zero-volume tensor (some extent 0), never NULL, so
 * every code path runs on every rank.  Tensors either own their storage (create)
 * or view someone else's (view); destroy frees only owned storage.
 *
 * An adj_box is a rectangular sub-block of a tensor (start and extent per
 * dimension).  Box pack/unpack/clear/add are the memory primitives of the DistDL
 * paper (section 2) applied to sub-blocks; every data-movement operator in
 * adjoin moves boxes.  Pack and unpack copy whole innermost contiguous runs. */
#ifndef ADJOIN_TENSOR_H
#define ADJOIN_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adjoin/dtype.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

#define ADJ_MAX_RANK 8

typedef struct adj_tensor {
  adj_dtype dtype;
  int rank;                      /* number of dimensions, 0..ADJ_MAX_RANK */
  int64_t shape[ADJ_MAX_RANK];   /* extents; unused entries are 1 */
  void *data;                    /* never NULL after create/view, even at volume 0 */
  bool owns_data;
} adj_tensor;

typedef struct adj_box {
  int rank;
  int64_t start[ADJ_MAX_RANK];
  int64_t extent[ADJ_MAX_RANK];
} adj_box;

/* Zero-filled tensor of the given shape (shape may be NULL when rank is 0).
 * Extents must be >= 0.  Not collective. */
int adj_tensor_create(adj_tensor *t, adj_dtype dtype, int rank, const int64_t *shape);

/* A tensor that views caller-owned memory; data may be NULL only at volume 0. */
int adj_tensor_view(adj_tensor *t, adj_dtype dtype, int rank, const int64_t *shape, void *data);

/* Frees owned storage and resets *t to an empty float64 view of shape [0]
 * (rank 1, volume 0): zero, copy and fill of a destroyed tensor touch
 * nothing.  NULL-safe. */
void adj_tensor_destroy(adj_tensor *t);

int64_t adj_tensor_volume(const adj_tensor *t);
size_t adj_tensor_bytes(const adj_tensor *t);

/* Element access by flat (row-major) index, converting through double.  For
 * an integer dtype, set truncates toward zero and the value must be in range
 * (use the _int pair for integers beyond 2^53 or to wrap). */
double adj_tensor_get(const adj_tensor *t, int64_t flat_index);
void adj_tensor_set(adj_tensor *t, int64_t flat_index, double value);
/* Exact integer access: get widens int32/int64/uint8 to int64 (floats
 * truncate toward zero); set stores the value modulo 2^bits of the dtype
 * (two's complement for int32, 0..255 for uint8), floats convert. */
int64_t adj_tensor_get_int(const adj_tensor *t, int64_t flat_index);
void adj_tensor_set_int(adj_tensor *t, int64_t flat_index, int64_t value);

/* dst = 0 */
void adj_tensor_zero(adj_tensor *t);
/* dst = src; shapes and dtypes must match (ADJ_ERR_SIZE / ADJ_ERR_DTYPE). */
int adj_tensor_copy(adj_tensor *dst, const adj_tensor *src);
/* dst += src; shapes and dtypes must match. */
int adj_tensor_add(adj_tensor *dst, const adj_tensor *src);
/* Nonzero when both have the same rank and extents. */
int adj_tensor_same_shape(const adj_tensor *a, const adj_tensor *b);
/* Checks that t is non-NULL and has the given dtype, rank and extents; on a
 * mismatch records "<who>: <role> tensor has local shape [..] but the <owner>
 * expects [..]" (or the dtype equivalent) and returns ADJ_ERR_ARG, _DTYPE or
 * _SIZE.  Operators and layers use it at their boundary.  Not collective. */
int adj_tensor_check(const adj_tensor *t, adj_dtype dtype, int rank, const int64_t *shape, const char *who,
                     const char *role, const char *owner);
/* Writes "[3, 4, 5]" into buf (always NUL-terminated). */
const char *adj_shape_format(char *buf, size_t size, int rank, const int64_t *shape);

/* Box of the whole tensor. */
adj_box adj_box_whole(int rank, const int64_t *shape);
int64_t adj_box_volume(const adj_box *b);
/* Intersection of two boxes of the same rank in the same index space. */
adj_box adj_box_intersect(const adj_box *a, const adj_box *b);
/* Nonzero when the box lies inside a tensor of the given shape. */
int adj_box_inside(const adj_box *b, int rank, const int64_t *shape);

typedef enum adj_unpack_mode { ADJ_UNPACK_COPY = 0, ADJ_UNPACK_ADD = 1 } adj_unpack_mode;

/* Copies the box of t into the contiguous buffer buf (row-major within the box). */
void adj_tensor_pack(const adj_tensor *t, const adj_box *box, void *buf);
/* Writes (COPY) or adds (ADD) the contiguous buffer buf into the box of t. */
void adj_tensor_unpack(adj_tensor *t, const adj_box *box, const void *buf, adj_unpack_mode mode);
/* Sets the box of t to zero. */
void adj_tensor_clear_box(adj_tensor *t, const adj_box *box);
/* Box-to-box transfer between tensors of the same dtype: dst[dbox] = / += src[sbox].
 * Both boxes must have the same extents. */
void adj_tensor_copy_box(adj_tensor *dst, const adj_box *dbox, const adj_tensor *src,
                         const adj_box *sbox, adj_unpack_mode mode);

ADJ_END_DECLS

#endif

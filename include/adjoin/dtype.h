/* Element types.  Data movement (every adj_op) works in all of them: labels
 * and indices travel as integers as images do as floats.  Compute (layers,
 * kernels, losses, the optimizer) works in float32 and float64 only and refuses
 * an integer tensor by name.  The dtype travels with the data so mismatches are
 * caught at the operator boundary instead of producing garbage.
 *
 * Sums of integers (sum-reduce, all-sum-reduce, the adjoints of broadcast and
 * all-gather, unpack-add) are taken in the integer type itself and wrap modulo
 * 2^bits in two's complement (docs/dtypes.md says why this matches MPI). */
#ifndef ADJOIN_DTYPE_H
#define ADJOIN_DTYPE_H

#include <stddef.h>
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef enum adj_dtype {
  ADJ_FLOAT32 = 0,
  ADJ_FLOAT64 = 1,
  ADJ_INT32 = 2,
  ADJ_INT64 = 3,
  ADJ_UINT8 = 4
} adj_dtype;

/* Bytes per element (4, 8, 4, 8, 1); 0 for an invalid dtype. */
size_t adj_dtype_size(adj_dtype dtype);

/* "float32" / "float64" / "int32" / "int64" / "uint8" / "invalid". */
const char *adj_dtype_name(adj_dtype dtype);

/* Nonzero when dtype is one of the supported values (any of the five). */
int adj_dtype_valid(adj_dtype dtype);

/* Nonzero for float32 and float64, the dtypes layers and kernels compute in. */
int adj_dtype_is_float(adj_dtype dtype);

/* Parses "f32", "float32", "f64", "float64", "i32", "int32", "i64", "int64",
 * "u8", "uint8".  Returns ADJ_ERR_ARG on anything else, and when text or
 * dtype is NULL. */
int adj_dtype_parse(const char *text, adj_dtype *dtype);

ADJ_END_DECLS

#endif

/* Element types.  Every tensor, operator and layer in adjoin works in float32 and
 * float64; the dtype travels with the data so mismatches are caught at the
 * operator boundary instead of producing garbage. */
#ifndef ADJOIN_DTYPE_H
#define ADJOIN_DTYPE_H

#include <stddef.h>
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef enum adj_dtype { ADJ_FLOAT32 = 0, ADJ_FLOAT64 = 1 } adj_dtype;

/* Bytes per element (4 or 8); 0 for an invalid dtype. */
size_t adj_dtype_size(adj_dtype dtype);

/* "float32" / "float64" / "invalid". */
const char *adj_dtype_name(adj_dtype dtype);

/* Nonzero when dtype is one of the supported values. */
int adj_dtype_valid(adj_dtype dtype);

/* Parses "f32", "float32", "f64", "float64". Returns ADJ_ERR_ARG on anything else. */
int adj_dtype_parse(const char *text, adj_dtype *dtype);

ADJ_END_DECLS

#endif

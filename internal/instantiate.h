/* Compiles the typed template named by ADJ_TYPED_FILE twice, once per dtype, so
 * float32 and float64 kernels come from one source instead of copy-paste twins.
 * Inside the template:
 *   adj_real        the element type (float or double)
 *   ADJ_T(name)     name suffixed _f32 / _f64 (the typed function's name)
 *   ADJ_FN(fn)      the libm function of that precision (expf / exp)
 * No include guard: each kernel file includes it once with its own template. */
#ifndef ADJ_TYPED_FILE
#error "define ADJ_TYPED_FILE before including instantiate.h"
#endif

#define adj_real float
#define ADJ_T(name) name##_f32
#define ADJ_FN(fn) fn##f
#include ADJ_TYPED_FILE
#undef adj_real
#undef ADJ_T
#undef ADJ_FN

#define adj_real double
#define ADJ_T(name) name##_f64
#define ADJ_FN(fn) fn
#include ADJ_TYPED_FILE
#undef adj_real
#undef ADJ_T
#undef ADJ_FN

#undef ADJ_TYPED_FILE

/* Elementwise exp, log, log1p, tanh and sigmoid over arrays, for the kernels
 * and layers whose pointwise math would otherwise call libm once per element:
 * each level of the kernel table maps a register of elements per call through glibc's
 * vector math library where the build has it (kernels/vector_math_level.inc).
 * An element's value depends on its input alone, never on its place in the
 * array, so split tensors get the bits of the whole. */
#ifndef ADJOIN_INTERNAL_VECTOR_MATH_IMPL_H
#define ADJOIN_INTERNAL_VECTOR_MATH_IMPL_H

#include <stddef.h>
#include <stdint.h>

typedef enum adj_vector_function {
  ADJ_VECTOR_EXP,
  ADJ_VECTOR_LOG,
  ADJ_VECTOR_LOG1P,
  ADJ_VECTOR_TANH,
  ADJ_VECTOR_SIGMOID, /* 1 / (1 + exp(-x)), by exp(-|x|): no overflow */
  ADJ_VECTOR_FUNCTIONS
} adj_vector_function;

/* y[i] = f(x[i]) for i < n, the elements float (element_bytes 4) or double
 * (8); x and y are one array or do not overlap.  At the best kernel level
 * built that the CPU runs (kernels/kernel_table.c). */
void adj_vector_math(adj_vector_function f, size_t element_bytes, const void *x, void *y, int64_t n);

#endif

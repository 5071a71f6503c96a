/* The direct convolution's kernels, and the vector math, for one instruction-set level.
 *
 * kernels/meson.build compiles this file once per level it builds, with
 * ADJ_KERNEL_LEVEL set to 4 (x86-64-v4: AVX-512, 32 zmm registers), 3
 * (x86-64-v3: AVX2 + FMA, 16 ymm) or 0 (the baseline: the compiler's default
 * target, on x86-64 SSE2 with 16 xmm and no FMA) and the matching -march.
 * Each level gets vectors as wide as its registers and register blocks that
 * fit its register file, so no level splits a "vector" over several
 * registers or spills accumulators in the inner loops.  The blocks count, per
 * multiply-add step: accumulators + the operands kept in registers + one
 * broadcast scalar (+ one product temporary without FMA). */
#include <string.h>
#if ADJ_KERNEL_LEVEL == 4
#include <immintrin.h>
#endif

#include "kernel_table.h"
#include "kernels_impl.h"

#if !defined(ADJ_KERNEL_LEVEL)
#error "ADJ_KERNEL_LEVEL must be set (kernels/meson.build)"
#endif

#if ADJ_KERNEL_LEVEL == 4
#define ADJ_LEVEL_TABLE adj_kernel_table_v4
#define ADJ_LEVEL_NAME "x86-64-v4"
enum {
  ADJ_VECTOR_BYTES = 64,      /* one zmm register */
  ADJ_DIRECT_CHANNELS = 6,    /* correlation: 6 channels x 2 vectors = 12 sums + 2 inputs + 1 weight */
  ADJ_GRADIENT_CHANNELS = 6,  /* weight gradient: 6 channels x 4 taps = 24 sums + 6 dy + 1 x */
  ADJ_GRADIENT_TAPS = 4,
  ADJ_CHANNEL_VECTORS = 2,    /* channel weight gradient: 2 vectors x 12 taps = 24 sums + 2 dy + 1 x */
  ADJ_CHANNEL_TAPS = 12,
  ADJ_CHANNEL_POSITIONS = 12, /* channel forward: 12 positions x 2 vectors = 24 sums + 2 w + 1 x */
  ADJ_BATCH_CHANNELS = 6,     /* batch input gradient: 6 channels x 2 vectors = 12 sums + 2 dy + 1 w */
  ADJ_BATCH_VECTORS = 2,
  ADJ_ROW_BLOCKS = 1,
  ADJ_ROW_BLOCK_ROWS = 8,     /* one channel by rows: 8 rows x 2 vectors = 16 sums + 7 weights + 2 inputs */
  ADJ_ROW_BLOCK_VECTORS = 2,
};
#elif ADJ_KERNEL_LEVEL == 3
#define ADJ_LEVEL_TABLE adj_kernel_table_v3
#define ADJ_LEVEL_NAME "x86-64-v3"
/* clang 14 keeps one of the 2 x 5 weight-gradient sums on the stack; 2 x 4
 * runs a first layer's dw 1.1-1.3x faster there. */
#if defined(__clang__)
#define ADJ_V3_GRADIENT_TAPS 4
#else
#define ADJ_V3_GRADIENT_TAPS 5
#endif
enum {
  ADJ_VECTOR_BYTES = 32,      /* one ymm register */
  ADJ_DIRECT_CHANNELS = 6,    /* 6 x 2 = 12 sums + 2 inputs + 1 weight = 15 of 16 */
  ADJ_GRADIENT_CHANNELS = 2,  /* 2 x 5 = 10 sums + 2 dy + 1 x + 1 lane mask = 14 (3 x 4 needs */
  ADJ_GRADIENT_TAPS = ADJ_V3_GRADIENT_TAPS, /* 17 with the mask, and spills) */
  ADJ_CHANNEL_VECTORS = 2,    /* 2 x 6 = 12 sums + 2 dy + 1 x = 15 */
  ADJ_CHANNEL_TAPS = 6,
  ADJ_CHANNEL_POSITIONS = 6,  /* 6 x 2 = 12 sums + 2 w + 1 x = 15 */
  ADJ_BATCH_CHANNELS = 6,     /* 6 x 2 = 12 sums + 2 dy + 1 w = 15 */
  ADJ_BATCH_VECTORS = 2,
  ADJ_ROW_BLOCKS = 1,
  ADJ_ROW_BLOCK_ROWS = 8,     /* 8 x 1 = 8 sums + 5 weights (kh 5) + 1 input = 14 */
  ADJ_ROW_BLOCK_VECTORS = 1,
};
#elif ADJ_KERNEL_LEVEL == 0
#define ADJ_LEVEL_TABLE adj_kernel_table_baseline
#define ADJ_LEVEL_NAME "baseline"
enum {
  ADJ_VECTOR_BYTES = 16,      /* one xmm register (SSE2; NEON on aarch64) */
  ADJ_DIRECT_CHANNELS = 5,    /* 5 x 2 = 10 sums + 2 inputs + 1 weight + 1 product = 14 of 16 */
  ADJ_GRADIENT_CHANNELS = 3,  /* 3 x 3 = 9 sums + 3 dy + 1 x + 1 product = 14 */
  ADJ_GRADIENT_TAPS = 3,
  ADJ_CHANNEL_VECTORS = 2,    /* 2 x 5 = 10 sums + 2 dy + 1 x + 1 product = 14 */
  ADJ_CHANNEL_TAPS = 5,
  ADJ_CHANNEL_POSITIONS = 5,  /* 5 x 2 = 10 sums + 2 w + 1 x + 1 product = 14 */
  ADJ_BATCH_CHANNELS = 6,     /* 6 x 2 = 12 sums + 2 dy + 1 w + 1 product = 16, no spills (the product
                               * reuses the weight's register): 1.4x faster than 6 x 1 */
  ADJ_BATCH_VECTORS = 2,
  ADJ_ROW_BLOCKS = 0,         /* one channel by rows: no faster here, in 8 x 1 or 4 x 2 blocks */
  ADJ_ROW_BLOCK_ROWS = 1,
  ADJ_ROW_BLOCK_VECTORS = 1,
};
#else
#error "ADJ_KERNEL_LEVEL must be 4, 3 or 0"
#endif

/* The correlation's blocks of one channel take this many vectors, of two
 * half as many: 8 sums + 4 inputs + 2 weights (+ 1 product) at most, within
 * every level's 16 registers. */
enum { ADJ_NARROW_VECTORS = 8 };
_Static_assert(ADJ_NARROW_VECTORS <= 2 * ADJ_DIRECT_CHANNELS, "a one-channel block's sums must fit the block's array");

/* The one-channel row blocks take taps of up to this many rows (kernel
 * height), whose weights stay in registers, and at most ADJ_ROW_WEIGHTS
 * weights laid out densely (input channels x tap columns x rows). */
enum { ADJ_ROW_TAPS = 7, ADJ_ROW_WEIGHTS = 512 };

/* The weight gradient's tap switch lists blocks of 1-4 taps and runs a
 * level's own block size as its default case. */
_Static_assert(ADJ_GRADIENT_TAPS <= 5, "a weight-gradient tap block above 5 needs its case in conv_direct_typed.inc");

/* AVX-512's masked moves make a vector's first lanes as cheap as all of them. */
#define ADJ_MASKED_LANES (ADJ_KERNEL_LEVEL == 4)

/* The bias gradient's float64 partial sums: two vectors of the level's width
 * (four were slower at x86-64-v3 and no faster at the others). */
typedef double adj_sum_vec __attribute__((vector_size(ADJ_VECTOR_BYTES)));
#define ADJ_SUM_LANES ((int)(ADJ_VECTOR_BYTES / sizeof(double)))
enum { ADJ_SUM_VECTORS = 2 };

/* The loops over a block's vectors, taps and rows (compile-time counts) must
 * unroll completely, so that each sum stays in a register: GCC's `unroll n`
 * does so for counts up to n.  clang, given the same pragma, left them rolled
 * and the sums in memory (the LeNet conv1 forward ran 4.7x slower), so it is
 * asked for the whole unroll in its own words. */
#if defined(__clang__)
#define ADJ_UNROLL(n) _Pragma("clang loop unroll(full)")
#else
#define ADJ_UNROLL_PRAGMA(text) _Pragma(#text)
#define ADJ_UNROLL(n) ADJ_UNROLL_PRAGMA(GCC unroll n)
#endif

#define ADJ_TYPED_FILE "conv_direct_typed.inc"
#include "instantiate.h"
#include "vector_math_level.inc"

const adj_kernel_table ADJ_LEVEL_TABLE = {
    .isa = ADJ_LEVEL_NAME,
    .vector_bytes = ADJ_VECTOR_BYTES,
    .masked_lanes = ADJ_MASKED_LANES,
    .correlate = {correlate_f32, correlate_f64},
    .correlation_gradient = {correlation_gradient_f32, correlation_gradient_f64},
    .channel_gradient = {channel_gradient_f32, channel_gradient_f64},
    .channel_forward = {channel_forward_f32, channel_forward_f64},
    .batch_gradient = {batch_gradient_f32, batch_gradient_f64},
    .batch_vectors = ADJ_BATCH_VECTORS,
    .interleave = {interleave_f32, interleave_f64},
    .deinterleave = {deinterleave_f32, deinterleave_f64},
    .transpose = {transpose_f32, transpose_f64},
    .rows_sum_add = {rows_sum_add_f32, rows_sum_add_f64},
    .vector_math = {[ADJ_VECTOR_EXP] = {vector_exp_F32, vector_exp_F64},
                    [ADJ_VECTOR_LOG] = {vector_log_F32, vector_log_F64},
                    [ADJ_VECTOR_LOG1P] = {vector_log1p_F32, vector_log1p_F64},
                    [ADJ_VECTOR_TANH] = {vector_tanh_F32, vector_tanh_F64},
                    [ADJ_VECTOR_SIGMOID] = {vector_sigmoid_F32, vector_sigmoid_F64}},
};

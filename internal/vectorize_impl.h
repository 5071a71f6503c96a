/* How the hot loops left to the compiler's vectorizer get wide vectors: the
 * kernels (kernels/) and the layers' own elementwise loops (layers/) mark
 * them with these. */
#ifndef ADJOIN_INTERNAL_VECTORIZE_IMPL_H
#define ADJOIN_INTERNAL_VECTORIZE_IMPL_H

/* Before a loop whose iterations are independent although its pointers may be
 * equal (in-place elementwise maps): lets GCC vectorize it as it is, without
 * a runtime aliasing test and a scalar copy of the loop to fall back on. */
#if defined(__GNUC__) && !defined(__clang__)
#define ADJ_IVDEP _Pragma("GCC ivdep")
#else
#define ADJ_IVDEP
#endif

/* Before a hot loop left to the compiler's vectorizer: compiled for
 * x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA) and the baseline, the best the
 * CPU runs chosen when the library loads (GCC's target_clones), so one build
 * uses wide vectors where they exist and still runs everywhere.  A build that
 * pins one level (meson option kernel_isa) defines ADJ_NO_KERNEL_CLONES and
 * compiles everything for that level.  The direct convolution's hand-blocked
 * kernels are built per level instead (kernel_levels.c): their
 * register blocks depend on the level's register file. */
#if !defined(ADJ_NO_KERNEL_CLONES) && defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    defined(__has_attribute)
#if __has_attribute(target_clones)
#define ADJ_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#endif
#ifndef ADJ_KERNEL_CLONES
#define ADJ_KERNEL_CLONES
#endif

/* Before a helper that an ADJ_KERNEL_CLONES loop calls: inlined into each
 * clone, so its loops take the clone's level (a call would run the helper as
 * the file is compiled, at the baseline). */
#define ADJ_CLONE_HELPER static inline __attribute__((always_inline))

#endif

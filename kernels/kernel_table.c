/* The kernel table of the best instruction-set level this build has and this
 * CPU runs (kernel_table.h). */
#include "kernel_table.h"

#include "cpu_impl.h"

/* The levels built are named by ADJ_KERNEL_HAVE_V4, _V3 and _BASELINE
 * (kernels/meson.build): all three under kernel_isa=auto on x86-64, the best
 * the CPU runs chosen here; one alone when the build pins a level (the rest
 * of the library is then compiled for that level too, so it runs only on
 * CPUs that have it) or the target is not x86-64. */
const adj_kernel_table *adj_kernel_table_select(void) {
  static const adj_kernel_table *chosen;
  const adj_kernel_table *k = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
  if (k) return k;
#if defined(ADJ_KERNEL_HAVE_BASELINE)
  k = &adj_kernel_table_baseline;
#endif
#if defined(ADJ_KERNEL_HAVE_V3)
  if (!k || adj_cpu_x86_level() >= 3) k = &adj_kernel_table_v3;
#endif
#if defined(ADJ_KERNEL_HAVE_V4)
  if (!k || adj_cpu_x86_level() >= 4) k = &adj_kernel_table_v4;
#endif
  __atomic_store_n(&chosen, k, __ATOMIC_RELEASE);
  return k;
}

void adj_vector_math(adj_vector_function f, size_t element_bytes, const void *x, void *y, int64_t n) {
  adj_kernel_table_select()->vector_math[f][element_bytes == sizeof(double)](x, y, n);
}

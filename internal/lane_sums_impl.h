/* Sums carried in ADJ_LANE_SUMS float64 lanes, for the losses' reductions:
 * lane l takes the elements j = l mod ADJ_LANE_SUMS of each chunk (so the
 * loop vectorizes without reordering any one sum) and the lanes are added in
 * a fixed order at the end.  A sum then depends on its chunks alone, never on
 * the vector width of the level it runs at. */
#ifndef ADJOIN_INTERNAL_LANE_SUMS_IMPL_H
#define ADJOIN_INTERNAL_LANE_SUMS_IMPL_H

#include <stdint.h>

#include "vectorize_impl.h"

enum { ADJ_LANE_SUMS = 8 };

/* lanes[j mod ADJ_LANE_SUMS] += v[j] for j < m, v float or double.  Inlined,
 * so a caller built per level (ADJ_KERNEL_CLONES) gets its level's vectors. */
#define ADJ_LANE_SUMS_ADD(T, name)                                          \
  ADJ_CLONE_HELPER void name(double *lanes, const T *v, int64_t m) {        \
    int64_t j = 0;                                                          \
    for (; j + ADJ_LANE_SUMS <= m; j += ADJ_LANE_SUMS)                      \
      for (int l = 0; l < ADJ_LANE_SUMS; l++) lanes[l] += (double)v[j + l]; \
    for (int l = 0; j < m; j++, l++) lanes[l] += (double)v[j];              \
  }
ADJ_LANE_SUMS_ADD(float, adj_lane_sums_add_f32)
ADJ_LANE_SUMS_ADD(double, adj_lane_sums_add_f64)
#undef ADJ_LANE_SUMS_ADD

/* lanes[0] + lanes[1] + ... in that order. */
static inline double adj_lane_sums_total(const double *lanes) {
  double total = 0;
  for (int l = 0; l < ADJ_LANE_SUMS; l++) total += lanes[l];
  return total;
}

#endif

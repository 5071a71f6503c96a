/* The CPU's x86-64 level and model (internal/cpu_impl.h). */
#include <stdbool.h>
#include <stdio.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "cpu_impl.h"

/* GCC names the levels as its -march does, so what it detects is exactly what
 * kernels built for a level need.  clang 14 knows no level names: there the
 * levels' defining features are asked one by one (x86-64-v3: AVX, AVX2, BMI1,
 * BMI2, FMA, which no CPU has without the level's F16C, LZCNT and MOVBE;
 * x86-64-v4: AVX-512 F, BW, CD, DQ and VL). */
static int adj_cpu_detect_level(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
#if defined(__clang__)
  bool v3 = __builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") &&
            __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("fma");
  bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vl");
#else
  bool v3 = __builtin_cpu_supports("x86-64-v3"), v4 = __builtin_cpu_supports("x86-64-v4");
#endif
  return v4 ? 4 : v3 ? 3 : 0;
#else
  return 0;
#endif
}

int adj_cpu_x86_level(void) {
  static int level = -1;
  int known = __atomic_load_n(&level, __ATOMIC_RELAXED);
  if (known < 0) __atomic_store_n(&level, known = adj_cpu_detect_level(), __ATOMIC_RELAXED);
  return known;
}

void adj_cpu_family_model(char *text, size_t size) {
  snprintf(text, size, "?");
#if defined(__x86_64__) && defined(__GNUC__)
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
    unsigned family = (eax >> 8) & 0xf, model = (eax >> 4) & 0xf;
    if (family == 6 || family == 15) model |= ((eax >> 16) & 0xf) << 4;
    if (family == 15) family += (eax >> 20) & 0xff;
    snprintf(text, size, "family %u model %u", family, model);
  }
#endif
}

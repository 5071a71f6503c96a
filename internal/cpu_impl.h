/* The CPU the library runs on, as the kernels' dispatch and the OpenBLAS
 * advice (adjoin/threads.h) need it: one place that reads it. */
#ifndef ADJOIN_CORE_CPU_IMPL_H
#define ADJOIN_CORE_CPU_IMPL_H

#include <stddef.h>

/* The x86-64 level this CPU runs: 4 (x86-64-v4, AVX-512), 3 (x86-64-v3, AVX2
 * and FMA), or 0 for anything less or another architecture.  Read once. */
int adj_cpu_x86_level(void);

/* "family F model M" of an x86-64 CPU (as CPUID reports them, extended
 * fields included), "?" elsewhere. */
void adj_cpu_family_model(char *text, size_t size);

#endif

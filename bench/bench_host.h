/* Where a benchmark ran: the CPU model and the instruction-set level of the
 * kernels, for the first line of its report. */
#ifndef ADJOIN_BENCH_HOST_H
#define ADJOIN_BENCH_HOST_H

#include <stddef.h>

/* The CPU's model name (/proc/cpuinfo; "?" where unknown) into text. */
void bench_cpu_model(char *text, size_t size);

#endif

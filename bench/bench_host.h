/* Where a benchmark ran: the CPU model and the instruction-set level of the
 * kernels, for the first line of its report. */
#ifndef ADJOIN_BENCH_HOST_H
#define ADJOIN_BENCH_HOST_H

#include <stdbool.h>
#include <stddef.h>

/* The CPU's model name (/proc/cpuinfo; "?" where unknown) into text. */
void bench_cpu_model(char *text, size_t size);

/* A positional argument `what` read as a whole number in [min, max] into
 * *value; false, with a line on stderr naming the argument and the text given
 * (when `say`: rank 0 says it, the others fail silently alike), otherwise. */
bool bench_parse_count(const char *program, const char *what, const char *text, long long min, long long max,
                       bool say, long long *value);

#endif

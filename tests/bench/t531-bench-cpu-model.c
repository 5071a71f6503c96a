/* The CPU model the benchmarks print on their first line, read from
 * /proc/cpuinfo texts of an x86 host, of aarch64 hosts (which print no model
 * name, only the core's MIDR fields), and of neither; then from this host's
 * own file, which must name something on x86 and aarch64 alike. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bench_host.h"
#include "harness.h"

static void check_text(adj_test *t, const char *label, const char *cpuinfo, const char *expected) {
  char model[128];
  FILE *f = fmemopen((void *)cpuinfo, strlen(cpuinfo), "r");
  ADJ_TEST_CHECK(t, f != NULL, "%s: fmemopen failed", label);
  if (!f) return;
  bench_cpu_model_read(f, model, sizeof model);
  fclose(f);
  adj_test_report(t, "  %-28s '%s'", label, model);
  ADJ_TEST_CHECK(t, !strcmp(model, expected), "%s: read '%s', expected '%s'", label, model, expected);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t531-bench-cpu-model");
  check_text(&t, "x86-64",
             "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
             "model name\t: AMD EPYC 7B13\nflags\t\t: fpu avx2\n\nprocessor\t: 1\nmodel name\t: other\n",
             "AMD EPYC 7B13");
  check_text(&t, "aarch64, Neoverse-V2",
             "processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd sve2\nCPU implementer\t: 0x41\n"
             "CPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\nCPU revision\t: 1\n\n"
             "processor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n",
             "Arm Neoverse-V2 (implementer 0x41 part 0xd4f)");
  check_text(&t, "aarch64, a part not named",
             "processor\t: 0\nCPU implementer\t: 0xc0\nCPU architecture: 8\nCPU part\t: 0xac3\n",
             "implementer 0xc0 part 0xac3");
  check_text(&t, "aarch64, no part", "processor\t: 0\nCPU implementer\t: 0x41\n", "?");
  check_text(&t, "empty", "", "?");
  char model[128];
  bench_cpu_model(model, sizeof model);
  adj_test_report(&t, "  %-28s '%s'", "this host", model);
#if defined(__x86_64__) || defined(__aarch64__)
  FILE *f = fopen("/proc/cpuinfo", "r");
  bool readable = f != NULL;
  if (f) fclose(f);
  ADJ_TEST_CHECK(&t, !readable || strcmp(model, "?"), "this host has /proc/cpuinfo but no model was read from it");
#endif
  return adj_test_finish(&t);
}
